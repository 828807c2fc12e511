"""The Python in the README and every guide runs, as a reader would run it.

Each page's ``python`` blocks run in order in one namespace, as a reader
following the page would, with what the page takes as given: a ``provider``
(a scripted model that writes ``done.txt`` and stops), a ``store``, a
``contract`` over a fresh workspace (the current folder) and a ``harness``.
Top-level ``await`` is allowed, as in a notebook. Nothing reaches a network: a
vendor provider a page builds talks to a loopback server that refuses its key.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import re
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from io_harness import (
    CompletionRequest,
    CompletionResponse,
    Harness,
    Message,
    Policy,
    Store,
    TaskContract,
    WorkspaceFileContains,
)
from io_harness.testing import ScriptedProvider, call, reply

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
PAGES_WITH_CODE = [page for page in PAGES if BLOCK.search(page.read_text())]


def finishing(request: CompletionRequest) -> CompletionResponse:
    """Write done.txt, then stop: the model every page's runs assume."""
    if any(m.role == "tool" for m in request.messages):
        return reply("done")
    return reply("writing it", [call("write_file", path="done.txt", content="done\n")])


def given(workspace: Path) -> dict[str, Any]:
    """What a page takes as given: a model, a store, a contract, a harness, a policy, a
    finished run, a request; the folders its examples name (``repo``, ``skills``)."""
    for folder in ("path/to/repo", "repo", "skills", "repo-skills", "tests/cassettes"):
        (workspace / folder).mkdir(parents=True)
    (workspace / "path/to/repo/test_ok.py").write_text("def test_ok():\n    pass\n")
    provider = ScriptedProvider(finishing, context_window=200_000)
    store = Store.memory()
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (workspace / "prices.toml").write_text(
        '[models."docs-model"]\ninput = 3.0\noutput = 15.0\n'
        "[models.scripted]\ninput = 1.0\noutput = 2.0\n"
    )
    contract = TaskContract.workspace(
        "write done.txt", workspace, WorkspaceFileContains("done.txt", "done")
    )
    return {
        "provider": provider,
        "store": store,
        "contract": contract,
        "harness": Harness(provider, store=store),
        "policy": Policy.default(),
        "path": workspace,
        "workspace": str(workspace),
        "key": "style",
        "value": "tabs",
        "request": CompletionRequest(
            model="scripted", system="", messages=(Message.user("hello"),)
        ),
    }


class _Refusing(BaseHTTPRequestHandler):
    """A vendor API that refuses every key at once (401: not retried, ends a Fallback)."""

    def do_POST(self) -> None:
        body = b'{"error": {"type": "authentication_error", "message": "invalid key"}}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@pytest.fixture(scope="module")
def vendor_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=[p.name for p in PAGES_WITH_CODE])
def test_a_pages_python_runs(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, vendor_api: str
) -> None:
    monkeypatch.chdir(tmp_path)
    # `python` in a page's commands is this interpreter, as in a reader's virtualenv.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    for vendor in ("OPENAI", "ANTHROPIC", "OPENROUTER"):
        # A vendor provider a page builds is only ever asked on loopback, and refused.
        monkeypatch.setenv(f"{vendor}_API_KEY", "sk-docs-test")
        monkeypatch.setenv(f"{vendor}_MODEL", "docs-model")
        monkeypatch.setenv(f"{vendor}_BASE_URL", vendor_api)
    namespace = given(tmp_path)
    finished = namespace["harness"].run_sync(namespace["contract"])
    namespace["run_id"] = finished.run_id  # a run of the store, to resume or show
    (tmp_path / "done.txt").unlink()
    for number, code in enumerate(BLOCK.findall(page.read_text()), start=1):
        compiled = compile(
            code, f"{page.name} block {number}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        )
        # A block with a top-level await runs on an event loop of its own; the others
        # (run_sync among them) outside any, as a script's would.
        result = eval(compiled, namespace)  # the docs' own code, run as written
        if inspect.iscoroutine(result):
            asyncio.run(result)
