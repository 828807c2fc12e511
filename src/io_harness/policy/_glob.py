"""Glob matching for policy rules, and the string forms targets are matched in.

A glob has two wildcards: ``*`` matches any run of characters, ``/`` included
and the empty run too, and ``?`` matches exactly one character. Every other
character stands for itself: there are no ``[...]`` classes and no escapes, so
``.``, ``+`` or ``(`` in a glob are literal. A glob matches the whole text,
never a part of it.
"""

from __future__ import annotations

import functools
import posixpath
import re

__all__ = [
    "host_candidates",
    "match_glob",
    "normalise_path",
    "path_candidates",
]


@functools.lru_cache(maxsize=2048)
def _compile(glob: str) -> re.Pattern[str]:
    parts: list[str] = []
    for char in glob:
        if char == "*":
            if not parts or parts[-1] != ".*":  # a run of stars is one star, and backtracks less
                parts.append(".*")
        elif char == "?":
            parts.append(".")
        else:
            parts.append(re.escape(char))
    return re.compile("".join(parts), re.DOTALL)


def match_glob(glob: str, text: str, *, fold_case: bool = False) -> bool:
    """Whether ``glob`` matches all of ``text``; ``fold_case`` ignores letter case."""
    if fold_case:
        glob, text = glob.lower(), text.lower()
    return _compile(glob).fullmatch(text) is not None


def normalise_path(target: str) -> str:
    """A path as rules see it: ``/`` separators, no ``.`` or ``x/..`` parts, no ``./`` prefix.

    This is string work only; resolving symlinks against the filesystem is the
    caller's. An empty path is ``.``.
    """
    path = posixpath.normpath(target.replace("\\", "/"))
    # normpath keeps exactly two leading slashes (POSIX leaves their meaning open).
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    return path


def path_candidates(path: str) -> tuple[str, ...]:
    """The texts a path glob is tried against: the whole path, then its last part.

    Matching the last part alone is what makes a glob such as ``.env`` or
    ``*.pem`` apply at any depth.
    """
    base = posixpath.basename(path)
    return (path, base) if base and base != path else (path,)


def host_candidates(target: str) -> tuple[str, ...]:
    """The texts a net glob is tried against: ``host:port`` as given, then the bare host.

    An IPv6 host in brackets (``[::1]:8080``) is also tried with and without
    its brackets (``[::1]``, ``::1``). A target with more than one ``:`` and
    no brackets is a bare IPv6 host.
    """
    candidates = [target]
    if target.startswith("[") and "]" in target:
        end = target.index("]")
        candidates += [target[: end + 1], target[1:end]]
    elif target.count(":") == 1:
        candidates.append(target.partition(":")[0])
    return tuple(dict.fromkeys(candidates))
