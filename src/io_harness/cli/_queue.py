"""``ioh enqueue`` and ``ioh worker``: the queue of runs on a PostgreSQL store.

``ioh enqueue`` stores a run as ``ioh run`` would (its provider specs, MCP
contract and roles file as labels) and queues it; ``ioh worker`` drives queued
runs, each with the provider, MCP servers and roles stored with it, so a
worker needs no flags but the store. A decision on a queued run (``ioh
approve`` / ``ioh deny``) queues it again instead of resuming it in the
deciding process (:func:`requeue_decided`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from io_harness._contract_toml import mcp_servers, sandbox_config
from io_harness._harness import Harness
from io_harness._preflight import sync
from io_harness._queue import Drive, Worker, is_queued, requeue_run
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
from io_harness.cli._permissions import policy_for
from io_harness.cli._sandbox import sandbox_choice
from io_harness.cli._signals import run_to_end
from io_harness.cli._text import escape, say
from io_harness.cli._words import RunInterrupted, store_hint
from io_harness.contract import TaskContract
from io_harness.errors import ConfigError
from io_harness.loop import DEFAULT_SANDBOX, NO_SANDBOX, RunResult
from io_harness.providers._spec import provider_from_specs
from io_harness.store import Store
from io_harness.store._base import POSTGRES_SCHEMES

__all__ = [
    "NO_SANDBOX_LABEL",
    "cmd_enqueue",
    "cmd_worker",
    "is_queued",
    "requeue_decided",
]

NO_SANDBOX_LABEL = "ioh.no_sandbox"
"""The label of a run queued with ``--no-sandbox``: the workers run its commands directly."""
EXIT_FAILED_DRIVES = 1
"""``ioh worker``'s status when it stopped having found runs it could not drive."""


def _needs_postgres(location: Path | str, command: str) -> str:
    """``--store`` as a PostgreSQL URL; a SQLite file is a :class:`ConfigError`."""
    if isinstance(location, str) and location.startswith(POSTGRES_SCHEMES):
        return location
    raise ConfigError(
        f"{command}: the queue needs PostgreSQL; give --store postgresql://USER@HOST/DATABASE "
        f"(not the SQLite file {location})"
    )


def cmd_enqueue(args: argparse.Namespace, console: Console) -> int:
    """``ioh enqueue CONTRACT --provider SPEC --store postgresql://...``: store and queue a run."""
    location = _needs_postgres(args.store, "ioh enqueue")
    contract = TaskContract.from_toml(args.contract)
    policy = policy_for(args.contract, args.policy)
    provider = provider_from_specs(args.provider)
    prices = prices_for(args)
    sandbox = sandbox_choice(args, console)
    uncontained = {NO_SANDBOX_LABEL: "true"} if sandbox is NO_SANDBOX else {}
    if sandbox is DEFAULT_SANDBOX:
        sandbox = sandbox_config(args.contract) or DEFAULT_SANDBOX
    servers = mcp_servers(args.contract)
    roles = roles_for(args.contract, contract.role, args.roles)
    labels = (
        launch_labels(args) | mcp_label(args.contract, servers) | roles_label(roles) | uncontained
    )
    with Store.open(location) as store:
        harness = Harness(
            provider,
            store=store,
            prices=prices,
            policy=policy,
            sandbox=sandbox,
            memory=args.memory,
            mcp=servers,
            roles=roles,
        )
        run_id = sync(harness.enqueue(contract, run_id=args.run_id, labels=labels))
    say(console, f"queued {escape(run_id)}: ioh worker{escape(store_hint(location))} drives it")
    return 0


def harness_for(store: Store, run_id: str) -> Harness:
    """The harness a worker drives a queued run with: what ``ioh enqueue`` stored with it."""
    provider = stored_provider(argparse.Namespace(provider=None, run_id=run_id), store)
    if provider is None:
        raise ConfigError(
            f"run {run_id!r} was not queued by `ioh enqueue`, so its provider is not stored; "
            "drive it with Harness.work(provider_for=...) or ioh resume --provider SPEC"
        )
    uncontained = store.load_run(run_id).labels.get(NO_SANDBOX_LABEL) == "true"
    return Harness(
        provider,
        store=store,
        sandbox=NO_SANDBOX if uncontained else DEFAULT_SANDBOX,
        mcp=stored_mcp(store, run_id),
        roles=stored_roles(store, run_id),
    )


def cmd_worker(args: argparse.Namespace, console: Console) -> int:
    """``ioh worker --store postgresql://... [--concurrency N] [--drain]``: drive queued runs.

    One line a job, as it ends. Ctrl-C or SIGTERM stops the runs in flight
    (their committed steps kept) and hands them back to the queue.
    """
    location = _needs_postgres(args.store, "ioh worker")
    if args.concurrency < 1:
        raise ConfigError(f"--concurrency must be at least 1, not {args.concurrency}")
    failed = 0

    def heard(drive: Drive) -> None:
        nonlocal failed
        failed += drive.kind == "failed"
        say(console, escape(drive.describe()))

    with Store.open(location) as store:

        async def drive(run_id: str) -> RunResult:
            return await harness_for(store, run_id).resume(run_id)

        worker = Worker(
            store,
            drive,
            concurrency=args.concurrency,
            drain=args.drain,
            heartbeat_timeout=args.heartbeat_timeout,
            fleet_limit=args.fleet_limit,
            on_drive=heard,
        )
        until = "until no run is left" if args.drain else "until stopped"
        say(console, f"worker: driving queued runs, {args.concurrency} at once, {until}")
        try:
            report = run_to_end(worker.run())
        except RunInterrupted:
            handed = worker.report.counts["handed_back"]
            say(console, f"stopped: {handed} run{'s' if handed != 1 else ''} handed back")
            raise
    say(console, f"done: {report.total} job{'s' if report.total != 1 else ''} taken")
    return EXIT_FAILED_DRIVES if failed else 0


def requeue_decided(console: Console, store: Store, run_id: str, hint: str = "") -> int:
    """After ``ioh approve`` / ``ioh deny`` stored its decision on a queued run: queue the
    run again, so a worker performs the decision and goes on (``hint``: ``--store URL``)."""
    root = sync(requeue_run(store, run_id))
    say(console, f"queued {escape(root)} again: a worker (ioh worker{escape(hint)}) performs it")
    return 0
