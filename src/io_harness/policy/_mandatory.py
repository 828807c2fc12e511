"""Files that run code later: no write reaches them unless a rule names them.

A write into a ``.git`` folder (its ``config``, ``commondir``, a hook, a
submodule's or worktree's config), a ``.git`` file pointing elsewhere, a
shell's start-up file or an editor's task file does nothing now and runs code
on the host the next time a person uses git, a shell or the editor there. So
every policy denies writing them, at any depth of the workspace, whatever its
layers allow with a wildcard; only a rule whose glob names the entry
(``allow_write(".git/hooks/pre-commit")``) lets a write through. ``ioh policy
explain`` shows the denial, in a layer named ``mandatory``.

A name is compared as a case-insensitive filesystem would see it (macOS and
Windows fold case; HFS+ ignores some invisible characters; Windows drops
trailing dots and spaces and answers to a short ``GIT~1``), so ``.GIT``,
``.git.`` and ``.git`` with a zero-width non-joiner inside are ``.git`` too.
"""

from __future__ import annotations

from io_harness._confined import same_name
from io_harness.policy._rules import Act, Effect, Rule, Verdict

__all__ = ["MANDATORY", "RUNS_CODE_LATER", "mandatory_denial", "protected_entry"]

MANDATORY = "mandatory"
"""The layer a mandatory denial is said to come from."""
RUNS_CODE_LATER = (
    ".git",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".envrc",
    ".vscode/settings.json",
    ".vscode/tasks.json",
    ".vscode/launch.json",
)
"""Each a path at any depth of the workspace; ``.git`` with everything in it."""
_FOLDERS = frozenset({".git"})
"""Entries whose whole content is protected, not the name alone."""


def protected_entry(target: str) -> str | None:
    """Which entry of :data:`RUNS_CODE_LATER` ``target`` (a workspace path) is or lies in."""
    parts = [same_name(part) for part in target.split("/")]
    for entry in RUNS_CODE_LATER:
        names = entry.split("/")
        for start in range(len(parts) - len(names) + 1):
            if parts[start : start + len(names)] == names and (
                start + len(names) == len(parts) or entry in _FOLDERS
            ):
                return entry
    return None


def _names(glob: str, entry: str) -> bool:
    """Whether ``glob`` names ``entry`` in its own letters (not by a wildcard)."""
    parts = [same_name(part) for part in glob.split("/")]
    names = entry.split("/")
    return any(parts[i : i + len(names)] == names for i in range(len(parts) - len(names) + 1))


def mandatory_denial(act: Act, target: str, verdict: Verdict) -> Verdict | None:
    """The denial of writing a file that runs code later, unless ``verdict``'s rule names it."""
    if act is not Act.WRITE or verdict.effect is Effect.DENY:
        return None
    entry = protected_entry(target)
    if entry is None or (verdict.rule is not None and _names(verdict.rule.glob, entry)):
        return None
    rule = Rule(act=Act.WRITE, glob=f"*{entry}*", effect=Effect.DENY)
    return Verdict(act=act, target=target, effect=Effect.DENY, rule=rule, layer=MANDATORY)
