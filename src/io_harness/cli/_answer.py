"""``ioh answer RUN_ID TEXT``: the answer to the question a run (or an agent of its tree)
asked with ``ask_user``, stored, then the run resumed with the provider it was started
with; the answerer ``ioh run`` uses at a terminal; what ``ioh pending`` and a run's
closing lines say of a question."""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys

from rich.console import Console

from io_harness.cli._permissions import _awaited, _who
from io_harness.cli._text import escape
from io_harness.errors import ConfigError
from io_harness.policy._approval import ApprovalRequest, Decision
from io_harness.prepare._answers import check_fits, not_awaiting
from io_harness.store import Store
from io_harness.store._records import ApprovalRow
from io_harness.tools._ask import Answerer, StdinAnswerer

__all__ = ["answer_command", "answerer_for", "asked_line", "cmd_answer"]


def answerer_for() -> Answerer | None:
    """The answerer of ``ioh run`` and ``ioh resume``: the person at this terminal, if any;
    elsewhere a question waits for ``ioh answer``."""
    return StdinAnswerer() if sys.stdin.isatty() else None


def answer_command(run_id: str, hint: str = "") -> str:
    """The command that answers the question ``run_id`` (or its tree) awaits."""
    return f"ioh answer {shlex.quote(run_id)} TEXT{hint}"


def asked_line(request: ApprovalRequest, run_id: str, hint: str) -> str:
    """A run's closing line for the question it awaits, in rich markup."""
    choices = ""
    if request.choices:
        choices = " (choices: " + ", ".join(repr(c) for c in request.choices) + ")"
    return (
        f"[yellow]awaiting an answer:[/] {escape(request.question or '', one_line=True)}"
        f"{escape(choices, one_line=True)}\nanswer: {escape(answer_command(run_id, hint))}"
    )


def cmd_answer(args: argparse.Namespace, console: Console) -> int:
    """``ioh answer RUN_ID TEXT``: stored on the question, then the tree resumed from its root."""
    from io_harness.cli._commands import decided_then_resumed

    def answer(store: Store) -> str:
        request = _store_answer(store, args.run_id, args.text)
        return f"answered: {request.describe()} (request {request.id})"

    return decided_then_resumed(args, console, answer, "the next resume goes on with it")


def _store_answer(store: Store, run_id: str, text: str) -> ApprovalRequest:
    """Store ``text`` as the answer to the question ``run_id``'s tree awaits, under the
    leases of the run and its root (no resume can change the question meanwhile)."""
    place = store.load_run(run_id).tree
    with contextlib.ExitStack() as held:
        for leased in dict.fromkeys((place.root_id if place else run_id, run_id)):
            held.enter_context(store.lease(leased))
        row, request = _question(store, run_id, _awaited(store, run_id, place))
        decision = Decision.answered(text, by=f"{_who()} (ioh answer)")
        check_fits(row.run_id, request, decision)
        store.decide(row.id, decision)
        return request


def _question(
    store: Store, run_id: str, rows: list[ApprovalRow]
) -> tuple[ApprovalRow, ApprovalRequest]:
    """The open question among ``rows``; a run awaiting none is refused with its status."""
    for row in rows:
        request = ApprovalRequest.model_validate_json(row.request_json)
        if request.question is not None and row.status == "pending":
            return row, request
        if request.question is not None:
            raise ConfigError(
                f"the question run {row.run_id!r} asked is answered already; "
                f"ioh resume {shlex.quote(run_id)} goes on with it"
            )
    if rows:
        request = ApprovalRequest.model_validate_json(rows[0].request_json)
        raise ConfigError(
            f"run {rows[0].run_id!r} awaits a decision on {request.describe()}, not an answer "
            "(ioh approve / ioh deny)"
        )
    raise not_awaiting(store.load_run(run_id), Decision.answered(""))
