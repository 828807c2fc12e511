"""Files that run code later: no write reaches them unless a rule names them.

A write to ``.git/config`` (a ``core.hooksPath``), a git hook, a shell's
start-up file or an editor's task file does nothing now and runs code on the
host the next time a person uses git, a shell or the editor there. So every
policy denies writing them, whatever its layers allow with a wildcard; only
a rule whose glob names the file (``allow_write(".git/hooks/pre-commit")``)
lets a write through. ``ioh policy explain`` shows the denial, in a layer
named ``mandatory``.
"""

from __future__ import annotations

from io_harness.policy._rules import Act, Effect, Rule, Verdict

__all__ = ["MANDATORY", "RUNS_CODE_LATER", "mandatory_denial"]

MANDATORY = "mandatory"
"""The layer a mandatory denial is said to come from."""
RUNS_CODE_LATER = (
    ".git/config",
    ".git/hooks",
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
"""Each a path (or, for ``.git/hooks``, a folder) at any depth of the workspace."""


def _protected(target: str) -> str | None:
    """Which entry of :data:`RUNS_CODE_LATER` ``target`` (a workspace path) is, if one."""
    parts = target.split("/")
    for entry in RUNS_CODE_LATER:
        names = entry.split("/")
        for start in range(len(parts) - len(names) + 1):
            if parts[start : start + len(names)] == names and (
                start + len(names) == len(parts) or entry == ".git/hooks"
            ):
                return entry
    return None


def mandatory_denial(act: Act, target: str, verdict: Verdict) -> Verdict | None:
    """The denial of writing a file that runs code later, unless ``verdict``'s rule names it."""
    if act is not Act.WRITE or verdict.effect is Effect.DENY:
        return None
    entry = _protected(target)
    if entry is None or (verdict.rule is not None and entry in verdict.rule.glob):
        return None
    rule = Rule(act=Act.WRITE, glob=f"*{entry}*", effect=Effect.DENY)
    return Verdict(act=act, target=target, effect=Effect.DENY, rule=rule, layer=MANDATORY)
