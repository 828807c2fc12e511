"""The queue's view of stored runs: which are queued, their roots, queuing one again."""

from __future__ import annotations

from io_harness._queue._database import QUEUE_LABEL, put, queue_url
from io_harness.errors import ConfigError
from io_harness.policy._approval import ApprovalRequest, Decision
from io_harness.prepare._answers import check_fits
from io_harness.store import RunSummary, Store

__all__ = ["decide_awaited", "is_queued", "requeue_run", "summary_of"]


def is_queued(store: Store, run_id: str) -> bool:
    """Whether ``run_id`` (or its tree's root) was stored by ``enqueue``: its drives are
    the queue's, so a decision on it queues it again rather than resuming it here."""
    return QUEUE_LABEL in store.load_run(store.root_of(run_id)).labels


def decide_awaited(store: Store, root_id: str, decision: Decision) -> None:
    """Store ``decision`` on the act the tree of ``root_id`` awaits (the root's own first).

    A tree that awaits nothing is a :class:`ConfigError`.
    """
    if not isinstance(decision, Decision):
        raise ConfigError(f"decision must be a Decision, not {type(decision).__name__}")
    decided = decision if decision.by else decision.model_copy(update={"by": "requeue()"})
    agents = [root_id, *(node.run.id for node in store.tree(root_id) if node.run.id != root_id)]
    for agent in agents:
        waiting = [row for row in store.approvals(agent) if row.status == "pending"]
        if waiting:
            request = ApprovalRequest.model_validate_json(waiting[0].request_json)
            check_fits(agent, request, decided)
            store.decide(waiting[0].id, decided)
            return
    raise ConfigError(f"run {root_id!r} and its sub-agents await no decision; it takes none")


async def requeue_run(store: Store, run_id: str, decision: Decision | None = None) -> str:
    """Queue ``run_id``'s tree root again, after storing ``decision`` when one is given.

    Returns the id queued (the root). A store that is not PostgreSQL is a
    :class:`ConfigError`, said before any decision is stored.
    """
    url = queue_url(store)
    root = store.root_of(run_id)
    if decision is not None:
        decide_awaited(store, root, decision)
    await put(url, [root])
    return root


def summary_of(store: Store, run_id: str) -> RunSummary:
    """One run's line of ``store.runs()``, read by id (what ``provider_for`` is given)."""
    run = store.load_run(run_id)
    return RunSummary(
        id=run.id,
        goal=run.goal,
        status=run.status,
        outcome=run.outcome,
        steps=run.steps,
        tokens=run.usage.total_tokens,
        cost_micros=run.cost_micros,
        unpriced_calls=run.unpriced_calls,
        provider=run.provider,
        model=run.model,
        started_at=run.started_at,
        finished_at=run.finished_at,
        labels=dict(run.labels),
    )
