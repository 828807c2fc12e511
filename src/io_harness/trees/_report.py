"""What a parent reads of a child that ended: its outcome and spend, the files it wrote (or
brought back from its copy), the error that ended it, its last words, its check's feedback."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from io_harness._confined import PathRefused
from io_harness.errors import ResumeError, StorageError
from io_harness.loop._outcome import RunResult
from io_harness.policy._gate import Access
from io_harness.policy._rules import Act, Effect
from io_harness.pricing import format_money
from io_harness.store import Store
from io_harness.trees._isolate import BroughtBack, Snapshot, bring_back

if TYPE_CHECKING:
    from io_harness.trees._node import AgentNode, Spawned

__all__ = ["child_report"]

_LAST_WORDS = 2000
_FEEDBACK = 2000


def child_report(
    node: AgentNode, spawned: Spawned, result: RunResult | BaseException
) -> tuple[str, bool, tuple[str, ...]]:
    """The observation for one child: what it did, the files it wrote, its feedback.

    A child another writer drives (its lease is not ours), or a store that failed,
    is not the child's failure: it stops this agent too, so the tree is resumed
    later, whole, rather than told a live child failed.
    """
    if isinstance(result, ResumeError | StorageError):
        raise result
    if not isinstance(result, RunResult):
        return f"sub-agent {spawned.run_id} failed: {_describe(result)}", True, ()
    store = node.tree.store
    trace = store.trace(result.run_id)
    written = sorted({path for call in trace.tool_calls for path in call.changed})
    money = format_money(result.cost_micros, node.tree.currency)
    spend = (
        money
        if not result.unpriced_calls
        else "unpriced"
        if not result.cost_micros
        else f"{money} + {result.unpriced_calls} unpriced call{'s' * (result.unpriced_calls != 1)}"
    )
    lines = [
        f"sub-agent {result.run_id} ({spawned.goal!r}): {result.outcome.value} after "
        f"{result.steps} step{'s' * (result.steps != 1)}, "
        f"{result.usage.total_tokens} token{'s' * (result.usage.total_tokens != 1)}, {spend}"
    ]
    changed: tuple[str, ...] = ()
    isolated = _isolation(store, result.run_id)
    if isolated is None:
        changed = tuple(written)
        lines.append(f"files it wrote: {', '.join(written)}" if written else "it wrote no files")
    elif result.succeeded:
        back = _bring_back(node, *isolated)
        changed = back.brought if isinstance(back, BroughtBack) else ()
        lines.append(back.describe() if isinstance(back, BroughtBack) else back)
    else:
        lines.append("it worked in a private copy; nothing was brought back (it failed)")
    if not result.succeeded and result.error is not None:
        lines.append(f"its error: {_cut(str(result.error), _FEEDBACK)}")
    last = _last_words(trace.messages)
    if last:
        lines.append(f"its last words: {last}")
    check = result.verification
    if not result.succeeded and check is not None and not check.passed:
        lines.append(f"its check failed: {_cut(check.output or check.summary, _FEEDBACK)}")
    return "\n".join(lines), not result.succeeded, changed


def _bring_back(node: AgentNode, copy: Path, into: Path, base: Snapshot) -> BroughtBack | str:
    if not copy.is_dir():
        return f"its private copy {copy} is gone, so its changes could not be brought back"
    try:
        back = bring_back(base, copy, into, lambda rel: _may_write(node, rel))
    except OSError as exc:
        return f"its changes could not be brought back: {exc.strerror or exc}"
    except PathRefused as exc:
        return f"its changes could not all be brought back: {exc}"
    if not back.conflicts and not back.withheld:  # else kept: the observation names it
        node.tree.copies.append(copy)
    return back


def _may_write(node: AgentNode, rel: str) -> str | None:
    """Whether this agent's policy lets ``rel`` be written outright (a brought-back file
    is this agent's write, checked and recorded as one); if not, why not."""
    verdict = node.gate.check_outright(Access(Act.WRITE, rel))
    return None if verdict.effect is Effect.ALLOW else verdict.describe()


def _isolation(store: Store, run_id: str) -> tuple[Path, Path, Snapshot] | None:
    place = store.load_run(run_id).tree
    settings = json.loads(place.tree_json) if place and place.tree_json else {}
    isolated = settings.get("isolated")
    if not isolated:
        return None
    base = Snapshot.from_json(isolated["base"])
    return Path(isolated["copy"]), Path(isolated["into"]), base


def _last_words(messages: Sequence[Any]) -> str:
    for message in reversed(messages):
        if message.role == "assistant" and message.text:
            return _cut(message.text.strip(), _LAST_WORDS)
    return ""


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} more characters]"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, asyncio.CancelledError):
        return "it was cancelled"
    return f"{type(exc).__name__}: {exc}"
