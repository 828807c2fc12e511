"""``ioh demo``: the bundled example, copied to a folder and run, offline by default.

The folder gets the project, its contract and the recording the model's
replies are replayed from, so what the banner names is there to read. The run
is governed by the contract's ``[policy]``, as ``ioh run`` of that contract
would be: the demo's denies writing the tests, which its constraint only asks.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from rich.console import Console

from io_harness._contract_toml import sandbox_config
from io_harness._demo import copy_cassette, prepare, use_this_python
from io_harness._harness import Harness
from io_harness.cli import EXIT_AWAITING
from io_harness.cli._commands import _drive, _finish, _store_hint
from io_harness.cli._launch import launch_labels, prices_for, replay_label
from io_harness.cli._permissions import policy_for
from io_harness.cli._sandbox import sandbox_choice
from io_harness.cli._text import escape, say
from io_harness.cli._words import RunInterrupted
from io_harness.contract import TaskContract
from io_harness.errors import ConfigError
from io_harness.loop import DEFAULT_SANDBOX
from io_harness.providers import Provider, Replay
from io_harness.providers._spec import provider_from_specs
from io_harness.store import Store

__all__ = ["DEMO_PREFIX", "cmd_demo"]

DEMO_PREFIX = "ioh-demo-"
"""The prefix of the temporary folder a demo without ``--dir`` runs in."""


def cmd_demo(args: argparse.Namespace, console: Console) -> int:
    """``ioh demo``: the bundled example, replayed (or live with ``--provider``).

    Without ``--dir`` it runs in a temporary folder, removed when the demo ends,
    unless its run can go on (it awaits approval, or was interrupted once
    started): then the folder is kept for ``ioh resume`` and its path said.
    """
    if args.dir is not None:
        return _demo(args, console, args.dir)
    scratch = Path(tempfile.mkdtemp(prefix=DEMO_PREFIX))
    kept = f"the demo's folder is kept for ioh resume: {escape(str(scratch))}"
    try:
        status = _demo(args, console, scratch / "demo")
    except RunInterrupted as exc:
        if exc.run_id is not None:
            say(console, kept)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
        raise
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    if status == EXIT_AWAITING:
        say(console, kept)
    else:
        shutil.rmtree(scratch, ignore_errors=True)
        say(console, f"removed the demo's folder {escape(str(scratch))} (--dir DIR keeps it)")
    return status


def _demo(args: argparse.Namespace, console: Console, folder: Path) -> int:
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ConfigError(f"{folder} exists and is not an empty folder; give --dir a new folder")
    sandbox = sandbox_choice(args, console)
    contract_path = prepare(folder)
    if sandbox is DEFAULT_SANDBOX:
        sandbox = sandbox_config(contract_path) or DEFAULT_SANDBOX
    contract = TaskContract.from_toml(contract_path)
    policy = policy_for(contract_path, None)
    provider, labels = _provider(args, console, folder)
    prices = prices_for(args)
    project, contract_file = escape(str(folder / "project")), escape(str(contract_path))
    say(console, f"project: {project}\ncontract: {contract_file}\n")
    use_this_python()
    with Store.open(args.store) as store:
        result = _drive(
            console,
            lambda report: Harness(
                provider,
                store=store,
                observer=report,
                prices=prices,
                policy=policy,
                sandbox=sandbox,
            ).run(contract, labels=labels),
            hint=_store_hint(args),
        )
        return _finish(console, result, args, store, prices)


def _provider(
    args: argparse.Namespace, console: Console, folder: Path
) -> tuple[Provider, dict[str, str]]:
    """The demo's model (``--provider``'s, else the recording copied into ``folder``), said
    in the banner, and the labels that let ``ioh resume`` ask it again."""
    if args.provider:
        say(console, f"Running the demo live with {escape(', '.join(args.provider))}.")
        return provider_from_specs(args.provider), launch_labels(args)
    cassette = copy_cassette(folder)
    say(
        console,
        "Running the demo offline: the model's replies are replayed from a recording "
        f"({escape(str(cassette))}); the tools, the workspace and the pytest check are real.",
    )
    return Replay(cassette), replay_label(cassette)
