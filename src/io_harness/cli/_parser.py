"""The parser of every ``ioh`` command: its words, its options and their help.

:func:`ioh_parser` builds it; each command's ``handler`` default names the
function that does its work (``module:function`` in this package), which
:func:`io_harness.cli.main` imports only once the command is chosen.
"""

from __future__ import annotations

import argparse

from io_harness import __version__
from io_harness.cli import DEFAULT_STORE, store_location
from io_harness.cli._more import add_more_arguments
from io_harness.providers._presets import SPEC_FORMS

# typing costs milliseconds to import, and `ioh --help` none of it: type checkers take
# this name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

__all__ = ["ioh_parser"]


def _path(text: str) -> Path:
    """A path argument, as argparse converts it (and a string default: ``"."``); pathlib is
    loaded when an argument is parsed, not for ``ioh --help``."""
    from pathlib import Path

    return Path(text)


STORED = " (default: what the run was started with)"
"""The help text's note on a flag whose default is stored with the run."""
APPROVERS = ("ask", "defer", "deny", "approve-all")
"""The ``--approve`` choices: ask at the terminal, defer every ask, deny or approve all."""
STORE_HELP = f"the run store: a SQLite file, or a postgresql:// URL (default: {DEFAULT_STORE})"


def ioh_parser() -> argparse.ArgumentParser:
    """The parser of ``ioh`` and every command of it, in the order ``ioh --help`` lists them."""
    parser = argparse.ArgumentParser(
        prog="ioh",
        description="Run an LLM agent from a task contract to a verified result.",
    )
    parser.add_argument("--version", action="version", version=f"ioh {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_run_commands(commands)
    _add_permission_commands(commands)
    _add_memory_commands(commands)
    _add_config_commands(commands)
    _add_runs_command(commands)
    _add_show_command(commands)
    _add_tree_command(commands)
    _add_doctor_command(commands)
    _add_fleet_commands(commands)
    _add_demo_command(commands)
    _debug_everywhere(parser)
    return parser


def _add_run_commands(commands: Any) -> None:
    """``ioh run CONTRACT`` and ``ioh resume RUN_ID``."""
    sub = _with_store(commands.add_parser("run", help="run a contract (TOML) to an outcome"))
    sub.add_argument("contract", type=_path, help="the contract file")
    _with_provider(sub)
    _with_policy_file(sub)
    _with_approver(sub)
    sub.add_argument("--run-id", help="name the run (default: generated)")
    sub.add_argument(
        "--roles",
        type=_path,
        metavar="FILE",
        help="the roles file of a contract that names a role (default: roles.toml beside "
        "the contract); its role's provider answers instead of --provider when it names one",
    )
    sub.add_argument(
        "--memory",
        action="store_true",
        help="let the agent remember notes for later runs in the same workspace (ioh memory)",
    )
    sub.add_argument(
        "--ask",
        action="store_true",
        help="offer ask_user: questions asked at a terminal, else answered by ioh answer",
    )
    _with_sandbox(sub)
    sub.set_defaults(handler="_commands:cmd_run")

    sub = _with_store(
        commands.add_parser(
            "resume", help="continue a run from its last step; give a stopped one more"
        )
    )
    sub.add_argument("run_id")
    _with_provider(sub, required=False, default=STORED)
    _with_approver(sub)
    _with_policy_file(sub)
    sub.add_argument(
        "--replace-policy",
        action="store_true",
        help="resume under --policy instead of the policy the run was started with",
    )
    _with_sandbox(sub)
    add_more_arguments(sub)
    sub.set_defaults(handler="_commands:cmd_resume")


def _add_permission_commands(commands: Any) -> None:
    """``ioh pending``, ``ioh approve|deny RUN_ID`` and ``ioh policy explain|show FILE``."""
    sub = _with_store(commands.add_parser("pending", help="list actions awaiting approval"))
    sub.set_defaults(handler="_commands:cmd_pending")

    for verb in ("approve", "deny"):
        said = f"{verb} the action a run awaits, then resume the run"
        sub = _with_store(
            commands.add_parser(
                verb,
                help=said,
                description=f"{said.capitalize()}: the decision is stored, then the run goes "
                "on with the provider it was started with (or --provider). For a run whose "
                "provider is not stored, or with --no-resume, the next ioh resume performs it.",
            )
        )
        sub.add_argument("run_id", help="the run, or any agent of its sub-agent tree")
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
            "--no-resume",
            action="store_true",
            help="store the decision only; the next ioh resume performs it",
        )
        _with_approver(sub)
        _with_sandbox(sub)
        sub.add_argument(
            "--request",
            metavar="ID",
            help="the request you reviewed (ioh pending); refused if the run awaits another",
        )
        sub.set_defaults(handler="_commands:cmd_decide", verdict=verb)
    _add_answer_command(commands)

    policy = commands.add_parser("policy", help="show a policy or explain its verdict")
    policy_commands = policy.add_subparsers(dest="policy_command", required=True, metavar="WHAT")
    sub = policy_commands.add_parser("explain", help="the verdict on one act and target")
    sub.add_argument("file", type=_path, help="a contract or policy file with [policy]")
    sub.add_argument("act", help="read, write, exec or net")
    sub.add_argument("target", help="a workspace path, a program, or host[:port]")
    _with_provider_layer(sub)
    sub.set_defaults(handler="_permissions:cmd_policy_explain")
    sub = policy_commands.add_parser("show", help="every layer and rule, in order")
    sub.add_argument("file", type=_path, help="a contract or policy file with [policy]")
    _with_provider_layer(sub)
    sub.set_defaults(handler="_permissions:cmd_policy_show")


def _add_answer_command(commands: Any) -> None:
    """``ioh answer RUN_ID TEXT``."""
    said = "answer the question a run asked (ask_user), then resume the run"
    sub = _with_store(commands.add_parser("answer", help=said, description=f"{said}."))
    sub.add_argument("run_id", help="the run, or any agent of its sub-agent tree")
    sub.add_argument("text", help="the answer (one of the choices, when the question gave some)")
    _with_provider(sub, required=False, default=STORED)
    sub.add_argument("--no-resume", action="store_true", help="store the answer only")
    _with_approver(sub)
    _with_sandbox(sub)
    sub.set_defaults(handler="_answer:cmd_answer")


def _add_memory_commands(commands: Any) -> None:
    """``ioh memory [--workspace DIR | --contract FILE]`` and ``ioh memory forget KEY``.

    Both take ``--store`` and ``--workspace`` or ``--contract`` (default: the
    current folder), before or after ``forget``.
    """
    memory = commands.add_parser(
        "memory", help="list the notes runs remembered in a workspace, or forget one"
    )
    _with_scope(memory, DEFAULT_STORE, None)
    memory.set_defaults(handler="_memory:cmd_memory")
    what = memory.add_subparsers(dest="memory_command", metavar="WHAT")
    forget = what.add_parser("forget", help="forget one note")
    forget.add_argument("key", help="the note's key, as `ioh memory` lists it")
    # SUPPRESS: a value given before `forget` stands unless given again after it.
    _with_scope(forget, argparse.SUPPRESS, argparse.SUPPRESS)
    forget.set_defaults(handler="_memory:cmd_forget")


def _add_config_commands(commands: Any) -> None:
    """``ioh mcp list FILE`` and ``ioh roles check [DIR]``: what a contract's MCP servers
    and a roles file would give a run."""
    mcp = commands.add_parser("mcp", help="the tools a contract's MCP servers offer")
    mcp_commands = mcp.add_subparsers(dest="mcp_command", required=True, metavar="WHAT")
    sub = mcp_commands.add_parser(
        "list", help="connect to a contract's [[mcp]] servers and list their tools and verdicts"
    )
    sub.add_argument("file", type=_path, help="a contract file with [[mcp]] tables")
    sub.set_defaults(handler="_mcp:cmd_mcp_list")
    roles = commands.add_parser("roles", help="the roles of a workspace's roles file")
    roles_commands = roles.add_subparsers(dest="roles_command", required=True, metavar="WHAT")
    sub = roles_commands.add_parser(
        "check", help="load a roles file and show each role's composed toolset"
    )
    sub.add_argument(
        "dir",
        type=_path,
        nargs="?",
        metavar="DIR",
        help="the workspace (default: the contract's root with --contract, else the current "
        "folder)",
    )
    sub.add_argument(
        "--contract",
        type=_path,
        metavar="FILE",
        help="the contract whose root is the workspace, as a run of it has it",
    )
    sub.add_argument(
        "--roles",
        type=_path,
        metavar="FILE",
        help="the roles file (default: roles.toml beside --contract, else DIR/roles.toml)",
    )
    sub.set_defaults(handler="_roles:cmd_roles_check")


def _add_runs_command(commands: Any) -> None:
    """``ioh runs [--limit N] [--label KEY=VALUE]... [--status STATUS]``."""
    sub = _with_store(commands.add_parser("runs", help="list runs, newest first"))
    sub.add_argument("--limit", type=int, default=20, help="how many (default: 20)")
    sub.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only runs with this label; give it again for runs with all of them",
    )
    sub.add_argument(
        "--status",
        metavar="STATUS",
        help="only runs in this status (running, interrupted, awaiting, finished) or with "
        "this outcome (verified, not_verified, ...)",
    )
    sub.set_defaults(handler="_commands:cmd_runs")


def _add_show_command(commands: Any) -> None:
    """``ioh show RUN_ID [--view transcript|model]``."""
    sub = _with_store(commands.add_parser("show", help="show one run's trace"))
    sub.add_argument("run_id")
    sub.add_argument(
        "--view",
        choices=("transcript", "model"),
        default="transcript",
        help="transcript: the run step by step, what compaction left out of the model's "
        "view marked (the default); model: the messages the model is sent at the run's end",
    )
    sub.add_argument(
        "--json", action="store_true", help="print the run's whole trace as JSON instead"
    )
    sub.set_defaults(handler="_commands:cmd_show")


def _add_tree_command(commands: Any) -> None:
    """``ioh tree RUN_ID``."""
    sub = _with_store(
        commands.add_parser("tree", help="draw the sub-agent tree a run belongs to, from its root")
    )
    sub.add_argument("run_id", help="any agent of the tree (it is marked)")
    sub.set_defaults(handler="_tree:cmd_tree")


def _add_doctor_command(commands: Any) -> None:
    """``ioh doctor [--contract FILE]``."""
    sub = commands.add_parser(
        "doctor", help="which sandboxes this machine offers, and which one a run gets"
    )
    sub.add_argument(
        "--contract",
        type=_path,
        metavar="FILE",
        help="also list the contract's [[mcp]] servers and whether its policy lets each start",
    )
    sub.set_defaults(handler="_sandbox:cmd_doctor")


def _add_fleet_commands(commands: Any) -> None:
    """Commands over many runs: the queue and its workers, suites, the report of a run."""
    _add_queue_commands(commands)
    _add_eval_command(commands)
    _add_report_command(commands)


def _add_queue_commands(commands: Any) -> None:
    """``ioh enqueue CONTRACT`` and ``ioh worker``: runs queued in PostgreSQL, and driven."""
    sub = _with_store(
        commands.add_parser(
            "enqueue", help="store a contract's run and queue it for ioh worker (PostgreSQL)"
        )
    )
    sub.add_argument("contract", type=_path, help="the contract file")
    _with_provider(sub)
    _with_policy_file(sub)
    sub.add_argument("--run-id", help="name the run (default: generated)")
    sub.add_argument("--roles", type=_path, metavar="FILE", help="as for ioh run")
    sub.add_argument("--memory", action="store_true", help="as for ioh run")
    _with_sandbox(sub)
    sub.set_defaults(handler="_queue:cmd_enqueue")

    sub = _with_store(
        commands.add_parser("worker", help="drive queued runs until stopped (PostgreSQL)")
    )
    sub.add_argument(
        "--concurrency", type=int, default=4, metavar="N", help="runs driven at once (default: 4)"
    )
    sub.add_argument(
        "--drain",
        action="store_true",
        help="stop when the queue is empty instead of waiting for more runs",
    )
    sub.add_argument(
        "--fleet-limit",
        type=int,
        default=0,
        metavar="N",
        help="runs driven at once by all workers together (default: 0, no limit)",
    )
    sub.add_argument(
        "--heartbeat-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long a worker may go silent before its runs are taken over (default: 30)",
    )
    sub.set_defaults(handler="_queue:cmd_worker")


def _add_eval_command(commands: Any) -> None:
    """``ioh eval SUITE [--provider SPEC]... [--concurrency N] [--json | --csv]``."""
    sub = _with_store(
        commands.add_parser("eval", help="run a suite of contracts over providers; compare them")
    )
    sub.add_argument("suite", type=_path, help="the suite file (TOML)")
    sub.add_argument(
        "--provider",
        action="append",
        metavar="SPEC",
        help="run the suite with this provider instead of the suite's; give it again to "
        "compare providers side by side",
    )
    sub.add_argument(
        "--concurrency", type=int, metavar="N", help="runs at once (default: the suite's)"
    )
    export = sub.add_mutually_exclusive_group()
    export.add_argument("--json", action="store_true", help="print the results as JSON")
    export.add_argument("--csv", action="store_true", help="print the results as CSV")
    _with_sandbox(sub)
    sub.set_defaults(handler="_eval:cmd_eval")


def _add_report_command(commands: Any) -> None:
    """``ioh report RUN_ID [-o FILE]``."""
    sub = _with_store(
        commands.add_parser("report", help="write one run's trace as a self-contained HTML page")
    )
    sub.add_argument("run_id", help="the run (a tree's root gets every agent)")
    sub.add_argument(
        "-o",
        "--output",
        type=_path,
        metavar="FILE",
        help="the HTML file to write (default: report-RUN_ID.html)",
    )
    sub.set_defaults(handler="_report:cmd_report")


def _add_demo_command(commands: Any) -> None:
    """``ioh demo [--dir PATH]``, with ``ioh run``'s provider and sandbox options."""
    sub = _with_store(commands.add_parser("demo", help="run the bundled example offline"))
    sub.add_argument(
        "--dir",
        type=_path,
        help="copy the example here and keep it (default: a temporary folder, removed when "
        "the demo ends)",
    )
    _with_provider(sub, required=False)
    _with_sandbox(sub)
    sub.set_defaults(handler="_demo_command:cmd_demo")


def _debug_everywhere(parser: argparse.ArgumentParser) -> None:
    """Let ``--debug`` follow any command too (``ioh run X --debug``), at every depth.

    Given after a command, it is set; not given there, it is left unset
    (``SUPPRESS``), so ``ioh --debug run X`` stands.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                sub.add_argument(
                    "--debug",
                    action="store_true",
                    default=argparse.SUPPRESS,
                    help="show tracebacks on errors",
                )
                _debug_everywhere(sub)


def _with_store(sub: argparse.ArgumentParser) -> argparse.ArgumentParser:
    sub.add_argument("--store", type=store_location, default=DEFAULT_STORE, help=STORE_HELP)
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
        "--prices", type=_path, metavar="FILE", help=f"a price table (TOML) to count spend{default}"
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
        "--policy", type=_path, metavar="FILE", help="a TOML file whose [policy] governs the run"
    )


def _with_sandbox(sub: argparse.ArgumentParser) -> None:
    """Add ``--no-sandbox`` to a command that drives a run."""
    sub.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run commands (the criterion's, exec's) directly, with no containment at all",
    )


def _with_scope(sub: argparse.ArgumentParser, store: Any, workspace: Any) -> None:
    sub.add_argument("--store", type=store_location, default=store, help=STORE_HELP)
    sub.add_argument(
        "--workspace",
        type=_path,
        default=workspace,
        metavar="DIR",
        help="the workspace whose memory it is (default: the current folder)",
    )
    sub.add_argument(
        "--contract",
        type=_path,
        default=workspace,
        metavar="FILE",
        help="the contract whose root is the workspace, as a run of it has it",
    )


def _with_provider_layer(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--provider",
        action="append",
        default=[],
        metavar="SPEC",
        help="count the 'provider' layer a run with this provider gets (its endpoints, "
        "for the provider's own connections); give it again for fallbacks",
    )
