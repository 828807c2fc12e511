"""A worker process for the queue tests: drives scripted runs queued in a PostgreSQL store.

Usage: python queue_worker.py URL [--concurrency N] [--heartbeat S] [--lease S]
[--delay S] [--drain]

Every run's answers are a pure function of its conversation (:func:`answer`),
so whichever worker drives a run, from whichever step, gives it the answers
another would have. Each model call waits ``--delay`` seconds first. The
process prints, flushed, one JSON object a line: ``{"call": TURN}`` before
each model call, ``{"drive": RUN_ID, "kind": KIND, "error": ...}`` as each job
ends, and ``{"report": {KIND: COUNT}}`` when the worker stops.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from functools import partial

import support
from io_harness import (
    NO_SANDBOX,
    CompletionRequest,
    CompletionResponse,
    Harness,
    Policy,
    Store,
)
from io_harness._queue import Drive
from io_harness.testing import ScriptedProvider, call, reply

STEPS = 5
"""Steps of every run: STEPS - 1 notes, then done.txt."""


contract = partial(support.contract, goal="write the notes, then done.txt", max_steps=STEPS + 3)
"""The task every queued run does, in its own workspace."""


def answer(turn: int) -> CompletionResponse:
    """The model's answer at ``turn`` (its answers so far): a note, or done.txt last."""
    if turn < STEPS - 1:
        note = call("write_file", path=f"notes/{turn}.txt", content=f"note {turn}\n")
        return reply(f"writing note {turn}", [note])
    return reply("finishing", [call("write_file", path="done.txt", content="done\n")])


def expected_answers() -> list[str]:
    """The assistant texts of a run done once, in order."""
    return [f"writing note {t}" for t in range(STEPS - 1)] + ["finishing"]


def provider(delay: float = 0.0) -> ScriptedProvider:
    """The scripted model, saying each call on stdout before it waits ``delay`` seconds."""

    async def respond(request: CompletionRequest) -> CompletionResponse:
        turn = sum(m.role == "assistant" for m in request.messages)
        _say({"call": turn, "pid": os.getpid()})
        await asyncio.sleep(delay)
        return answer(turn)

    return ScriptedProvider(respond)


def harness(store: Store, delay: float = 0.0, policy: Policy | None = None) -> Harness:
    """The harness the tests queue runs with and the workers drive them with."""
    return Harness(provider(delay), store=store, sandbox=NO_SANDBOX, policy=policy)


def _say(event: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _heard(drive: Drive) -> None:
    _say({"drive": drive.run_id, "kind": drive.kind, "error": drive.error})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--heartbeat", type=float, default=3.0)
    parser.add_argument("--lease", type=float, default=3.0)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--drain", action="store_true")
    args = parser.parse_args()
    with Store.open(args.url, lease_seconds=args.lease) as store:
        report = asyncio.run(
            harness(store, args.delay).work(
                concurrency=args.concurrency,
                drain=args.drain,
                heartbeat_timeout=args.heartbeat,
                on_drive=_heard,
            )
        )
    _say({"report": dict(report.counts)})


if __name__ == "__main__":
    main()
