"""Reading and writing the subject's text files: ceilings, binary refusal, atomic writes."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from io_harness.tools._base import ToolFailure

__all__ = [
    "PARTIAL_SUFFIX",
    "READ_CEILING_BYTES",
    "WriteVerb",
    "check_text_file",
    "number_lines",
    "read_text",
    "remove_partial_writes",
    "write_text",
]

READ_CEILING_BYTES = 256 * 1024
"""The largest file read whole; a larger one is refused with its size, never cut."""

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


def check_text_file(path: Path, shown_as: str) -> int:
    """The size of a readable text file; refuses missing, directory and binary files."""
    if path.is_dir():
        raise ToolFailure(f"{shown_as} is a directory; use list_dir")
    if not path.exists():
        raise ToolFailure(f"{shown_as} does not exist")
    size = path.stat().st_size
    with path.open("rb") as handle:
        kind = _binary_kind(handle.read(8192))
    if kind is not None:
        raise ToolFailure(f"{shown_as} is {kind} ({size} bytes), not text")
    return size


def read_text(path: Path, shown_as: str) -> str:
    """The whole text of a file no larger than :data:`READ_CEILING_BYTES`."""
    size = check_text_file(path, shown_as)
    if size > READ_CEILING_BYTES:
        raise ToolFailure(
            f"{shown_as} is {size} bytes, over the read ceiling of {READ_CEILING_BYTES} "
            "bytes; read it in parts with offset and limit"
        )
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolFailure(
            f"{shown_as} is not UTF-8 text (bad byte at offset {exc.start})"
        ) from None


def number_lines(lines: list[str], first: int) -> str:
    """Lines prefixed with their 1-based numbers, tab-separated."""
    return "".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, start=first))


WriteVerb = Literal["created", "changed", "unchanged"]

PARTIAL_SUFFIX = ".ioh-tmp"
"""Suffix of the temporary file a write renames into place; one left behind is a crash's."""


def remove_partial_writes(files: Iterable[Path]) -> list[Path]:
    """Delete the temporary files of writes a crash interrupted; return what was removed."""
    removed = []
    for path in files:
        if path.name.startswith(".") and path.name.endswith(PARTIAL_SUFFIX):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def write_text(path: Path, content: str, shown_as: str) -> WriteVerb:
    """Write atomically, creating parents; say whether the file was created, changed or not."""
    if path.is_dir():
        raise ToolFailure(f"{shown_as} is a directory")
    data = content.encode("utf-8")
    existed = path.exists()
    if existed and path.read_bytes() == data:
        return "unchanged"
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if existed else 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=PARTIAL_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        Path(tmp).chmod(mode)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return "changed" if existed else "created"
