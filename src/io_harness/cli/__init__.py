"""The ``ioh`` command: run, resume, list and show runs, decide approvals, doctor, the demo.

Errors are one line on stderr and a non-zero exit; ``--debug`` shows the
traceback instead.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from io_harness import __version__
from io_harness._contract_toml import sandbox_config
from io_harness._demo import CASSETTE, prepare, use_this_python
from io_harness._harness import Harness
from io_harness.cli._launch import (
    STORED,
    launch_labels,
    prices_for,
    replay_label,
    stored_provider,
)
from io_harness.cli._memory import add_memory_commands
from io_harness.cli._permissions import (
    APPROVERS,
    PausedStatus,
    approver_for,
    decide_pending,
    explain_line,
    policy_for,
    render_pending,
    show_console_policy,
)
from io_harness.cli._render import LiveReport, render_result, render_runs, render_trace
from io_harness.cli._sandbox import cmd_doctor, sandbox_choice, with_sandbox
from io_harness.cli._text import escape
from io_harness.contract import TaskContract
from io_harness.errors import ConfigError, HarnessError
from io_harness.loop import DEFAULT_SANDBOX, RunOutcome, RunResult
from io_harness.policy import Approver, Policy
from io_harness.pricing import PriceTable
from io_harness.providers import SPEC_FORMS, Provider, Replay
from io_harness.providers._spec import provider_from_specs
from io_harness.store import SqliteStore, Store

__all__ = ["main"]

DEFAULT_STORE = Path(".ioh") / "runs.db"
EXIT_ERROR = 2
EXIT_NOT_VERIFIED = 1
EXIT_AWAITING = 3
EXIT_INTERRUPTED = 130


def _with_store(sub: argparse.ArgumentParser) -> argparse.ArgumentParser:
    sub.add_argument(
        "--store",
        type=Path,
        default=DEFAULT_STORE,
        help=f"the run store (default: {DEFAULT_STORE})",
    )
    return sub


def _with_provider(sub: argparse.ArgumentParser, required: bool = True, default: str = "") -> None:
    sub.add_argument(
        "--provider",
        action="append",
        required=required,
        metavar="SPEC",
        help=f"the model provider ({', '.join(SPEC_FORMS)}); "
        f"give it again for fallbacks, asked in order{default}",
    )
    sub.add_argument(
        "--prices", type=Path, metavar="FILE", help=f"a price table (TOML) to count spend{default}"
    )


def _with_approver(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--approve",
        dest="approver_choice",
        choices=APPROVERS,
        help="how asks are decided: ask at this terminal (the default when there is "
        "one), defer them for ioh approve (the default otherwise), deny or approve all",
    )


def _with_policy_file(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--policy", type=Path, metavar="FILE", help="a TOML file whose [policy] governs the run"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ioh",
        description="Run an LLM agent from a task contract to a verified result.",
    )
    parser.add_argument("--version", action="version", version=f"ioh {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub = _with_store(commands.add_parser("run", help="run a contract (TOML) to an outcome"))
    sub.add_argument("contract", type=Path, help="the contract file")
    _with_provider(sub)
    _with_policy_file(sub)
    _with_approver(sub)
    sub.add_argument("--run-id", help="name the run (default: generated)")
    sub.add_argument(
        "--memory",
        action="store_true",
        help="let the agent remember notes for later runs in the same workspace (ioh memory)",
    )
    with_sandbox(sub)
    sub.set_defaults(handler=_cmd_run)

    sub = _with_store(commands.add_parser("resume", help="continue a run from its last step"))
    sub.add_argument("run_id")
    _with_provider(sub, required=False, default=STORED)
    _with_approver(sub)
    _with_policy_file(sub)
    sub.add_argument(
        "--replace-policy",
        action="store_true",
        help="resume under --policy instead of the policy the run was started with",
    )
    with_sandbox(sub)
    sub.set_defaults(handler=_cmd_resume)

    _add_permission_commands(commands)
    add_memory_commands(commands)

    sub = _with_store(commands.add_parser("runs", help="list runs, newest first"))
    sub.add_argument("--limit", type=int, default=20, help="how many (default: 20)")
    sub.set_defaults(handler=_cmd_runs)

    sub = _with_store(commands.add_parser("show", help="show one run's trace"))
    sub.add_argument("run_id")
    sub.set_defaults(handler=_cmd_show)

    sub = commands.add_parser(
        "doctor", help="which sandboxes this machine offers, and which one a run gets"
    )
    sub.set_defaults(handler=cmd_doctor)

    sub = _with_store(commands.add_parser("demo", help="run the bundled example offline"))
    sub.add_argument("--dir", type=Path, help="copy the example here (default: a new temp folder)")
    _with_provider(sub, required=False)
    sub.set_defaults(handler=_cmd_demo)
    return parser


def _add_permission_commands(commands: Any) -> None:
    sub = _with_store(commands.add_parser("pending", help="list actions awaiting approval"))
    sub.set_defaults(handler=_cmd_pending)

    for verb in ("approve", "deny"):
        sub = _with_store(
            commands.add_parser(
                verb, help=f"{verb} the action a run awaits (and resume it with --provider)"
            )
        )
        sub.add_argument("run_id")
        if verb == "approve":
            sub.add_argument(
                "--remember",
                action="store_true",
                help="also allow this exact act and target for the rest of the run",
            )
        else:
            sub.add_argument("--reason", required=True, help="why; the model reads it")
        _with_provider(sub, required=False, default=STORED)
        sub.add_argument(
            "--no-resume", action="store_true", help="store the decision; resume it later"
        )
        _with_approver(sub)
        with_sandbox(sub)
        sub.add_argument(
            "--request",
            metavar="ID",
            help="the request you reviewed (ioh pending); refused if the run awaits another",
        )
        sub.set_defaults(handler=_cmd_decide, verdict=verb)

    policy = commands.add_parser("policy", help="show a policy or explain its verdict")
    policy_commands = policy.add_subparsers(dest="policy_command", required=True, metavar="WHAT")
    sub = policy_commands.add_parser("explain", help="the verdict on one act and target")
    sub.add_argument("file", type=Path, help="a contract or policy file with [policy]")
    sub.add_argument("act", help="read, write, exec or net")
    sub.add_argument("target", help="a workspace path, a program, or host[:port]")
    sub.set_defaults(handler=_cmd_policy_explain)
    sub = policy_commands.add_parser("show", help="every layer and rule, in order")
    sub.add_argument("file", type=Path, help="a contract or policy file with [policy]")
    sub.set_defaults(handler=_cmd_policy_show)


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


def _cmd_run(args: argparse.Namespace, console: Console) -> int:
    contract = TaskContract.from_toml(args.contract)
    policy = policy_for(args.contract, args.policy)
    provider = provider_from_specs(args.provider)
    prices = prices_for(args)
    approver = approver_for(args.approver_choice)
    sandbox = sandbox_choice(args, console)
    if sandbox is DEFAULT_SANDBOX:
        sandbox = sandbox_config(args.contract) or DEFAULT_SANDBOX
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
            ).run(contract, run_id=args.run_id, labels=launch_labels(args)),
            approver,
        )
    return _finish(console, result, args)


def _cmd_resume(args: argparse.Namespace, console: Console) -> int:
    if args.replace_policy and args.policy is None:
        raise ConfigError("--replace-policy needs --policy FILE: the policy to resume under")
    policy = Policy.from_toml(args.policy) if args.policy is not None else None
    given = provider_from_specs(args.provider) if args.provider else None
    with _existing_store(args.store) as store:
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
        ).resume(args.run_id, replace_policy=replace_policy),
        approver,
    )
    return _finish(console, result, args)


def _cmd_pending(args: argparse.Namespace, console: Console) -> int:
    if not args.store.exists():
        console.print(f"no actions are awaiting approval (no store at {args.store})")
        return 0
    with Store.open(args.store) as store:
        console.print(render_pending(store.approvals()))
    return 0


def _cmd_decide(args: argparse.Namespace, console: Console) -> int:
    with _existing_store(args.store) as store:
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


def _cmd_policy_explain(args: argparse.Namespace, console: Console) -> int:
    policy = policy_for(args.file, None)
    console.print(escape(explain_line(policy, args.act, args.target, args.file)), soft_wrap=True)
    return 0


def _cmd_policy_show(args: argparse.Namespace, console: Console) -> int:
    show_console_policy(console, policy_for(args.file, None), args.file)
    return 0


def _existing_store(path: Path) -> SqliteStore:
    if not path.exists():
        raise ConfigError(f"no store at {path}; run something first or give --store")
    return Store.open(path)


def _cmd_runs(args: argparse.Namespace, console: Console) -> int:
    if not args.store.exists():
        console.print(f"no runs yet (no store at {args.store})")
        return 0
    with Store.open(args.store) as store:
        console.print(render_runs(store.runs(limit=args.limit)))
    return 0


def _cmd_show(args: argparse.Namespace, console: Console) -> int:
    with _existing_store(args.store) as store:
        console.print(render_trace(store.trace(args.run_id)))
    return 0


def _cmd_demo(args: argparse.Namespace, console: Console) -> int:
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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``ioh``; returns the exit status."""
    args = _parser().parse_args(argv)
    console = Console(highlight=False)
    errors = Console(stderr=True, highlight=False)
    try:
        return int(args.handler(args, console))
    except HarnessError as exc:
        if args.debug:
            raise
        errors.print(f"[red]error:[/] {escape(str(exc))}", markup=True, soft_wrap=True)
        return EXIT_ERROR
    except KeyboardInterrupt:
        errors.print("interrupted; the last committed step is kept (ioh resume RUN_ID)")
        return EXIT_INTERRUPTED
    except Exception as exc:  # a defect of ours: still one line, the traceback on request
        if args.debug:
            raise
        errors.print(
            f"[red]error:[/] internal error: {escape(f'{type(exc).__name__}: {exc}')} "
            "(run with --debug for the traceback)",
            markup=True,
            soft_wrap=True,
        )
        return EXIT_ERROR


def entry() -> None:
    """The console script: exits with :func:`main`'s status."""
    sys.exit(main())
