"""A stored run prepared to go on: a resume, a queued job's drive, a sub-agent's drive.

A resume is prepared from what the store holds (its contract, policy,
prices, setup and sandbox), each checked against the harness now, under the
run's lease; a sub-agent of a tree goes on from its root. A sub-agent the
tree drives is prepared the same way from its own row (:func:`prepared_child`),
with the tree's kit and without opening anything of its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from io_harness._preflight import check_prices
from io_harness._queue._database import WAITING_LABEL
from io_harness.errors import ConfigError, ResumeError, StorageError
from io_harness.loop._deferral import Resumption, awaiting_outcome, stored_model
from io_harness.loop._outcome import RunResult
from io_harness.loop._sandboxing import choose_sandbox
from io_harness.policy._approval import ApprovalRequest, Decision
from io_harness.prepare._answers import check_fits, not_awaiting
from io_harness.prepare._continuing import More, continue_stored
from io_harness.prepare._kit import RunKit
from io_harness.prepare._prepared import PreparedRun
from io_harness.prepare._reading import (
    check_conversation,
    decision_for,
    stored_contract,
    stored_gate,
    stored_prices,
)
from io_harness.prepare._setup import RunSetup
from io_harness.prepare._start import (
    Start,
    checked_access,
    contained,
    opened,
    provider_of,
    role_of,
)
from io_harness.store import Store
from io_harness.store._records import StoredRun
from io_harness.trees import Containment, Tree, new_tree

if TYPE_CHECKING:
    from io_harness._harness import Harness

__all__ = ["awaiting", "decide_in_tree", "prepared_child", "prepared_stored", "stored_containment"]


@asynccontextmanager
async def prepared_stored(
    harness: Harness,
    run_id: str,
    decision: Decision | None,
    replace_policy: bool,
    more: More | None = None,
) -> AsyncIterator[PreparedRun | RunResult]:
    """The stored run ``run_id`` prepared to go on, under its lease; a finished run's result.

    ``run_id`` is a tree's root (a sub-agent goes on as part of its tree). With ``more``,
    a run that stopped without success is continued under its budget and message.
    """
    store = harness.store
    with store.lease(run_id):
        stored = store.load_run(run_id)
        if WAITING_LABEL in stored.labels and store.restart_clock(run_id, WAITING_LABEL):
            stored = store.load_run(run_id)  # a queued run's first drive: its clock starts
        continued = False
        if stored.status == "finished":
            if decision is not None and decision.kind == "answer":
                raise not_awaiting(stored, decision)
            if decision is not None:
                raise ConfigError(f"run {run_id!r} has finished; it takes no decision")
            if more is None:
                yield RunResult.from_stored(stored)
                return
            stored = continue_stored(store, stored, more.budget, more.message)
            continued = True
        elif more is not None:
            raise ResumeError(
                f"run {run_id!r} has not stopped (it is {stored.status}): resume it as it is; "
                "only a run that stopped without success is continued"
            )
        if stored.status == "awaiting" and stored.pending is None:
            raise StorageError(f"run {run_id!r} is awaiting approval but holds no open request")
        start, resumption = await _checked(harness, stored, decision, replace_policy)
        async with opened(harness, start) as kit:
            tree, node = None, None
            if stored.tree is not None:
                tree = new_tree(kit, run_id, stored_containment(stored), stored.started_at)
                node = tree.node(run_id, 0, start.contract, start.gate)
            tools = kit.tools(start.contract, start.gate, stored.started_at, node)
            yield PreparedRun(
                kit=kit,
                contract=start.contract,
                stored=stored,
                gate=start.gate,
                tools=tools,
                role=kit.run_role(start.contract, tools, start.gate),
                node=node,
                tree=tree,
                resumed=True,
                resumption=resumption,
                continued=continued,
            )


async def _checked(
    harness: Harness, stored: StoredRun, decision: Decision | None, replace_policy: bool
) -> tuple[Start, Resumption]:
    """The stored run's start, every check made against the harness now; how it goes on."""
    run_id = stored.id
    check_conversation(stored)
    contract = stored_contract(stored)
    contract.check()
    prices = harness.prices if harness.prices is not None else stored_prices(stored)
    role = role_of(harness, contract)
    setup = RunSetup.stored(stored)
    provider = provider_of(harness, role, setup.started_base_urls())
    setup.check_provider(provider, run_id)  # before the policy is asked about its endpoints
    check_prices(contract, provider, prices)
    gate, replaced = stored_gate(stored, contract, harness.approver, harness.policy, replace_policy)
    answers = harness.answerer is not None
    resumption = Resumption(stored.pending, decision_for(stored, gate, decision, answers), replaced)
    net = checked_access(contract, gate, provider)
    caller = setup.caller_tools_from(harness._tools_now(), run_id)
    skills = setup.skills_again(run_id, contract, gate)
    servers = setup.mcp_from(harness.mcp, run_id)
    chosen = choose_sandbox(harness.sandbox, stored.sandbox_json, run_id)
    sandbox = await contained(servers, contract, gate, chosen)
    start = Start(
        contract,
        role,
        provider,
        prices,
        gate,
        net,
        skills,
        servers,
        chosen,
        sandbox,
        caller,
        setup,
    )
    return start, resumption


def prepared_child(kit: RunKit, tree: Tree, stored: StoredRun) -> PreparedRun | RunResult:
    """The stored sub-agent ``stored`` prepared to go on in ``tree`` (its lease held by the
    caller); its stored result when it has finished, or its pause when it awaits a decision
    nobody here can give (no approver, none stored)."""
    if stored.status == "finished":
        return RunResult.from_stored(stored)
    check_conversation(stored)
    contract = stored_contract(stored)
    gate, _ = stored_gate(stored, contract, kit.approver, None, False)
    try:
        decision = decision_for(stored, gate, None, kit.answerer is not None)
    except ConfigError:  # it awaits a decision and nobody here can give it
        return awaiting(stored)
    assert stored.tree is not None
    node = tree.node(stored.id, stored.tree.depth, contract, gate)
    resumed = bool(stored.steps or stored.journal_json or stored.pending)
    tools = kit.tools(contract, gate, stored.started_at, node, sweep=resumed)
    return PreparedRun(
        kit=kit,
        contract=contract,
        stored=stored,
        gate=gate,
        tools=tools,
        role=kit.run_role(contract, tools, gate),
        node=node,
        owns_sessions=False,
        resumed=resumed,
        resumption=Resumption(stored.pending, decision),
    )


def awaiting(stored: StoredRun) -> RunResult:
    """The result of a run paused for a decision on the action it awaits."""
    assert stored.pending is not None
    request = stored_model(ApprovalRequest, stored.pending.request_json, "a request", stored.id)
    return RunResult(
        run_id=stored.id,
        outcome=awaiting_outcome(request),
        steps=stored.steps,
        usage=stored.usage,
        cost_micros=stored.cost_micros,
        unpriced_calls=stored.unpriced_calls,
        request=request,
    )


def stored_containment(stored: StoredRun) -> Containment:
    """The containment a tree's root was started with."""
    assert stored.tree is not None
    return stored_model(Containment, stored.tree.tree_json, "a containment", stored.id)


def decide_in_tree(store: Store, root_id: str, decision: Decision) -> Decision | None:
    """Store ``decision`` on the action the tree awaits, when an agent under the root awaits it.

    The root's own awaited action keeps the decision for the resume to use.
    """
    if store.approvals(root_id):
        return decision
    for tree_node in store.tree(root_id):
        waiting = store.approvals(tree_node.run.id)
        if waiting:
            request = stored_model(
                ApprovalRequest, waiting[0].request_json, "a request", tree_node.run.id
            )
            check_fits(tree_node.run.id, request, decision)
            store.decide(
                waiting[0].id,
                decision if decision.by else decision.model_copy(update={"by": "resume()"}),
            )
            return None
    if decision.kind == "answer":
        raise not_awaiting(store.load_run(root_id), decision)
    raise ConfigError(f"run {root_id!r} and its sub-agents await no decision; it takes none")
