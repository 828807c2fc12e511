"""What a command runs with: the provider given, or the one a run was started with.

``ioh run`` stores its ``--provider`` specs as a label of the run, and the
contract file of its MCP servers and its roles file (every run stores its
prices), so ``ioh resume``, ``approve`` and ``deny`` need no flags to go on.
A spec's URL is stored without its credentials; such a run needs
``--provider`` again to go on. A vendor's spec is rebuilt at the base URL the run
started with (kept in its setup), not the one this shell's environment names.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from io_harness._contract_toml import mcp_servers
from io_harness._mcp import McpServer
from io_harness.errors import ConfigError
from io_harness.pricing import PriceTable
from io_harness.providers import Provider
from io_harness.providers._spec import provider_from_specs, spec_without_credentials
from io_harness.roles import Roles
from io_harness.store import Store

__all__ = [
    "MCP_LABEL",
    "PROVIDER_LABEL",
    "ROLES_LABEL",
    "WITHHELD",
    "launch_labels",
    "mcp_label",
    "prices_for",
    "replay_label",
    "roles_for",
    "roles_label",
    "stored_mcp",
    "stored_provider",
    "stored_roles",
]

MCP_LABEL = "ioh.mcp"
"""The label that keeps the contract file whose ``[[mcp]]`` servers a run was started with."""
PROVIDER_LABEL = "ioh.provider"
"""The label that keeps the provider specs a run was started with (a JSON list)."""
WITHHELD = "credentials-withheld:"
"""How a stored provider spec starts when its URL held credentials, which were left out."""
ROLES_LABEL = "ioh.roles"
"""The label that keeps the roles file a run's contract's role was read from."""
ROLES_FILE = "roles.toml"
"""The roles file ``ioh run`` reads beside a contract that names a role, unless told."""


def roles_for(contract_path: Path, role: str | None, given: Path | None) -> Roles | None:
    """The roles file of a contract that names a role: ``--roles``, else beside the contract."""
    if role is None:
        if given is not None:
            raise ConfigError(f'--roles: {contract_path} names no role (role = "NAME")')
        return None
    return Roles.from_toml(given if given is not None else contract_path.parent / ROLES_FILE)


def roles_label(roles: Roles | None) -> dict[str, str]:
    """What ``ioh run`` stores so a resume reads the same roles file again."""
    if roles is None or roles.source is None:
        return {}
    return {ROLES_LABEL: str(roles.source.absolute())}


def stored_roles(store: Store, run_id: str) -> Roles | None:
    """The roles file a run was started with by ``ioh run``, read again."""
    path = store.load_run(run_id).labels.get(ROLES_LABEL)
    return Roles.from_toml(path) if path is not None else None


def prices_for(args: argparse.Namespace) -> PriceTable | None:
    """The price table of ``--prices`` (a resumed run has its own stored otherwise)."""
    return PriceTable.from_toml(args.prices) if args.prices else None


def launch_labels(args: argparse.Namespace) -> dict[str, str]:
    """What ``ioh`` stores with a run so resume, approve and deny can do without flags."""
    specs = [
        f"replay:{Path(spec[7:].strip()).absolute()}" if spec.startswith("replay:") else spec
        for spec in (given.strip() for given in args.provider or ())
    ]
    stored = [_storable(spec) for spec in specs]
    return {PROVIDER_LABEL: json.dumps(stored)} if stored else {}


def _storable(spec: str) -> str:
    """``spec`` as the store may keep it: a URL's credentials are never stored."""
    shown = spec_without_credentials(spec)
    return shown if shown == spec else WITHHELD + shown


def mcp_label(contract: Path, servers: Sequence[McpServer]) -> dict[str, str]:
    """What ``ioh run`` stores so a resume starts the same MCP servers: the contract's path.

    The servers' configuration is read again from the file (it may hold secrets
    in ``env`` or ``headers``, which the store must not).
    """
    return {MCP_LABEL: str(contract.absolute())} if servers else {}


def stored_mcp(store: Store, run_id: str) -> tuple[McpServer, ...]:
    """The MCP servers of the contract file a run was started with by ``ioh run``."""
    path = store.load_run(run_id).labels.get(MCP_LABEL)
    if path is None:
        return ()
    try:
        return mcp_servers(Path(path))
    except ConfigError as exc:
        raise ConfigError(
            f"run {run_id!r} was started with the MCP servers of {path}, which do not load "
            f"now: {exc}"
        ) from None


def stored_provider(args: argparse.Namespace, store: Store) -> Provider | None:
    """The provider of ``--provider``, else the one the run was started with by ``ioh``,
    at the base URL it started with (a vendor's comes from the environment otherwise)."""
    if args.provider:
        return provider_from_specs(args.provider)
    run = store.load_run(args.run_id)
    stored = run.labels.get(PROVIDER_LABEL)
    if stored is None:
        return None
    try:
        specs = json.loads(stored)
    except json.JSONDecodeError:
        specs = None
    if not isinstance(specs, list) or not specs or not all(isinstance(s, str) for s in specs):
        raise ConfigError(
            f"run {args.run_id!r} has a label {PROVIDER_LABEL!r} that is not a JSON list of "
            f"provider specs ({stored!r}); give --provider SPEC"
        )
    for spec in specs:
        if spec.startswith(WITHHELD):
            raise ConfigError(
                f"run {args.run_id!r} was started with the provider {spec[len(WITHHELD) :]!r}, "
                "whose URL held credentials, which are never stored; give --provider SPEC "
                "again (or the key in the provider's API key variable, not in the URL)"
            )
    from io_harness.prepare._setup import RunSetup  # what the run started with, when resumed

    return provider_from_specs(specs, RunSetup.stored(run).started_base_urls())


def replay_label(cassette: Path) -> dict[str, str]:
    """The labels of a run that replays ``cassette`` (the demo)."""
    return {PROVIDER_LABEL: json.dumps([f"replay:{cassette.absolute()}"])}
