"""The workspace a command that reads one looks at (``ioh roles check``, ``ioh memory``).

A run's workspace is its contract's ``root``, not the folder ``ioh`` runs in,
so these commands take the contract too (``--contract FILE``) and say which
folder they used and why: the contract's root, the folder given, or the
current folder by default.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from io_harness.contract import TaskContract
from io_harness.errors import ConfigError

__all__ = ["Scope", "scope_of"]


@dataclass(frozen=True, slots=True)
class Scope:
    """A workspace, why it is the one, and the contract it came from (if one)."""

    folder: Path
    why: str
    """``the root of CONTRACT``, ``given``, or ``the current folder``: said after the path."""
    contract: Path | None = None


def scope_of(given: Path | None, contract: Path | None, option: str) -> Scope:
    """The folder ``given`` (as ``option``), else ``contract``'s root, else the current one.

    Both at once is a :class:`ConfigError`: the command would have to choose.
    """
    if given is not None and contract is not None:
        raise ConfigError(f"give {option} or --contract FILE, not both: each names the workspace")
    if contract is not None:
        root = TaskContract.from_toml(contract).root
        return Scope(root, f"the root of {contract}", contract)
    if given is not None:
        return Scope(given, "given")
    return Scope(Path("."), "the current folder; --contract FILE looks at a contract's root")
