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
from collections.abc import Coroutine
from typing import Any, TypeVar

from pydantic import ValidationError

from io_harness._validation import loading
from io_harness.contract import TaskContract
from io_harness.errors import ConfigError, ResumeError
from io_harness.loop._context import system_prompt, task_message
from io_harness.loop._engine import Engine, event_row, run_started
from io_harness.loop._outcome import RunOutcome, RunResult
from io_harness.observe import Observer
from io_harness.pricing import PriceTable
from io_harness.providers import Provider, members_of
from io_harness.store import Store
from io_harness.store._records import NewRun
from io_harness.tools import Toolbox, Workspace, single_file_tools, workspace_tools
from io_harness.tools._text import remove_partial_writes

__all__ = ["RunOutcome", "RunResult", "resume", "resume_sync", "run", "run_sync"]

T = TypeVar("T")


def new_run_id() -> str:
    """A fresh run id: its start time, sortable, and a random suffix."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def _toolbox(contract: TaskContract) -> Toolbox:
    """The run's tools, after removing what writes cut short by a crash left behind."""
    if contract.mode == "file":
        assert contract.path is not None
        remove_partial_writes(contract.root.glob(f".{contract.path.name}.*"))
        return Toolbox(single_file_tools(contract.path))
    workspace = Workspace(contract.root)
    remove_partial_writes(workspace.walk())
    return Toolbox(workspace_tools(workspace))


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
) -> RunResult:
    """Run the agent on ``contract`` until the criterion passes or a budget ends it.

    Every step is committed to ``store`` (an in-memory store if none is given)
    before the next begins. ``run_id`` names the run (an id already in the
    store is a :class:`ConfigError`); by default one is generated.
    ``observer`` receives each :data:`~io_harness.observe.RunEvent`.
    ``prices`` prices each model call; without it calls are counted as
    unpriced, and a contract with ``budget.max_cost`` is a :class:`ConfigError`.

    Configuration mistakes raise :class:`ConfigError` before any provider call;
    everything that happens after is in the returned :class:`RunResult`.
    """
    _check_provider(provider)
    contract.check()
    _check_prices(contract, provider, prices)
    store = store if store is not None else Store.memory()
    run_id = run_id or new_run_id()
    with store.lease(run_id):
        return await _start(contract, provider, store, run_id, observer, prices)


async def _start(
    contract: TaskContract,
    provider: Provider,
    store: Store,
    run_id: str,
    observer: Observer | None,
    prices: PriceTable | None,
) -> RunResult:
    toolbox = _toolbox(contract)
    started_at = time.time()
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
        )
    )
    stored = store.load_run(run_id)
    engine = Engine(contract, provider, store, toolbox, stored, observer, prices)
    return await engine.drive(resumed=False)


async def resume(
    run_id: str,
    provider: Provider,
    *,
    store: Store,
    observer: Observer | None = None,
    prices: PriceTable | None = None,
) -> RunResult:
    """Continue a run from its last committed step, with the same conversation.

    Completed steps are not repeated, tokens already spent still count, and
    wall time counts from the run's start, downtime included. A finished run
    returns its stored result unchanged. An unknown id is a
    :class:`ResumeError`. Money already spent still counts against
    ``max_cost``; give the same ``prices`` as the run started with.
    """
    _check_provider(provider)
    with store.lease(run_id):
        return await _continue(run_id, provider, store, observer, prices)


async def _continue(
    run_id: str,
    provider: Provider,
    store: Store,
    observer: Observer | None,
    prices: PriceTable | None,
) -> RunResult:
    stored = store.load_run(run_id)
    if stored.status == "finished":
        return RunResult.from_stored(stored)
    try:
        with loading():
            contract = TaskContract.model_validate_json(stored.contract_json)
    except ValidationError as exc:
        raise ResumeError(
            f"run {run_id!r} holds a contract this version cannot read: {exc}"
        ) from None
    contract.check()
    _check_prices(contract, provider, prices)
    toolbox = _toolbox(contract)
    engine = Engine(contract, provider, store, toolbox, stored, observer, prices)
    return await engine.drive(resumed=True)


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
) -> RunResult:
    """:func:`run` for callers without an event loop."""
    return _sync(
        run(contract, provider, store=store, run_id=run_id, observer=observer, prices=prices)
    )


def resume_sync(
    run_id: str,
    provider: Provider,
    *,
    store: Store,
    observer: Observer | None = None,
    prices: PriceTable | None = None,
) -> RunResult:
    """:func:`resume` for callers without an event loop."""
    return _sync(resume(run_id, provider, store=store, observer=observer, prices=prices))
