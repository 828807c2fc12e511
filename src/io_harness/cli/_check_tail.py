"""The end of a failed check's output, as ``ioh show`` prints it under the check.

A check's one-line summary (``exit status 1: 1 failed in 0.49s``) says that it
failed, not why; the why (the failing assertion, the test runner's summary)
is at the end of what the command printed. A command's report keeps stdout
and stderr apart (``[stderr]``), and a test runner writes its summary to
stdout, so the tail is stdout's; stderr's is shown only when stdout has
nothing. The tail is capped, and a cut says how much it left out.
"""

from __future__ import annotations

from io_harness.cli._text import escape, shown

__all__ = ["TAIL_LINES", "tail_lines"]

TAIL_LINES = 12
"""How many of the output's last lines are shown under a failed check."""
_LINE_CHARS = 200
"""How much of one line is shown; a longer one is cut, visibly."""
_STDERR = "[stderr]"
"""The line a command's report begins its stderr with (``verify/_criteria.py``)."""


def tail_lines(output: str, json_command: str, indent: str = "    ") -> list[str]:
    """The markup lines of the end of ``output``; ``json_command`` is what shows it whole."""
    lines = shown(output).split("\n")  # escaped first: only a newline ends a line
    if lines and lines[0].startswith("$ "):
        # The command (its arguments may hold newlines) and how it ended, which the
        # summary says: the output proper begins after the first bracketed line.
        ended = next((i for i, line in enumerate(lines) if _bracketed(line)), 0)
        lines = lines[ended + 1 :]
    out, err = _split(lines)
    body, other = (out, err) if _content(out) else (err, [])
    body = _trimmed(body)
    shown_lines = _trimmed(body[-TAIL_LINES:])
    cut = len(body) - len(shown_lines)
    result = []
    if cut or _content(other):  # said before the lines: a reader sees the tail is not all
        left = [f"{cut} earlier line{'s' * (cut != 1)}"] if cut else []
        errs = len(_trimmed(other))
        left += [f"{errs} line{'s' * (errs != 1)} of stderr"] if errs else []
        note = f"[... {' and '.join(left)} not shown: {json_command} has the whole output]"
        result.append(f"{indent}[dim]{escape(note)}[/]")
    result.extend(f"{indent}[dim]|[/] {escape(_cut(line))}".rstrip() for line in shown_lines)
    return result


def _split(lines: list[str]) -> tuple[list[str], list[str]]:
    """A command report's stdout and stderr; a report without the marker is all output."""
    if _STDERR not in lines:
        return lines, []
    at = lines.index(_STDERR)
    return lines[:at], lines[at + 1 :]


def _bracketed(line: str) -> bool:
    return line.startswith("[") and line.endswith("]")


def _content(lines: list[str]) -> bool:
    return any(line.strip() for line in lines)


def _trimmed(lines: list[str]) -> list[str]:
    """``lines`` without the blank ones at either end."""
    start = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
    end = len(lines)
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


def _cut(line: str) -> str:
    if len(line) <= _LINE_CHARS:
        return line
    return f"{line[:_LINE_CHARS]}… [+{len(line) - _LINE_CHARS} chars]"
