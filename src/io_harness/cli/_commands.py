"""What each ``ioh`` command does once its arguments are parsed (``ioh demo``'s is in
``_demo_command.py``).

The parser (``io_harness.cli``) names these functions; they are imported only
when a command runs, so ``ioh --help`` loads none of the harness.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from rich.console import Console

from io_harness._contract_toml import mcp_servers, sandbox_config
from io_harness._harness import Harness
from io_harness._queue._runs import is_queued
from io_harness._terminal import escaped_json
from io_harness.cli import EXIT_AWAITING, EXIT_NOT_VERIFIED, store_missing
from io_harness.cli._answer import answerer_for
from io_harness.cli._launch import (
    launch_labels,
    mcp_label,
    prices_for,
    roles_for,
    roles_label,
    stored_mcp,
    stored_provider,
    stored_roles,
)
from io_harness.cli._live import LiveReport
from io_harness.cli._more import budget_given, gives_more
from io_harness.cli._output import write_out
from io_harness.cli._permissions import (
    PausedStatus,
    approver_for,
    decide_pending,
    policy_for,
    render_pending,
)
from io_harness.cli._queue import requeue_decided
from io_harness.cli._render import Money, render_result
from io_harness.cli._runs_listing import render_runs
from io_harness.cli._sandbox import sandbox_choice
from io_harness.cli._show import render_trace
from io_harness.cli._signals import run_to_end
from io_harness.cli._text import PipeConsole, escape, say
from io_harness.cli._words import (
    RunInterrupted,
    interrupt_signal,
    resume_command,
    store_hint,
)
from io_harness.contract import TaskContract
from io_harness.errors import ConfigError
from io_harness.loop import DEFAULT_SANDBOX, RunOutcome, RunResult
from io_harness.policy import Approver, Policy
from io_harness.prepare._continuing import More
from io_harness.prepare._reading import stored_contract, stored_prices
from io_harness.pricing import PriceTable
from io_harness.providers import Provider
from io_harness.providers._spec import provider_from_specs
from io_harness.store import RunSummary, Store
from io_harness.store._sqlite import UndecodableError

__all__ = [
    "cmd_decide",
    "cmd_pending",
    "cmd_resume",
    "cmd_run",
    "cmd_runs",
    "cmd_show",
]


def _store_hint(args: argparse.Namespace) -> str:
    return store_hint(args.store)


def _drive(
    console: Console,
    start: Callable[[LiveReport], Coroutine[Any, Any, RunResult]],
    approver: PausedStatus | Approver | None = None,
    hint: str = "",
) -> RunResult:
    """Run ``start`` with a live report; ``hint`` (``--store PATH``) follows the commands
    it suggests.

    Ctrl-C or SIGTERM, wherever it lands (the approval prompt too), stops the
    run at once, keeping its committed steps, with a :class:`RunInterrupted`
    that names the run, once known, and the signal. A closed stdout
    (``ioh run ... | head -1``) stops the printing, not the run: it goes on to
    its outcome, stored as ever, and stderr says so once.
    """
    report = LiveReport(console)
    if isinstance(console, PipeConsole):
        console.on_closed = lambda: _stdout_closed(report.run_id, hint)
    try:
        with console.status("starting") as status:
            report.status = status
            if isinstance(approver, PausedStatus):
                approver.status = status
            return run_to_end(start(report))
    except KeyboardInterrupt as exc:
        if isinstance(approver, PausedStatus):
            approver.abandon()
        raise RunInterrupted(report.run_id, interrupt_signal(exc)) from None


def _stdout_closed(run_id: str | None, hint: str) -> None:
    """Say on stderr, once, that the run goes on unprinted, and where to see it."""
    where = f"ioh show {shlex.quote(run_id)}{hint} shows it" if run_id else f"ioh runs{hint}"
    said = (
        "ioh: stdout is closed, so nothing more is printed there; the run goes on to its "
        f"outcome, stored as usual ({where}), and the exit status is its own"
    )
    PipeConsole(stderr=True, highlight=False).print(escape(said), soft_wrap=True)


def _finish(
    console: Console,
    result: RunResult,
    args: argparse.Namespace,
    store: Store,
    prices: PriceTable | None,
) -> int:
    """The run's closing lines (its spend in its currency) and ``ioh``'s exit status."""
    say(console, render_result(result, _store_hint(args), _money(store, result.run_id, prices)))
    if result.outcome.awaits:
        return EXIT_AWAITING
    return 0 if result.succeeded else EXIT_NOT_VERIFIED


def _money(store: Store, run_id: str, prices: PriceTable | None) -> Money:
    """The currency and cost budget of a run: of ``prices`` when given, else as stored."""
    stored = store.load_run(run_id)
    table = prices if prices is not None else stored_prices(stored)
    budget = stored_contract(stored).budget.max_cost_micros
    return Money(table.currency if table is not None else None, budget)


def _currency(store: Store, run_id: str) -> str | None:
    """The currency of a run's stored price table (``None``: it has none)."""
    stored = store.load_run(run_id).prices_json
    if stored is None:
        return None
    try:
        return PriceTable.from_json(stored).currency
    except ConfigError:
        return ""  # priced, in a currency this version cannot read


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    contract = TaskContract.from_toml(args.contract)
    policy = policy_for(args.contract, args.policy)
    provider = provider_from_specs(args.provider)
    prices = prices_for(args)
    approver = approver_for(args.approver_choice)
    sandbox = sandbox_choice(args, console)
    if sandbox is DEFAULT_SANDBOX:
        sandbox = sandbox_config(args.contract) or DEFAULT_SANDBOX
    servers = mcp_servers(args.contract)
    roles = roles_for(args.contract, contract.role, args.roles)
    labels = launch_labels(args) | mcp_label(args.contract, servers) | roles_label(roles)
    with Store.open(args.store) as store:
        result = _drive(
            console,
            lambda report: Harness(
                provider,
                store=store,
                observer=report,
                prices=prices,
                policy=policy,
                approver=approver,
                sandbox=sandbox,
                memory=args.memory,
                mcp=servers,
                roles=roles,
                ask=args.ask,
                answerer=answerer_for(),
            ).run(contract, run_id=args.run_id, labels=labels),
            approver,
            _store_hint(args),
        )
        return _finish(console, result, args, store, prices)


def cmd_resume(args: argparse.Namespace, console: Console) -> int:
    if args.replace_policy and args.policy is None:
        raise ConfigError("--replace-policy needs --policy FILE: the policy to resume under")
    policy = Policy.from_toml(args.policy) if args.policy is not None else None
    given = provider_from_specs(args.provider) if args.provider else None
    with _existing_store(args.store) as store:
        args.run_id = store.root_of(args.run_id)
        provider = given or stored_provider(args, store)
        if provider is None:
            raise ConfigError(
                f"run {args.run_id!r} was not started by `ioh run`, so its provider is not "
                "stored; give --provider SPEC"
            )
        return _resume(
            args,
            console,
            store,
            provider,
            prices_for(args),
            policy=policy,
            replace_policy=args.replace_policy,
        )


def _resume(
    args: argparse.Namespace,
    console: Console,
    store: Store,
    provider: Provider,
    prices: PriceTable | None,
    *,
    policy: Policy | None = None,
    replace_policy: bool = False,
) -> int:
    approver = approver_for(args.approver_choice)
    sandbox = sandbox_choice(args, console)
    more = _more_for(args, store)

    def going_on(report: LiveReport) -> Coroutine[Any, Any, RunResult]:
        harness = Harness(
            provider,
            store=store,
            observer=report,
            prices=prices,
            approver=approver,
            policy=policy,
            sandbox=sandbox,
            answerer=answerer_for(),
            mcp=stored_mcp(store, args.run_id),
            roles=stored_roles(store, args.run_id),
        )
        if more is not None:
            return harness.continue_run(args.run_id, budget=more.budget, message=more.message)
        return harness.resume(args.run_id, replace_policy=replace_policy)

    result = _drive(console, going_on, approver, _store_hint(args))
    return _finish(console, result, args, store, prices)


def _more_for(args: argparse.Namespace, store: Store) -> More | None:
    """What ``ioh resume`` gives the run: more (a run that stopped without success, or
    any of the continuing arguments), or nothing (a plain resume)."""
    asked = hasattr(args, "say") and gives_more(args)
    stored = store.load_run(args.run_id)
    if not asked and (stored.status != "finished" or stored.outcome == RunOutcome.SUCCESS):
        return None
    budget = None
    if asked:
        budget = budget_given(args, stored_contract(stored).budget, stored.steps)
    return More(budget, args.say if asked else None)


def cmd_pending(args: argparse.Namespace, console: Console) -> int:
    """``ioh pending``: every action awaiting approval, a sub-agent's with its tree's root."""
    if store_missing(args.store):
        say(console, f"no actions are awaiting approval (no store at {escape(str(args.store))})")
        return 0
    with Store.open(args.store) as store:
        rows = store.approvals()
        roots = {row.run_id: store.root_of(row.run_id) for row in rows}
    sub_agents = {k: v for k, v in roots.items() if k != v}
    say(console, render_pending(rows, sub_agents, _store_hint(args)))
    return 0


def cmd_decide(args: argparse.Namespace, console: Console) -> int:
    """``ioh approve`` / ``ioh deny``: of any agent of a tree, decided and resumed from its root."""

    def decide(store: Store) -> str:
        request, decision = decide_pending(
            store,
            args.run_id,
            approve=args.verdict == "approve",
            request_id=args.request,
            remember=getattr(args, "remember", False),
            reason=getattr(args, "reason", None),
        )
        verb = "approved" if decision.kind == "approve" else "denied"
        return f"{verb}: {request.describe()} (request {request.id})"

    return decided_then_resumed(args, console, decide, "the next resume performs it")


def decided_then_resumed(
    args: argparse.Namespace, console: Console, decide: Callable[[Store], str], later: str
) -> int:
    """What ``ioh approve``, ``deny`` and ``answer`` share: ``decide`` stores the decision on
    the run's tree (its root found first) and says it, then a queued run is queued again,
    another is resumed from its root, or (``--no-resume``, no stored provider) the command
    that goes on is printed after ``later``."""
    with _existing_store(args.store) as store:
        args.run_id = store.root_of(args.run_id)
        # A queued run is driven by the workers: the decision queues it again.
        queued = not args.no_resume and is_queued(store, args.run_id)
        # What the resume needs is built first, so a bad spec or a missing key is
        # said before any decision is stored.
        provider = None if args.no_resume or queued else stored_provider(args, store)
        prices = prices_for(args)
        say(console, escape(decide(store), one_line=True))
        if queued:
            return requeue_decided(console, store, args.run_id, _store_hint(args))
        if provider is None:
            how = "" if args.no_resume else " --provider SPEC"
            command = resume_command(args.run_id) + how + _store_hint(args)
            say(console, f"{later}: {escape(command)}")
            return 0
        return _resume(args, console, store, provider, prices)


def _existing_store(location: Path | str) -> Store:
    if store_missing(location):
        raise ConfigError(f"no store at {location}; run something first or give --store")
    return Store.open(location)


def cmd_runs(args: argparse.Namespace, console: Console) -> int:
    """``ioh runs [--label KEY=VALUE]... [--status STATUS]``: one line a run, newest first,
    its spend in its own currency; ``--limit`` counts the runs that match."""
    labels = _wanted_labels(args.label)
    status = _wanted_status(args.status)
    if store_missing(args.store):
        say(console, f"no runs yet (no store at {escape(str(args.store))})")
        return 0
    with Store.open(args.store) as store:
        runs = _matching(store, args.limit, labels, status)
        currencies = {run.id: _currency(store, run.id) for run in runs}
    if not runs and (labels or status):
        wanted = [f"--label {key}={value}" for key, value in labels.items()]
        wanted += [f"--status {status}"] if status is not None else []
        say(console, f"no runs match {escape(' '.join(wanted))}")
        return 0
    say(console, render_runs(runs, currencies))
    stopped = [run.id for run in runs if run.status == INTERRUPTED]
    if stopped:
        command = resume_command(stopped[0], _store_hint(args))
        more = " (and so on)" if len(stopped) > 1 else ""
        say(console, escape(f"interrupted: nobody drives them; {command}{more} continues one"))
    return 0


def _wanted_labels(given: list[str]) -> dict[str, str]:
    """``--label KEY=VALUE`` flags as the labels every run listed must carry."""
    labels: dict[str, str] = {}
    for pair in given:
        key, is_pair, value = pair.partition("=")
        if not is_pair or not key:
            raise ConfigError(f"--label takes KEY=VALUE (a label and its value), not {pair!r}")
        if labels.get(key, value) != value:
            raise ConfigError(f"--label {key} is given twice with two values; no run has both")
        labels[key] = value
    return labels


_AWAITING = RunOutcome.AWAITING_APPROVAL
_SHOWN_STATUSES = ("running", "interrupted", "awaiting")
"""Statuses ``ioh`` shows of a stored ``running`` run (by whether anyone drives it) too."""
_STATUSES = (*_SHOWN_STATUSES, "finished")
_NOT_VERIFIED = tuple(o.value for o in RunOutcome if o is not RunOutcome.SUCCESS and not o.awaits)
_STATUS_WORDS = {
    **{word: (word,) for word in _STATUSES},
    "success": ("success",),
    "verified": ("success",),
    "not_verified": _NOT_VERIFIED,
    **{word: (word,) for word in _NOT_VERIFIED},
    _AWAITING.value: ("awaiting",),
    RunOutcome.AWAITING_ANSWER.value: ("awaiting",),
}
"""What each ``--status`` word matches: statuses, or outcomes of finished runs."""


def _wanted_status(word: str | None) -> str | None:
    if word is None or word in _STATUS_WORDS:
        return word
    raise ConfigError(
        f"--status {word!r} is not a status or an outcome; give one of: {', '.join(_STATUS_WORDS)}"
    )


def _matching(
    store: Store, limit: int, labels: dict[str, str], word: str | None
) -> list[RunSummary]:
    """The newest ``limit`` runs with ``labels`` and the status or outcome ``word`` means, as
    ``ioh`` shows them; the store filters, and the limit counts the runs that match."""
    if word is None:
        return [_as_driven(store, run) for run in store.runs(limit, labels=labels)]
    found: list[RunSummary] = []
    for status in _STATUS_WORDS[word]:
        if status in _SHOWN_STATUSES:
            # A running run shows as interrupted or awaiting by whether anyone drives it,
            # which no store column says: every running run with the labels is judged.
            shown = (_as_driven(store, run) for run in store.runs(labels=labels, status="running"))
            found.extend(run for run in shown if run.status == status)
        if status not in ("running", INTERRUPTED):  # stored as such (awaiting too)
            found.extend(store.runs(limit, labels=labels, status=status))
    found.sort(key=lambda run: run.started_at, reverse=True)  # stable: the store's order in ties
    return found[:limit]


INTERRUPTED = "interrupted"
"""What a ``running`` run shows when no process holds its lease (``Store.status_now``)."""


def _as_driven(store: Store, run: RunSummary) -> RunSummary:
    """``run`` as ``ioh`` shows it: ``interrupted`` when it is running and nobody drives it,
    ``awaiting`` when it is an agent of a tree paused for a sub-agent's decision."""
    status = store.status_now(run)
    return run if status == run.status else run.model_copy(update={"status": status})


def cmd_show(args: argparse.Namespace, console: Console) -> int:
    """``ioh show RUN_ID [--view model | --json]``: one run's trace, or the messages its model
    is sent; ``--json``: the whole :class:`Trace` as JSON, its rows as stored, each control
    or format character in them written as a ``\\uXXXX`` escape (inert on a terminal).

    At a terminal, lines wrap to its width; piped, each line is whole. A store
    whose text does not decode shows the rest, its bad bytes as U+FFFD, and
    says so (on stderr under ``--json``, so stdout is JSON alone).
    """
    damaged, currency = None, None
    with _existing_store(args.store) as store:
        try:
            trace = store.trace(args.run_id)
        except UndecodableError as exc:  # show what can be shown, and say what cannot
            trace, damaged = store.trace(args.run_id, undecodable="replace"), str(exc)
        if not args.json:  # the JSON is the rows as stored; ioh's view of the run is not
            trace = trace.model_copy(update={"run": _as_driven(store, trace.run)})
            currency = _currency(store, args.run_id)
    if damaged is not None:
        where = PipeConsole(stderr=True, highlight=False) if args.json else console
        say(where, f"warning: {escape(damaged)}; its bad bytes show as \ufffd")
    if args.json:
        write_out(console, escaped_json(trace.model_dump_json(indent=2)) + "\n")
        return 0
    say(console, render_trace(trace, args.view, currency))
    if trace.run.status == INTERRUPTED:
        command = resume_command(trace.run.id, _store_hint(args))
        say(console, escape(f"interrupted: nobody drives it; {command} continues it"))
    return 0
