"""A headless Chromium driven over the DevTools protocol on a pipe, for the report's tests.

``--remote-debugging-pipe`` makes the browser read commands on its fd 3 and
write answers and events on its fd 4, each a JSON text ended by a NUL; no
port, no websocket, no library. One :class:`Browser` loads one page and
keeps every console message and uncaught exception the page raised.

Run as a script it writes a screenshot (docs/report.png was taken so, ``--at a0-s3``):
``python tests/chromium.py PAGE.html OUT.png [--at ID] [--full]``.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)
# Puts the pipe's two ends at fds 3 and 4 in the child, then becomes the browser. (A shell
# cannot: dash takes only one-digit descriptors in a redirection.)
_ON_FDS_3_AND_4 = (
    "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); "
    "os.execv(sys.argv[3], sys.argv[3:])"
)
_WAIT_SECONDS = 60.0


class BrowserError(Exception):
    """The browser answered a command with an error, or went away."""


@dataclass
class Browser:
    """One headless Chromium with one page, the page's console kept in :attr:`console`."""

    executable: str = CHROMIUM
    width: int = 1366
    height: int = 768
    console: list[str] = field(default_factory=list)
    """Each console error and uncaught exception of the page, as ``kind: text``."""
    _process: subprocess.Popen[bytes] | None = None
    _send: int = -1
    _receive: int = -1
    _buffer: bytes = b""
    _next_id: int = 0
    _session: str = ""
    _profile: str = ""
    _log: Path | None = None

    def __enter__(self) -> Browser:
        self._profile = tempfile.mkdtemp(prefix="ioh-chromium-")
        child_in, self._send = os.pipe()
        self._receive, child_out = os.pipe()
        argv = [
            sys.executable, "-c", _ON_FDS_3_AND_4, str(child_in), str(child_out),
            self.executable, *FLAGS, f"--user-data-dir={self._profile}",
            f"--window-size={self.width},{self.height}", "about:blank",
        ]  # fmt: skip
        self._log = Path(self._profile, "stderr.log")
        with self._log.open("wb") as log:
            self._process = subprocess.Popen(
                argv,
                pass_fds=(child_in, child_out),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        os.close(child_in)
        os.close(child_out)
        target = self.command("Target.createTarget", url="about:blank")["targetId"]
        attached = self.command("Target.attachToTarget", targetId=target, flatten=True)
        self._session = attached["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.command(f"{domain}.enable")
        self.resize(self.width, self.height)
        return self

    def __exit__(self, *exc_info: object) -> None:
        process = self._process
        if process is not None:
            try:
                self._write({"id": self._id(), "method": "Browser.close", "params": {}})
                process.wait(timeout=15)
            except (OSError, subprocess.TimeoutExpired):
                process.kill()
                process.wait()
        for fd in (self._send, self._receive):
            if fd >= 0:
                os.close(fd)
        shutil.rmtree(self._profile, ignore_errors=True)

    def resize(self, width: int, height: int) -> None:
        """Lay the page out again for a window of ``width`` x ``height`` CSS pixels."""
        self.width, self.height = width, height
        self.command(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def load(self, page: Path) -> None:
        """Open ``page`` (a file) and wait until it has loaded."""
        self.command("Page.navigate", url=page.resolve().as_uri())
        self._until("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        answer = self.command("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in answer:
            raise BrowserError(f"{expression!r} threw: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def screenshot(self, path: Path, *, full_page: bool = False) -> Path:
        """Write the viewport (or the whole page) as a PNG."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
            height = int(self.evaluate("document.documentElement.scrollHeight"))
            params["clip"] = {"x": 0, "y": 0, "width": self.width, "height": height, "scale": 1}
        data = self.command("Page.captureScreenshot", **params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def command(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command (to the page once attached) and return its result."""
        ident = self._id()
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if self._session and not method.startswith(("Target.", "Browser.")):
            message["sessionId"] = self._session
        self._write(message)
        while True:
            answer = self._read()
            if answer.get("id") == ident:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result
            self._note(answer)

    def _until(self, event: str) -> None:
        while True:
            message = self._read()
            self._note(message)
            if message.get("method") == event:
                return

    def _note(self, message: dict[str, Any]) -> None:
        """Keep the console errors and uncaught exceptions among the page's events."""
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in {"error", "assert"}:
            said = " ".join(str(arg.get("value", arg.get("description"))) for arg in params["args"])
            self.console.append(f"console.{params['type']}: {said}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            said = details.get("exception", {}).get("description") or details.get("text")
            self.console.append(f"exception: {said}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.console.append(f"log: {params['entry'].get('text')}")

    def _id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _write(self, message: dict[str, Any]) -> None:
        os.write(self._send, json.dumps(message).encode("utf-8") + b"\0")

    def _read(self) -> dict[str, Any]:
        import select

        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._receive], [], [], _WAIT_SECONDS)
            if not ready:
                raise BrowserError(f"the browser said nothing for {_WAIT_SECONDS:.0f} s")
            chunk = os.read(self._receive, 1 << 16)
            if not chunk:
                said = self._log.read_text(errors="replace")[-2000:] if self._log else ""
                raise BrowserError(f"the browser went away; its stderr ended:\n{said}")
            self._buffer += chunk
        text, _, self._buffer = self._buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(text)
        return message


def _main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Screenshot an HTML file in headless Chromium.")
    parser.add_argument("page", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--at", metavar="ID", help="scroll to the element with this id first")
    parser.add_argument("--full", action="store_true", help="the whole page, not the window")
    args = parser.parse_args()
    with Browser() as browser:
        browser.load(args.page)
        if args.at:
            browser.evaluate(f"location.hash = {json.dumps(args.at)}")
        browser.screenshot(args.png, full_page=args.full)
        print("\n".join(browser.console) or "no console errors")


if __name__ == "__main__":
    _main()
