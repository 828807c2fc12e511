"""The spelling of a path inside a confined folder: what is refused before anything is opened.

A path the agent gives is checked as text first: no absolute path, no ``..``,
no NUL, nothing that cannot be a file name, nothing of the memory's reserved
names. What is left is a tuple of plain names, walked one by one from the
folder's descriptor (:mod:`._descend`); no filesystem is consulted here.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path, PurePosixPath

__all__ = ["MEMORY_PREFIX", "PathChanged", "PathRefused", "parts_of", "same_name"]

MEMORY_PREFIX = "memory:"
"""The policy's targets for memory are ``memory:<key>`` (a write); no workspace path takes it."""


class PathRefused(Exception):
    """A path the agent gave cannot be used: outside the folder, a symlink, not a file.

    The text says why, in words the model can act on.
    """


class PathChanged(PathRefused):
    """A folder or file on the path changed while the harness was opening it (a race).

    Nothing was read or written through the change; trying again sees the new state.
    """


def parts_of(path: str, called: str) -> tuple[str, ...]:
    """The names of ``path``'s components, or a refusal saying why there can be none.

    ``.`` components and doubled separators vanish, ``\\`` counts as ``/``;
    the folder itself is ``()``. ``called`` is what a refusal calls the folder.
    """
    if not path or "\x00" in path:
        raise PathRefused("the path is empty or holds a NUL character")
    try:
        os.fsencode(path)
    except UnicodeEncodeError:
        raise PathRefused(f"{path!r} is not a valid file name") from None
    pure = PurePosixPath(path.replace("\\", "/"))
    if pure.is_absolute() or Path(path).is_absolute():
        raise PathRefused(f"{path!r} is absolute; give a path relative to {called}")
    if ".." in pure.parts:
        raise PathRefused(f"{path!r} contains '..'; paths may not leave {called}")
    parts = tuple(part for part in pure.parts if part != ".")
    if any(part.startswith(MEMORY_PREFIX) for part in parts):
        raise PathRefused(
            f"{path!r}: names beginning {MEMORY_PREFIX!r} are kept for the agent's memory "
            f"(the policy's {MEMORY_PREFIX}<key> targets); choose another name"
        )
    return parts


# Code points HFS+ ignores in names (git's own list, from is_hfs_dotgit).
_IGNORED = re.compile("[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]")
_SHORT_NAMES = {"git~1": ".git"}
"""Windows' 8.3 short name of ``.git`` (git refuses it in trees too)."""


def same_name(name: str) -> str:
    """``name`` as a case-folding, invisible-character-ignoring filesystem compares it.

    macOS and Windows fold case, HFS+ ignores some invisible characters, and
    Windows drops trailing dots and spaces and answers to a short ``GIT~1``:
    two names with one ``same_name`` may be one file there.
    """
    if name.isascii():  # the common case, and no ignored character is ASCII
        folded = name.lower().rstrip(". ")
    else:
        folded = unicodedata.normalize("NFC", _IGNORED.sub("", name)).casefold().rstrip(". ")
    return _SHORT_NAMES.get(folded, folded)
