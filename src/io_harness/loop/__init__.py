"""Running and resuming: the one entry point each, over one step loop.

``run`` creates the run in the store and drives it; ``resume`` loads a run
and drives it from its last committed step. Both go through
:class:`~io_harness.loop._engine.Engine`, which always starts from what the
store holds.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from io_harness.contract import TaskContract
from io_harness.errors import ConfigError, RefusedError, StorageError
from io_harness.loop._context import system_prompt, task_message
from io_harness.loop._deferral import Resumption
from io_harness.loop._engine import Engine
from io_harness.loop._events import event_row, run_started
from io_harness.loop._outcome import RunOutcome, RunResult
from io_harness.loop._resuming import decision_for, stored_contract, stored_gate
from io_harness.loop._sandboxing import (
    DEFAULT_SANDBOX,
    RunSandbox,
    SandboxChoice,
    choose_sandbox,
)
from io_harness.observe import Observer
from io_harness.policy._approval import Approver, Decision
from io_harness.policy._gate import Access, Gate, canonical_argv
from io_harness.policy._policy import Policy
from io_harness.policy._rules import Act, Effect
from io_harness.pricing import PriceTable
from io_harness.providers import Provider, members_of
from io_harness.sandbox import NetCheck
from io_harness.store import Store
from io_harness.store._records import NewRun
from io_harness.tools import ExecTool, RunTools, Workspace, single_file_tools, workspace_tools
from io_harness.tools._text import remove_partial_writes

__all__ = [
    "DEFAULT_SANDBOX",
    "RunOutcome",
    "RunResult",
    "SandboxChoice",
    "resume",
    "resume_sync",
    "run",
    "run_sync",
]

T = TypeVar("T")


def new_run_id() -> str:
    """A fresh run id: its start time, sortable, and a random suffix."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def _toolbox(contract: TaskContract, gate: Gate, chosen: RunSandbox, started_at: float) -> RunTools:
    """The run's tools, after removing what writes cut short by a crash left behind."""
    if contract.mode == "file":
        assert contract.path is not None
        remove_partial_writes(contract.root.glob(f".{contract.path.name}.*"))
        return RunTools(single_file_tools(contract.path))
    workspace = Workspace(contract.root, may_read=gate.readable)
    remove_partial_writes(workspace.walk())
    tools = workspace_tools(workspace)
    if "exec" in contract.tools:
        wall = contract.budget.max_wall_seconds
        wall_end = started_at + wall if wall is not None else None
        tools.append(ExecTool(workspace, chosen.sandbox, wall_end, _net_check(gate)))
    return RunTools(tools)


def _net_check(gate: Gate) -> NetCheck:
    """Each connection a command makes through the sandbox's proxy is a ``net`` act.

    A command cannot wait for a person mid-connection, so only an outright
    allow lets it through; the verdict is a trace row of the call.
    """

    async def check(host: str, port: int) -> bool:
        return gate.check_outright(Access(Act.NET, f"{host}:{port}")).effect is Effect.ALLOW

    return check


def _check_criterion(contract: TaskContract, gate: Gate) -> None:
    """The criterion cannot ask a person: each command it runs must be allowed outright."""
    for argv in contract.verify.commands():
        verdict = gate.check_outright(canonical_argv(argv))
        if verdict.effect is not Effect.ALLOW:
            program = argv[0].rsplit("/", 1)[-1]
            raise RefusedError(
                f"the criterion runs {argv[0]!r}, but {verdict.describe()}; a check "
                "cannot wait for approval, so the policy must allow it outright "
                f"(.allow_exec({program!r}), or allow_exec = [{program!r}] in a "
                "[policy.layers.NAME] table)"
            )


def _checked_labels(labels: Mapping[str, str] | None) -> dict[str, str]:
    if labels is None:
        return {}
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise ConfigError("labels must map strings to strings")
    return dict(labels)


def _check_options(store: object, run_id: object, policy: object) -> None:
    """Arguments of the wrong type are ConfigErrors, not failures deep in the run."""
    if store is not None and not isinstance(store, Store):
        raise ConfigError(f"store must be a Store, not {type(store).__name__}")
    if run_id is not None and (not isinstance(run_id, str) or not run_id):
        raise ConfigError(f"run_id must be a non-empty string, not {run_id!r}")
    if policy is not None and not isinstance(policy, Policy):
        raise ConfigError(f"policy must be a Policy, not {type(policy).__name__}")


def _check_approver(approver: object) -> None:
    if approver is not None and not isinstance(approver, Approver):
        raise ConfigError(
            f"{type(approver).__name__} is not an Approver: it needs "
            "async decide(request, context) -> Decision"
        )


def _check_prices(contract: TaskContract, provider: Provider, prices: PriceTable | None) -> None:
    """A cost budget needs a price for every model the run may ask."""
    if contract.budget.max_cost is None:
        return
    for member in members_of(provider):
        if prices is None or prices.price_for(member.model) is None:
            raise ConfigError(
                f"the budget has max_cost but {member.name} model {member.model!r} has no "
                "price; give run() a PriceTable (ioh: --prices FILE) that prices it"
            )


def _check_provider(provider: object) -> None:
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


async def run(
    contract: TaskContract,
    provider: Provider,
    *,
    store: Store | None = None,
    run_id: str | None = None,
    observer: Observer | None = None,
    prices: PriceTable | None = None,
    policy: Policy | None = None,
    approver: Approver | None = None,
    labels: Mapping[str, str] | None = None,
    sandbox: SandboxChoice = DEFAULT_SANDBOX,
) -> RunResult:
    """Run the agent on ``contract`` until the criterion passes or a budget ends it.

    Every step is committed to ``store`` (an in-memory store if none is given)
    before the next begins. ``run_id`` names the run (an id already in the
    store is a :class:`ConfigError`); by default one is generated.
    ``observer`` receives each :data:`~io_harness.observe.RunEvent`.
    ``prices`` prices each model call; without it calls are counted as
    unpriced, and a contract with ``budget.max_cost`` is a :class:`ConfigError`.

    ``policy`` governs every act the agent's tools and the criterion perform
    (:meth:`Policy.permissive` when omitted; tools stay inside the workspace
    either way) and is stored with the run. ``approver`` decides the acts the
    policy asks about; without one, an ask defers: the run stops with
    ``AWAITING_APPROVAL`` and waits for a decision given to :func:`resume`.
    ``labels`` are string pairs stored with the run (``RunSummary.labels``),
    for the caller's own bookkeeping.

    ``sandbox`` is where the criterion's commands and the ``exec`` tool's run:
    by default the backend ``io_harness.sandbox.select()`` finds for the
    default :class:`~io_harness.sandbox.SandboxConfig`; a ``SandboxConfig`` is
    selected for; a :class:`~io_harness.sandbox.Sandbox` is used as given;
    ``None`` runs them directly, with no containment. The backend and why it
    was chosen are stored with the run.

    Configuration mistakes raise :class:`ConfigError`, a criterion whose
    commands the policy does not allow outright raises :class:`RefusedError`,
    and a sandbox configuration no backend here can give raises
    :class:`SandboxError`, all before any provider call; everything that
    happens after is in the returned :class:`RunResult`.
    """
    _check_provider(provider)
    _check_approver(approver)
    _check_options(store, run_id, policy)
    contract.check()
    _check_prices(contract, provider, prices)
    labels = _checked_labels(labels)
    policy = policy if policy is not None else Policy.permissive()
    store = store if store is not None else Store.memory()
    run_id = run_id or new_run_id()
    gate = Gate(policy, approver, goal=contract.goal, run_id=run_id)
    _check_criterion(contract, gate)
    chosen = choose_sandbox(sandbox)
    with store.lease(run_id):
        return await _start(
            contract, provider, store, run_id, observer, prices, gate, labels, chosen
        )


async def _start(
    contract: TaskContract,
    provider: Provider,
    store: Store,
    run_id: str,
    observer: Observer | None,
    prices: PriceTable | None,
    gate: Gate,
    labels: dict[str, str],
    chosen: RunSandbox,
) -> RunResult:
    started_at = time.time()
    toolbox = _toolbox(contract, gate, chosen, started_at)
    started = run_started(run_id, 0, contract, provider, resumed=False)
    store.create_run(
        NewRun(
            id=run_id,
            goal=contract.goal,
            contract_json=contract.model_dump_json(),
            system_prompt=system_prompt(contract, toolbox.names),
            tools_json="[" + ",".join(s.model_dump_json() for s in toolbox.specs) + "]",
            provider=provider.name,
            model=provider.model,
            started_at=started_at,
            messages=(task_message(contract),),
            events=(event_row(started),),
            policy_json=gate.policy.model_dump_json(),
            labels=labels,
            sandbox_json=chosen.record_json(),
        )
    )
    stored = store.load_run(run_id)
    engine = Engine(contract, provider, store, toolbox, stored, observer, prices, gate, chosen)
    return await engine.drive(resumed=False)


async def resume(
    run_id: str,
    provider: Provider,
    *,
    store: Store,
    observer: Observer | None = None,
    prices: PriceTable | None = None,
    approver: Approver | None = None,
    decision: Decision | None = None,
    policy: Policy | None = None,
    replace_policy: bool = False,
    sandbox: SandboxChoice = DEFAULT_SANDBOX,
) -> RunResult:
    """Continue a run from its last committed step, with the same conversation.

    Completed steps are not repeated, tokens already spent still count, and
    wall time counts from the run's start, downtime included. A finished run
    returns its stored result unchanged. An unknown id is a
    :class:`ResumeError`. Money already spent still counts against
    ``max_cost``; give the same ``prices`` as the run started with.

    The run keeps the policy it was stored with. Passing a different
    ``policy`` is a :class:`ConfigError` unless ``replace_policy=True`` says
    the change is meant; the new policy is then stored with the run.

    A run ``AWAITING_APPROVAL`` continues with the deferred act: ``decision``
    decides it (so does a decision stored earlier with ``ioh approve``, or
    else ``approver`` is asked); it is performed once, and the rest of its
    step and the run follow. ``approver`` decides later asks.

    ``sandbox`` is taken as by :func:`run`, except that by default a backend is
    selected for the configuration the run started with (a run started with
    ``sandbox=None`` is resumed in the default sandbox unless ``None`` is given
    again). A :class:`SandboxError` is raised before any provider call.
    """
    _check_provider(provider)
    _check_approver(approver)
    _check_options(store, run_id, policy)
    if store is None:
        raise ConfigError("resume needs the store the run is in")
    if decision is not None and not isinstance(decision, Decision):
        raise ConfigError(f"decision must be a Decision, not {type(decision).__name__}")
    with store.lease(run_id):
        stored = store.load_run(run_id)
        if stored.status == "finished":
            if decision is not None:
                raise ConfigError(f"run {run_id!r} has finished; it takes no decision")
            return RunResult.from_stored(stored)
        if stored.status == "awaiting" and stored.pending is None:
            raise StorageError(f"run {run_id!r} is awaiting approval but holds no open request")
        contract = stored_contract(stored)
        contract.check()
        _check_prices(contract, provider, prices)
        gate, replaced = stored_gate(stored, contract, approver, policy, replace_policy)
        resumption = Resumption(stored.pending, decision_for(stored, gate, decision), replaced)
        _check_criterion(contract, gate)
        chosen = choose_sandbox(sandbox, stored.sandbox_json, run_id)
        toolbox = _toolbox(contract, gate, chosen, stored.started_at)
        engine = Engine(contract, provider, store, toolbox, stored, observer, prices, gate, chosen)
        return await engine.drive(resumed=True, resumption=resumption)


def _sync(coroutine: Coroutine[Any, Any, T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    coroutine.close()
    raise ConfigError("called from inside a running event loop; await the async form instead")


def run_sync(
    contract: TaskContract,
    provider: Provider,
    *,
    store: Store | None = None,
    run_id: str | None = None,
    observer: Observer | None = None,
    prices: PriceTable | None = None,
    policy: Policy | None = None,
    approver: Approver | None = None,
    labels: Mapping[str, str] | None = None,
    sandbox: SandboxChoice = DEFAULT_SANDBOX,
) -> RunResult:
    """:func:`run` for callers without an event loop."""
    return _sync(
        run(
            contract,
            provider,
            store=store,
            run_id=run_id,
            observer=observer,
            prices=prices,
            policy=policy,
            approver=approver,
            labels=labels,
            sandbox=sandbox,
        )
    )


def resume_sync(
    run_id: str,
    provider: Provider,
    *,
    store: Store,
    observer: Observer | None = None,
    prices: PriceTable | None = None,
    approver: Approver | None = None,
    decision: Decision | None = None,
    policy: Policy | None = None,
    replace_policy: bool = False,
    sandbox: SandboxChoice = DEFAULT_SANDBOX,
) -> RunResult:
    """:func:`resume` for callers without an event loop."""
    return _sync(
        resume(
            run_id,
            provider,
            store=store,
            observer=observer,
            prices=prices,
            approver=approver,
            decision=decision,
            policy=policy,
            replace_policy=replace_policy,
            sandbox=sandbox,
        )
    )
