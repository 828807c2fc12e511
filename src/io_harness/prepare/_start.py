"""What a new run and a stored one share on the way to their drive: a checked start, and
the block that holds it open (the run's network check, its private files, its MCP
sessions) around the kit every agent of its tree is driven with."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from io_harness._mcp import McpServer, ServerSandbox
from io_harness._mcp._session import check_sandboxes
from io_harness._net import RunNet, checking
from io_harness._preflight import (
    check_criterion,
    check_endpoints,
    check_mcp_start,
    mcp_start_refusal,
)
from io_harness.compaction import Compaction
from io_harness.contract import TaskContract
from io_harness.errors import ConfigError
from io_harness.loop._sandboxing import RunSandbox
from io_harness.policy._gate import Gate
from io_harness.prepare._kit import RunKit
from io_harness.prepare._setup import RunSetup, mcp_sessions, server_sandbox
from io_harness.pricing import PriceTable
from io_harness.providers import Provider
from io_harness.roles import Role
from io_harness.sandbox._shield import keeping_private
from io_harness.tools._caller import Toolbox
from io_harness.tools._skills import Skill

if TYPE_CHECKING:
    from io_harness._harness import Harness

__all__ = ["Start", "checked_access", "contained", "opened", "provider_of", "role_of"]


@dataclass(frozen=True)
class Start:
    """A run's start, checked: what a new run and a resumed one are both opened with."""

    contract: TaskContract
    role: Role | None
    provider: Provider
    prices: PriceTable | None
    gate: Gate
    net: RunNet
    skills: tuple[Skill, ...]
    servers: tuple[McpServer, ...]
    chosen: RunSandbox
    contained: ServerSandbox
    caller: Toolbox
    setup: RunSetup


def role_of(harness: Harness, contract: TaskContract) -> Role | None:
    """The role the contract names, from the harness's roles file."""
    if contract.role is None:
        return None
    if harness.roles is None:
        raise ConfigError(
            f"the contract names the role {contract.role!r}, but this harness has no roles "
            "file (Harness(roles=...))"
        )
    return harness.roles.get(contract.role)


def provider_of(
    harness: Harness, role: Role | None, base_urls: Mapping[str, str] | None = None
) -> Provider:
    """The role's provider when it names one; the harness's otherwise.

    ``base_urls`` are a resumed run's (by provider name): a role's spec is rebuilt at
    the base URL the run started with rather than at this environment's.
    """
    if role is None or role.provider is None:
        return harness.provider
    from io_harness.providers._spec import provider_from_specs

    return provider_from_specs([role.provider], base_urls)


def checked_access(contract: TaskContract, gate: Gate, provider: Provider) -> RunNet:
    """The run's network check, once its criterion's commands and its provider's endpoints
    are known to be allowed outright."""
    net = RunNet.of(gate, provider)
    check_criterion(contract, gate)
    check_endpoints(provider, net)
    return net


async def contained(
    servers: tuple[McpServer, ...], contract: TaskContract, gate: Gate, chosen: RunSandbox
) -> ServerSandbox:
    """Where the run's sandboxed servers run, once each can and may start."""
    sandbox = server_sandbox(contract, gate, chosen)
    check_sandboxes(servers, sandbox)
    await check_mcp_start(servers, gate)
    return sandbox


@asynccontextmanager
async def opened(harness: Harness, start: Start) -> AsyncIterator[RunKit]:
    """The run's kit, for as long as the block lasts: its network checked, its store's files
    hidden from its commands, its MCP sessions open."""
    with checking(start.net), keeping_private(harness.store.files()):
        may_start = partial(mcp_start_refusal, gate=start.gate)
        async with mcp_sessions(start.servers, may_start, start.contained) as sessions:
            yield RunKit(
                provider=start.provider,
                role=start.role,
                store=harness.store,
                observer=harness.observer,
                prices=start.prices,
                approver=harness.approver,
                chosen=start.chosen,
                caller=start.caller,
                skills=start.skills,
                memory=start.setup.memory,
                setup_json=start.setup.model_dump_json(),
                sessions=sessions,
                compaction=_compaction(harness, start.role),
                window=_window(harness, start.role, start.provider, start.prices),
                retry=harness.retry,
                answerer=harness.answerer,
                ask=start.setup.ask,
            )


def _compaction(harness: Harness, role: Role | None) -> Compaction | None:
    """The role's compaction setting when it has one; the harness's otherwise."""
    if role is not None and role.compaction is not None:
        return role.compaction
    return harness.compaction


def _window(
    harness: Harness, role: Role | None, provider: Provider, prices: PriceTable | None
) -> int | None:
    """The model's context window, when compaction is on: the role's, the provider's or the
    price table's, in that order; compaction without one is a ConfigError."""
    if _compaction(harness, role) is None:
        return None
    if role is not None and role.context_window is not None:
        return role.context_window
    said = getattr(provider, "context_window", None)
    if isinstance(said, int) and said > 0:
        return said
    price = prices.price_for(provider.model) if prices is not None else None
    if price is not None and price.context_window is not None:
        return price.context_window
    raise ConfigError(
        f"compaction needs the context window of {provider.model!r}: give it in the roles "
        "file (context_window), on the provider, or in the price table (context_window)"
    )
