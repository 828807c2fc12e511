"""Reading and writing the subject's text files: ceilings, binary refusal, atomic writes.

Lines are split after ``\\n`` only, everywhere (numbered reads, windows, grep,
edit positions), so every tool agrees on what line N is.
"""

from __future__ import annotations

import difflib
import os
from typing import BinaryIO

from io_harness._confined import PARTIAL_SUFFIX, PathRefused, Workspace, WriteVerb
from io_harness.tools._base import ToolFailure, ToolOutcome

__all__ = [
    "PARTIAL_SUFFIX",
    "READ_CEILING_BYTES",
    "WriteVerb",
    "change_diff",
    "number_lines",
    "read_numbered",
    "read_text",
    "read_window",
    "remove_partial_writes",
    "split_lines",
    "text_of",
    "write_reported",
    "write_text",
]

READ_CEILING_BYTES = 256 * 1024
"""The largest file read whole; a larger one is refused with its size, never cut."""
_PIECE_BYTES = 64 * 1024
"""The most of one line a window reads at once."""

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"%PDF", "a PDF document"),
    (b"PK\x03\x04", "a ZIP archive"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"\x7fELF", "an ELF executable"),
    (b"SQLite format 3\x00", "an SQLite database"),
)


def _binary_kind(head: bytes) -> str | None:
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if b"\x00" in head:
        return "binary data"
    return None


def _decode(data: bytes, shown_as: str, offset: int = 0) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolFailure(
            f"{shown_as} is not UTF-8 text (bad byte at offset {offset + exc.start})"
        ) from None


def _refuse_binary(head: bytes, size: int, shown_as: str) -> None:
    kind = _binary_kind(head[:8192])
    if kind is not None:
        raise ToolFailure(f"{shown_as} is {kind} ({size} bytes), not text")


def split_lines(text: str) -> list[str]:
    """The lines of ``text``, each keeping its ``\\n``; only ``\\n`` ends a line."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
        return [line + "\n" for line in lines]
    return [line + "\n" for line in lines[:-1]] + [lines[-1]]


def read_text(
    workspace: Workspace,
    path: str,
    shown_as: str,
    *,
    too_large: str = "read it in parts with offset and limit",
) -> str:
    """The whole text of a regular UTF-8 file no larger than :data:`READ_CEILING_BYTES`.

    ``too_large`` is what the refusal of a larger file advises.
    """
    with workspace.open(path) as handle:
        return text_of(handle, shown_as, too_large=too_large)


def text_of(
    handle: BinaryIO, shown_as: str, *, too_large: str = "read it in parts with offset and limit"
) -> str:
    """The whole text of an open regular file, refused past the ceiling, binary or not UTF-8."""
    size = os.fstat(handle.fileno()).st_size
    if size > READ_CEILING_BYTES:
        raise ToolFailure(
            f"{shown_as} is {size} bytes, over the read ceiling of {READ_CEILING_BYTES} "
            f"bytes; {too_large}"
        )
    data = handle.read(READ_CEILING_BYTES + 1)
    if len(data) > READ_CEILING_BYTES:  # it grew since: the ceiling holds all the same
        raise ToolFailure(
            f"{shown_as} grew past the read ceiling of {READ_CEILING_BYTES} bytes while it "
            f"was being read; {too_large}"
        )
    _refuse_binary(data, len(data), shown_as)
    return _decode(data, shown_as)


def read_window(
    workspace: Workspace, path: str, shown_as: str, first: int, count: int | None
) -> str:
    """Lines ``first`` to ``first + count - 1``, numbered, streamed from a file of any size.

    The window itself may hold at most :data:`READ_CEILING_BYTES` bytes. The file
    is read in pieces of at most :data:`_PIECE_BYTES`, so memory stays bounded
    even by a file that is one huge line: a line of the window past the ceiling
    is refused as soon as the ceiling is passed, and other lines are only counted.
    """
    window: list[str] = []
    current = bytearray()  # the window's line being read, piece by piece
    taken = 0
    total = 0  # lines begun so far
    offset = 0  # where the current piece starts
    line_start = 0
    ended = True  # the last piece ended its line
    with workspace.open(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        _refuse_binary(handle.read(8192), size, shown_as)
        handle.seek(0)
        while piece := handle.readline(_PIECE_BYTES):
            if ended:
                total, line_start = total + 1, offset
            wanted = total >= first and (count is None or len(window) < count)
            if wanted:
                taken += len(piece)
                if taken > READ_CEILING_BYTES:
                    raise ToolFailure(
                        f"lines {first}-{total} of {shown_as} exceed the read ceiling of "
                        f"{READ_CEILING_BYTES} bytes; ask for fewer lines"
                    )
                current += piece
            offset += len(piece)
            ended = piece.endswith(b"\n")
            if wanted and ended:
                window.append(_decode(bytes(current), shown_as, line_start))
                current.clear()
        if current:  # the last line, without its newline
            window.append(_decode(bytes(current), shown_as, line_start))
    if first > total:
        raise ToolFailure(f"offset {first} is past the end of {shown_as} ({total} lines)")
    last = first + len(window) - 1
    return f"[{shown_as}: lines {first}-{last} of {total}]\n" + number_lines(window, first)


def read_numbered(
    workspace: Workspace, path: str, shown_as: str, offset: int | None, limit: int | None
) -> str:
    """What ``read_file`` shows: the whole file numbered, or a window when one is asked for."""
    if offset is not None or limit is not None:
        return read_window(workspace, path, shown_as, offset or 1, limit)
    text = read_text(workspace, path, shown_as)
    return number_lines(split_lines(text), 1) if text else f"{shown_as} is empty"


def number_lines(lines: list[str], first: int) -> str:
    """Lines prefixed with their 1-based numbers, tab-separated."""
    return "".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, start=first))


def write_text(workspace: Workspace, path: str, content: str) -> WriteVerb:
    """Write atomically, creating parents; say whether the file was created, changed or not.

    A reader sees the old file or the new one, never half of one; an existing
    file keeps its mode (:meth:`Workspace.write`).
    """
    return workspace.write(path, content.encode("utf-8"))


def write_reported(workspace: Workspace, path: str, content: str, shown_as: str) -> ToolOutcome:
    """What ``write_file`` answers: the verb and size, and the file as changed unless it is not."""
    verb = write_text(workspace, path, content)
    size = len(content.encode("utf-8"))
    changed = () if verb == "unchanged" else (shown_as,)
    return ToolOutcome(f"{shown_as} {verb} ({size} bytes)", changed=changed)


def remove_partial_writes(workspace: Workspace) -> list[str]:
    """Delete the temporary files of writes a crash interrupted; return what was removed."""
    removed = []
    for found in workspace.walk():
        if found.name.startswith(".") and found.name.endswith(PARTIAL_SUFFIX):
            found.unlink()
            removed.append(found.rel)
    return removed


def change_diff(
    workspace: Workspace, path: str, rel: str, new_text: str, *, show_current: bool = True
) -> str:
    """The unified diff a write of ``new_text`` to ``path`` would make (what an approver sees).

    Without ``show_current`` (the policy does not let the file be read), only
    the new text is shown, so an approval request never copies hidden content.
    """
    if not show_current:
        added = "".join(f"+{line}" for line in new_text.splitlines(keepends=True))
        return f"(the current {rel} is not shown: the policy does not let it be read)\n{added}"
    try:
        data = workspace.read_bytes(path)
        old = "" if data is None else data.decode("utf-8")
    except (OSError, UnicodeDecodeError, PathRefused):
        return f"({rel} is not readable text; the write replaces it)"
    diff = difflib.unified_diff(
        old.splitlines(keepends=True),
        new_text.splitlines(keepends=True),
        fromfile=f"a/{rel}" if data is not None else "/dev/null",
        tofile=f"b/{rel}",
    )
    return "".join(diff) or "(no change)"
