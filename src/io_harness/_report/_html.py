"""The page as HTML: one file, its style and script inline, every run's text escaped.

jinja2 renders it with autoescape on, so text from a run (a tool's output
holding ``<script>``) is shown, never run; control characters and the
bidirectional overrides that could disguise what a line says are written as
visible escapes. The page's Content-Security-Policy allows no network at
all and only its own script (by hash), so even markup that got through
could neither load nor run anything.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shlex
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from io_harness._report._page import Page, seconds
from io_harness._terminal import shown
from io_harness.compaction._settings import positions_text
from io_harness.pricing import format_money

__all__ = ["render_page"]

TEMPLATES = Path(__file__).parent / "templates"
_FOLD_LINES = 24
_FOLD_CHARS = 2400
_PREVIEW = 90


def render_page(page: Page) -> str:
    """The report's HTML."""
    import jinja2
    from markupsafe import Markup

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_visible,
    )
    environment.filters.update(
        argv=_argv,
        decided=_decided,
        detail=_detail,
        diff_lines=_diff_lines,
        long=_long,
        money=_money,
        passfail=_passfail,
        positions=positions_text,
        pretty=_pretty,
        preview=_preview,
        seconds=seconds,
        size=_size,
        tokens=lambda n: f"{n:,}",
        tone=_tone,
        when=_when,
    )
    script = (TEMPLATES / "report.js").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return environment.get_template("report.html.j2").render(
        page=page,
        css=Markup((TEMPLATES / "report.css").read_text(encoding="utf-8")),
        script=Markup(script),
        script_hash=f"sha256-{digest}",
    )


def _visible(value: Any) -> Any:
    """Text from a run with its hidden characters written as ``\\xNN`` / ``\\uNNNN``."""
    if not isinstance(value, str) or hasattr(value, "__html__"):
        return value
    # One list of what could hide or reorder text, the terminal's: a page shows what a
    # run stored as the CLI does.
    return shown(value)


def _long(text: str) -> bool:
    return len(text) > _FOLD_CHARS or text.count("\n") >= _FOLD_LINES


def _preview(text: str, limit: int = _PREVIEW) -> str:
    """The start of ``text`` on one line (its whitespace runs as single spaces), cut at
    ``limit`` characters with an ellipsis when there is more."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit].rstrip() + "…"


def _size(text: str) -> str:
    lines = text.count("\n") + (not text.endswith("\n"))
    return f"{lines:,} line{'s' if lines != 1 else ''}, {len(text):,} characters"


def _diff_lines(diff: str) -> list[tuple[str, str]]:
    """Each line of a unified diff, ended, with its kind: ``head``, ``hunk``, ``add``,
    ``del`` or ``ctx`` (each is a block of its own, its newline kept for copying)."""
    kinds = []
    for text in diff.splitlines(keepends=True):
        line = text if text.endswith("\n") else text + "\n"
        if line.startswith(("+++", "---")):
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "ctx"
        kinds.append((kind, line))
    return kinds


def _money(micros: int | None, currency: str | None) -> str:
    if micros is None or currency is None:
        return "unpriced"
    return format_money(micros, currency)


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch))


def _tone(state: str) -> str:
    if state in {"success", "done", "approved"}:
        return "ok"
    if state in {
        "running",
        "awaiting",
        "awaiting_approval",
        "awaiting_answer",
        "pending",
        "decided",
        "performing",
    }:
        return "wait"
    if state in {"finished"}:
        return "plain"
    return ""


def _passfail(verdict: bool | None) -> str:
    return "" if verdict is None else ("pass" if verdict else "fail")


def _decided(decision: str) -> str:
    if decision in {"allowed", "approved"}:
        return "allow"
    if decision in {"refused", "denied"}:
        return "refuse"
    if decision == "deferred":
        return "ask"
    return ""


def _argv(argv: Sequence[str]) -> str:
    return shlex.join(argv)


def _pretty(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _detail(detail: dict[str, Any]) -> str:
    """An event's detail in one line: ``argv: python -m pytest · duration: 0.52 s``."""
    parts = []
    for key, value in detail.items():
        if key == "argv" and isinstance(value, list):
            text = shlex.join(str(item) for item in value)
        elif key in {"duration", "latency"} and isinstance(value, int | float):
            text = seconds(float(value))
        elif isinstance(value, str):
            text = value
        else:
            text = json.dumps(value, ensure_ascii=False, default=str)
        parts.append(f"{key}: {text}")
    return " · ".join(parts)
