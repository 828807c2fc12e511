"""What each ``ioh`` command does once its arguments are parsed.

The parser (``io_harness.cli``) names these functions; they are imported only
when a command runs, so ``ioh --help`` loads none of the harness.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from rich.console import Console

from io_harness._contract_toml import mcp_servers, sandbox_config
from io_harness._demo import CASSETTE, prepare, use_this_python
from io_harness._harness import Harness
from io_harness.cli import DEFAULT_STORE, EXIT_AWAITING, EXIT_NOT_VERIFIED
from io_harness.cli._launch import (
    launch_labels,
    mcp_label,
    prices_for,
    replay_label,
    roles_for,
    roles_label,
    stored_mcp,
    stored_provider,
    stored_roles,
)
from io_harness.cli._permissions import (
    PausedStatus,
    approver_for,
    decide_pending,
    policy_for,
    render_pending,
)
from io_harness.cli._render import LiveReport, render_result, render_runs, render_trace
from io_harness.cli._sandbox import sandbox_choice
from io_harness.cli._text import escape
from io_harness.contract import TaskContract
from io_harness.errors import ConfigError
from io_harness.loop import DEFAULT_SANDBOX, RunOutcome, RunResult
from io_harness.policy import Approver, Policy
from io_harness.pricing import PriceTable
from io_harness.providers import Provider, Replay
from io_harness.providers._spec import provider_from_specs
from io_harness.store import SqliteStore, Store

__all__ = [
    "cmd_decide",
    "cmd_demo",
    "cmd_pending",
    "cmd_resume",
    "cmd_run",
    "cmd_runs",
    "cmd_show",
]


def _store_hint(args: argparse.Namespace) -> str:
    return "" if args.store == DEFAULT_STORE else f" --store {args.store}"


def _drive(
    console: Console,
    start: Callable[[LiveReport], Coroutine[Any, Any, RunResult]],
    approver: PausedStatus | Approver | None = None,
) -> RunResult:
    report = LiveReport(console)
    with console.status("starting") as status:
        report.status = status
        if isinstance(approver, PausedStatus):
            approver.status = status
        return asyncio.run(start(report))


def _finish(console: Console, result: RunResult, args: argparse.Namespace) -> int:
    console.print(render_result(result, _store_hint(args)))
    if result.outcome is RunOutcome.AWAITING_APPROVAL:
        return EXIT_AWAITING
    return 0 if result.succeeded else EXIT_NOT_VERIFIED


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
            ).run(contract, run_id=args.run_id, labels=labels),
            approver,
        )
    return _finish(console, result, args)


def cmd_resume(args: argparse.Namespace, console: Console) -> int:
    if args.replace_policy and args.policy is None:
        raise ConfigError("--replace-policy needs --policy FILE: the policy to resume under")
    policy = Policy.from_toml(args.policy) if args.policy is not None else None
    given = provider_from_specs(args.provider) if args.provider else None
    with _existing_store(args.store) as store:
        args.run_id = tree_root(store, args.run_id)
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
    result = _drive(
        console,
        lambda report: Harness(
            provider,
            store=store,
            observer=report,
            prices=prices,
            approver=approver,
            policy=policy,
            sandbox=sandbox,
            mcp=stored_mcp(store, args.run_id),
            roles=stored_roles(store, args.run_id),
        ).resume(args.run_id, replace_policy=replace_policy),
        approver,
    )
    return _finish(console, result, args)


def cmd_pending(args: argparse.Namespace, console: Console) -> int:
    """``ioh pending``: every action awaiting approval, a sub-agent's with its tree's root."""
    if not args.store.exists():
        console.print(f"no actions are awaiting approval (no store at {escape(str(args.store))})")
        return 0
    with Store.open(args.store) as store:
        rows = store.approvals()
        roots = {row.run_id: tree_root(store, row.run_id) for row in rows}
        console.print(render_pending(rows, {k: v for k, v in roots.items() if k != v}))
    return 0


def tree_root(store: Store, run_id: str) -> str:
    """The run a resume of ``run_id`` starts from: its tree's root, or itself.

    The root holds what a resume needs (the provider specs ``ioh`` stored, the
    MCP servers), which a sub-agent does not, and a tree resumes from it.
    """
    place = store.load_run(run_id).tree
    return place.root_id if place is not None else run_id


def cmd_decide(args: argparse.Namespace, console: Console) -> int:
    """``ioh approve`` / ``ioh deny``: of any agent of a tree, decided and resumed from its root."""
    with _existing_store(args.store) as store:
        args.run_id = tree_root(store, args.run_id)
        # What the resume needs is built first, so a bad spec or a missing key is
        # said before any decision is stored.
        provider = None if args.no_resume else stored_provider(args, store)
        prices = prices_for(args)
        request, decision = decide_pending(
            store,
            args.run_id,
            approve=args.verdict == "approve",
            request_id=args.request,
            remember=getattr(args, "remember", False),
            reason=getattr(args, "reason", None),
        )
        verb = "approved" if decision.kind == "approve" else "denied"
        console.print(f"{verb}: {escape(request.describe())} (request {escape(request.id)})")
        if provider is None:
            how = "" if args.no_resume else " --provider SPEC"
            console.print(
                f"the next resume performs it: ioh resume {escape(args.run_id)}"
                f"{how}{escape(_store_hint(args))}"
            )
            return 0
        return _resume(args, console, store, provider, prices)


def _existing_store(path: Path) -> SqliteStore:
    if not path.exists():
        raise ConfigError(f"no store at {path}; run something first or give --store")
    return Store.open(path)


def cmd_runs(args: argparse.Namespace, console: Console) -> int:
    if not args.store.exists():
        console.print(f"no runs yet (no store at {args.store})")
        return 0
    with Store.open(args.store) as store:
        console.print(render_runs(store.runs(limit=args.limit)))
    return 0


def cmd_show(args: argparse.Namespace, console: Console) -> int:
    """``ioh show RUN_ID [--view model]``: one run's trace, or the messages its model is sent.

    At a terminal, lines wrap to its width; piped, each line is whole.
    """
    with _existing_store(args.store) as store:
        trace = store.trace(args.run_id)
    console.print(render_trace(trace, args.view), soft_wrap=not console.is_terminal)
    return 0


def cmd_demo(args: argparse.Namespace, console: Console) -> int:
    folder = args.dir or Path(tempfile.mkdtemp(prefix="ioh-demo-")) / "demo"
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ConfigError(f"{folder} exists and is not an empty folder; give --dir a new folder")
    contract_path = prepare(folder)
    contract = TaskContract.from_toml(contract_path)
    provider: Provider
    prices = prices_for(args)
    if args.provider:
        provider = provider_from_specs(args.provider)
        console.print(f"Running the demo live with {escape(', '.join(args.provider))}.")
    else:
        provider = Replay(CASSETTE)
        console.print(
            "Running the demo offline: the model's replies are replayed from a recording "
            f"({CASSETTE.name}); the tools, the workspace and the pytest check are real."
        )
    console.print(f"project: {folder / 'project'}\ncontract: {contract_path}\n")
    use_this_python()
    with Store.open(args.store) as store:
        labels = launch_labels(args) if args.provider else replay_label(CASSETTE)
        result = _drive(
            console,
            lambda report: Harness(provider, store=store, observer=report, prices=prices).run(
                contract, labels=labels
            ),
        )
    return _finish(console, result, args)
