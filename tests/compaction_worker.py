"""A child process for the compaction crash test: ``compaction_worker.py DB ROOT MODE``.

``run`` SIGKILLs itself when the first compaction pass's request reaches the
model (the pass is in flight); ``resume`` finishes the run; ``clean`` runs it
uninterrupted. The answers are those of ``test_compaction.respond``: a pure
function of the request.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from io_harness import CompletionRequest, CompletionResponse, Harness, Store
from io_harness.compaction._pass import Compaction
from io_harness.testing import ScriptedProvider
from test_compaction import contract, is_compactor, respond


def main() -> None:
    db, root, mode = sys.argv[1:4]

    def answer(request: CompletionRequest) -> CompletionResponse:
        if mode == "run" and is_compactor(request):
            os.kill(os.getpid(), signal.SIGKILL)
        return respond(request)

    provider = ScriptedProvider(answer, context_window=3000)
    with Store.open(db) as store:
        harness = Harness(provider, store=store, compaction=Compaction(keep_recent=2))
        if mode in ("run", "clean"):
            result = harness.run_sync(contract(Path(root)), run_id="killed")
        else:
            result = harness.resume_sync("killed")
    print(json.dumps({"outcome": result.outcome.value}))


if __name__ == "__main__":
    main()
