"""The ``ioh`` command: run, resume, list and show runs, and the demo.

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
from rich.markup import escape

from io_harness import __version__
from io_harness._demo import CASSETTE, prepare, use_this_python
from io_harness.cli._render import LiveReport, render_result, render_runs, render_trace
from io_harness.contract import TaskContract
from io_harness.errors import ConfigError, HarnessError
from io_harness.loop import RunResult, resume, run
from io_harness.pricing import PriceTable
from io_harness.providers import SPEC_FORMS, Provider, Replay
from io_harness.providers._spec import provider_from_specs
from io_harness.store import SqliteStore, Store

__all__ = ["main"]

DEFAULT_STORE = Path(".ioh") / "runs.db"
EXIT_ERROR = 2
EXIT_NOT_VERIFIED = 1
EXIT_INTERRUPTED = 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ioh",
        description="Run an LLM agent from a task contract to a verified result.",
    )
    parser.add_argument("--version", action="version", version=f"ioh {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def with_store(sub: argparse.ArgumentParser) -> argparse.ArgumentParser:
        sub.add_argument(
            "--store",
            type=Path,
            default=DEFAULT_STORE,
            help=f"the run store (default: {DEFAULT_STORE})",
        )
        return sub

    def with_provider(sub: argparse.ArgumentParser, required: bool = True) -> None:
        sub.add_argument(
            "--provider",
            action="append",
            required=required,
            metavar="SPEC",
            help=f"the model provider ({', '.join(SPEC_FORMS)}); "
            "give it again for fallbacks, asked in order",
        )
        sub.add_argument(
            "--prices", type=Path, metavar="FILE", help="a price table (TOML) to count spend"
        )

    sub = with_store(commands.add_parser("run", help="run a contract (TOML) to an outcome"))
    sub.add_argument("contract", type=Path, help="the contract file")
    with_provider(sub)
    sub.add_argument("--run-id", help="name the run (default: generated)")
    sub.set_defaults(handler=_cmd_run)

    sub = with_store(commands.add_parser("resume", help="continue a run from its last step"))
    sub.add_argument("run_id")
    with_provider(sub)
    sub.set_defaults(handler=_cmd_resume)

    sub = with_store(commands.add_parser("runs", help="list runs, newest first"))
    sub.add_argument("--limit", type=int, default=20, help="how many (default: 20)")
    sub.set_defaults(handler=_cmd_runs)

    sub = with_store(commands.add_parser("show", help="show one run's trace"))
    sub.add_argument("run_id")
    sub.set_defaults(handler=_cmd_show)

    sub = with_store(commands.add_parser("demo", help="run the bundled example offline"))
    sub.add_argument("--dir", type=Path, help="copy the example here (default: a new temp folder)")
    with_provider(sub, required=False)
    sub.set_defaults(handler=_cmd_demo)
    return parser


def _store_hint(args: argparse.Namespace) -> str:
    return "" if args.store == DEFAULT_STORE else f" --store {args.store}"


def _drive(
    console: Console,
    start: Callable[[LiveReport], Coroutine[Any, Any, RunResult]],
) -> RunResult:
    report = LiveReport(console)
    with console.status("starting") as status:
        report.status = status
        return asyncio.run(start(report))


def _finish(console: Console, result: RunResult, args: argparse.Namespace) -> int:
    console.print(render_result(result, _store_hint(args)))
    return 0 if result.succeeded else EXIT_NOT_VERIFIED


def _prices(args: argparse.Namespace) -> PriceTable | None:
    return PriceTable.from_toml(args.prices) if args.prices else None


def _cmd_run(args: argparse.Namespace, console: Console) -> int:
    contract = TaskContract.from_toml(args.contract)
    provider = provider_from_specs(args.provider)
    prices = _prices(args)
    with Store.open(args.store) as store:
        result = _drive(
            console,
            lambda report: run(
                contract,
                provider,
                store=store,
                run_id=args.run_id,
                observer=report,
                prices=prices,
            ),
        )
    return _finish(console, result, args)


def _cmd_resume(args: argparse.Namespace, console: Console) -> int:
    provider = provider_from_specs(args.provider)
    prices = _prices(args)
    with _existing_store(args.store) as store:
        result = _drive(
            console,
            lambda report: resume(
                args.run_id, provider, store=store, observer=report, prices=prices
            ),
        )
    return _finish(console, result, args)


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
    prices = _prices(args)
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
        result = _drive(
            console,
            lambda report: run(contract, provider, store=store, observer=report, prices=prices),
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
