"""What a harness checks before a run starts: each mistake is an error before any provider call.

Configuration mistakes are :class:`ConfigError`; a criterion whose commands
the policy does not allow outright, or a provider endpoint it does not, is a
:class:`RefusedError`.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from io_harness._mcp import McpServer
from io_harness._net import RunNet
from io_harness._run_ids import new_run_id
from io_harness.contract import TaskContract
from io_harness.errors import ConfigError, RefusedError, ResumeError, run_already_stored
from io_harness.policy._approval import ApprovalRequest, Approver, Decision
from io_harness.policy._gate import Access, Deferred, Gate, Refused, canonical_argv
from io_harness.policy._policy import Policy
from io_harness.policy._rules import Act, Effect, Verdict, normalise_target
from io_harness.pricing import PriceTable
from io_harness.providers import Provider, members_of
from io_harness.roles import Roles
from io_harness.store import Store
from io_harness.tools._caller import Toolbox

__all__ = [
    "caller_toolbox",
    "check_criterion",
    "check_endpoints",
    "check_mcp_start",
    "check_new_run_id",
    "check_prices",
    "check_provider",
    "check_types",
    "checked_labels",
    "checked_option",
    "mcp_start_refusal",
    "new_run_id",
    "roles_given",
    "sync",
]

T = TypeVar("T")


def sync(coroutine: Coroutine[Any, Any, T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    coroutine.close()
    raise ConfigError("called from inside a running event loop; await the async form instead")


def caller_toolbox(tools: object) -> Toolbox:
    """The caller's tools as a validated :class:`Toolbox`."""
    if tools is None:
        return Toolbox()
    if isinstance(tools, Toolbox):
        box = tools
    elif isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Iterable):
        raise ConfigError(f"tools must be a Toolbox or a list of tools, not {type(tools).__name__}")
    else:
        box = Toolbox(tools)
    box.validate()
    return box


def check_provider(provider: object) -> None:
    if not isinstance(provider, Provider):
        raise ConfigError(
            f"{type(provider).__name__} is not a Provider: it needs name, model, "
            "endpoints() and async complete(request)"
        )
    for attribute in ("name", "model"):
        value = getattr(provider, attribute)
        if not isinstance(value, str) or not value:
            raise ConfigError(
                f"the provider's {attribute} must be a non-empty string, not {value!r}"
            )


def check_types(*, store: object, policy: object, approver: object, prices: object) -> None:
    """Options of the wrong type are ConfigErrors here, not failures deep in a run."""
    if store is not None and not isinstance(store, Store):
        raise ConfigError(f"store must be a Store, not {type(store).__name__}")
    if policy is not None and not isinstance(policy, Policy):
        raise ConfigError(f"policy must be a Policy, not {type(policy).__name__}")
    if approver is not None and not isinstance(approver, Approver):
        raise ConfigError(
            f"{type(approver).__name__} is not an Approver: it needs "
            "async decide(request, context) -> Decision"
        )
    if prices is not None and not isinstance(prices, PriceTable):
        raise ConfigError(f"prices must be a PriceTable, not {type(prices).__name__}")


def check_prices(contract: TaskContract, provider: Provider, prices: PriceTable | None) -> None:
    """A cost budget needs a price for every model the run may ask."""
    if contract.budget.max_cost is None:
        return
    for member in members_of(provider):
        if prices is None or prices.price_for(member.model) is None:
            raise ConfigError(
                f"the budget has max_cost but {member.name} model {member.model!r} has no "
                "price; give the harness a PriceTable (ioh: --prices FILE) that prices it"
            )


def checked_labels(labels: Mapping[str, str] | None) -> dict[str, str]:
    if labels is None:
        return {}
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise ConfigError("labels must map strings to strings")
    if any("\x00" in text for pair in labels.items() for text in pair):
        # No text column of PostgreSQL's can hold one, and one would break every filter.
        raise ConfigError("a label's key or value holds a NUL character")
    return dict(labels)


def missing_program(argv: Sequence[str]) -> str | None:
    """Why the program of a criterion's command cannot be found, if it cannot.

    A bare name must be on ``PATH`` and an absolute path must be an executable
    file. A relative path (``./check.sh``) is the workspace's, which the agent
    may be meant to write, so it is not judged before the run.
    """
    program = argv[0]
    if "/" not in program:
        return None if shutil.which(program) else f"{program!r} is not found on PATH"
    path = Path(program)
    if path.is_absolute() and not (path.is_file() and os.access(path, os.X_OK)):
        return f"{program!r} is not an executable file"
    return None


def check_criterion(contract: TaskContract, gate: Gate) -> None:
    """The criterion's commands must be able to run: each program found, and each allowed
    outright (a check cannot ask a person). Otherwise every step's check would fail, and
    the run spend its budget on a model that cannot fix it."""
    for argv in contract.verify.commands():
        missing = missing_program(argv)
        if missing is not None:
            raise ConfigError(f"the criterion's program {missing}; it could never pass")
        verdict = gate.check_outright(canonical_argv(argv))
        if verdict.effect is not Effect.ALLOW:
            program = argv[0].rsplit("/", 1)[-1]
            raise RefusedError(
                f"the criterion runs {argv[0]!r}, but {verdict.describe()}; a check "
                "cannot wait for approval, so the policy must allow it outright "
                f"(.allow_exec({program!r}), or allow_exec = [{program!r}] in a "
                "[policy.layers.NAME] table)"
            )


def check_endpoints(provider: Provider, net: RunNet) -> None:
    """The model cannot wait for a person: each endpoint must be allowed outright.

    The ``provider`` layer allows every endpoint, so only a deny rule (which
    beats any allow) or an ask rule (which beats it too) refuses one. An ask
    is refused rather than asked: the provider's calls happen mid-step, where
    a run cannot stop to wait, and a run that could never call its model is
    better refused before it starts.
    """
    for member in members_of(provider):
        for endpoint in member.endpoints():
            verdict = net.provider_verdict(endpoint)
            if verdict.effect is Effect.ALLOW:
                continue
            if verdict.effect is Effect.ASK:
                raise RefusedError(
                    f"{member.name} connects to {endpoint}, but {verdict.describe()}; an "
                    "ask cannot be answered for the model's own endpoint (the provider "
                    "calls it mid-step), so the policy must not ask about it: narrow the "
                    "ask rule"
                )
            raise RefusedError(
                f"{member.name} connects to {endpoint}, but {verdict.describe()}; a deny "
                "rule wins over the provider layer's allow, so the run could never reach "
                "its model: remove the rule or choose another provider"
            )


async def check_mcp_start(servers: Sequence[McpServer], gate: Gate) -> None:
    """Starting a server is an act: exec of its program, or net of its ``host:port``.

    A server starts before the first step, before the run is stored, so a
    start the policy asks about goes to the approver now and cannot defer: an
    approver's yes starts it (and lets its connections through), anything
    else is a :class:`RefusedError`, and so is a deny. Each verdict is a trace row.
    """
    for server in servers:
        access = server.start_access()

        def request(
            verdict: Verdict, server: McpServer = server, access: Access = access
        ) -> ApprovalRequest:
            return ApprovalRequest(
                id=secrets.token_hex(6),
                run_id=gate.run_id,
                step=0,
                call_id="",
                tool=f"start the MCP server {server.name}",
                arguments={"server": server.name, "target": server.target()},
                act=verdict.act,
                target=verdict.target,
                argv=access.argv,
                verdict=verdict,
            )

        clearance = await gate.authorize(access, request)
        if isinstance(clearance, Refused):
            raise RefusedError(f"MCP server {server.name!r}: {clearance.observation}")
        if isinstance(clearance, Deferred):
            raise RefusedError(
                f"MCP server {server.name!r}: starting it is {clearance.request.verdict.describe()}"
                "; a server starts before the run exists, so the ask cannot defer: give the "
                "harness an approver that decides it, or allow it outright"
            )


def mcp_start_refusal(server: McpServer, gate: Gate) -> str | None:
    """Why the policy does not let ``server`` start again (a restart), or ``None``.

    A restart happens inside a tool call, where no one can be asked: it needs
    an outright allow, or the approval its first start got.
    """
    access = server.start_access()
    target = normalise_target(access.act, access.target)
    settled = gate.scope.settled.get(("", access.act, target))
    if isinstance(settled, Decision) and settled.kind == "approve":
        return None
    verdict = gate.check_outright(access)
    if verdict.effect is Effect.ALLOW:
        return None
    how = "allow_exec" if access.act is Act.EXEC else "allow_net"
    return (
        f"starting it is {verdict.describe()}; a restart happens inside a tool call and "
        f"cannot wait for approval, so the policy must allow it outright "
        f"({how}({verdict.target!r}))"
    )


def check_new_run_id(store: Store, run_id: str) -> None:
    """An id already in the store is a :class:`ConfigError`, said before anything starts."""
    try:
        store.load_run(run_id)
    except ResumeError:
        return
    raise run_already_stored(run_id)


def checked_option(value: T | None, kind: type[T], name: str) -> T | None:
    """``value`` when it is a ``kind`` (or ``None``); a ConfigError naming ``name`` otherwise."""
    if value is not None and not isinstance(value, kind):
        raise ConfigError(f"{name} must be a {kind.__name__}, not {type(value).__name__}")
    return value


def roles_given(roles: Roles | str | Path | None) -> Roles | None:
    """The roles a harness is given: loaded from a roles file's path, or as they are."""
    if isinstance(roles, str | Path):
        return Roles.from_toml(roles)
    if roles is not None and not isinstance(roles, Roles):
        raise ConfigError(f"roles must be a Roles or a roles file, not {type(roles).__name__}")
    return roles
