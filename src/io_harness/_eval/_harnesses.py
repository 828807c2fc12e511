"""The harness each run of a suite gets from its provider's specs, as ``ioh run`` builds one.

Everything a run needs is read and checked once, before the first run: the
price table, each case's contract file (its ``[policy]``, ``[sandbox]``,
``[[mcp]]`` and roles file) and each provider for each case. A run then gets
a provider of its own, since a provider may keep state across a run's calls
(a replay's place in its cassette).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from io_harness._contract_toml import mcp_servers, sandbox_config
from io_harness._eval._suite import Suite, SuiteCase, SuiteProvider
from io_harness._harness import Harness
from io_harness._mcp import McpServer
from io_harness._validation import read_toml
from io_harness.contract import TaskContract
from io_harness.errors import ConfigError
from io_harness.loop import DEFAULT_SANDBOX, SandboxChoice
from io_harness.policy import ApproveAll, Approver, DenyAll, Policy
from io_harness.pricing import PriceTable
from io_harness.providers import Provider
from io_harness.providers._spec import provider_from_specs
from io_harness.roles import Roles
from io_harness.store import Store

__all__ = ["ROLES_FILE", "SpecHarnesses", "SuiteRun"]

DENIED = 'nobody answers asks during an eval (approve = "approve-all" in the suite)'
"""Why an eval's runs are denied what the policy asks about, as the model reads it."""
ROLES_FILE = "roles.toml"
"""The roles file read beside a case's contract that names a role, as ``ioh run`` does."""


@dataclass(frozen=True, slots=True)
class SuiteRun:
    """One run a suite makes: its case, its provider, which repeat (from 1), the id it is
    stored under and its labels."""

    case: SuiteCase
    provider: SuiteProvider
    repeat: int
    run_id: str
    labels: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class _CaseSetup:
    """What a case's contract file says beside the contract, as ``ioh run`` reads it."""

    policy: Policy | None = None
    sandbox: SandboxChoice = DEFAULT_SANDBOX
    mcp: tuple[McpServer, ...] = ()
    roles: Roles | None = None


class SpecHarnesses:
    """``harness_for`` of :func:`run_suite` when the suite's providers are specs.

    Each run's harness stores into ``store``, is priced by the suite's price
    table, decides the policy's asks as the suite's ``approve`` says, and
    runs commands in ``sandbox`` (by default, what the case's ``[sandbox]``
    selects). A spec that names no provider, a key missing from the
    environment, a cassette that does not load or a contract file whose
    policy, sandbox, servers or roles do not load is a :class:`ConfigError`
    here, before any run.
    """

    def __init__(
        self, suite: Suite, store: Store, *, sandbox: SandboxChoice = DEFAULT_SANDBOX
    ) -> None:
        self.store = store
        self.prices = PriceTable.from_toml(suite.prices) if suite.prices is not None else None
        self.approver: Approver = (
            ApproveAll() if suite.approve == "approve-all" else DenyAll(DENIED)
        )
        self._setups = {case.name: _setup(case, sandbox) for case in suite.cases}
        for provider in suite.providers:
            if not provider.specs:
                raise ConfigError(
                    f"provider {provider.name!r} has no spec; give it one, or build its "
                    "harnesses with run_suite(harness_for=...)"
                )
            for case in suite.cases:
                _provider(case, provider)  # each spec is checked now, not at its first run

    def __call__(self, run: SuiteRun) -> Harness:
        """A harness for ``run``, with a provider of its own."""
        setup = self._setups[run.case.name]
        return Harness(
            _provider(run.case, run.provider),
            store=self.store,
            policy=setup.policy,
            approver=self.approver,
            sandbox=setup.sandbox,
            prices=self.prices,
            mcp=setup.mcp,
            roles=setup.roles,
        )


def _provider(case: SuiteCase, provider: SuiteProvider) -> Provider:
    try:
        return provider_from_specs(provider.specs_for(case))
    except ConfigError as exc:
        raise ConfigError(f"provider {provider.name!r} for case {case.name!r}: {exc}") from None


def _setup(case: SuiteCase, sandbox: SandboxChoice) -> _CaseSetup:
    if isinstance(case.contract, TaskContract):
        return _CaseSetup(sandbox=sandbox)
    path: Path = case.contract
    data = read_toml(path, "contract")
    contract = TaskContract.from_toml(path)
    if sandbox is DEFAULT_SANDBOX:
        sandbox = sandbox_config(path) or DEFAULT_SANDBOX
    return _CaseSetup(
        policy=Policy.from_table(data["policy"], str(path)) if "policy" in data else None,
        sandbox=sandbox,
        mcp=mcp_servers(path),
        roles=Roles.from_toml(path.parent / ROLES_FILE) if contract.role is not None else None,
    )
