"""Acts, effects, rules, layers and verdicts: the parts a :class:`Policy` is made of."""

from __future__ import annotations

import enum
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from io_harness._validation import CheckedModel
from io_harness.errors import ConfigError
from io_harness.policy._glob import (
    host_candidates,
    match_glob,
    normalise_path,
    path_candidates,
)
from io_harness.policy._hosts import canonical_net_glob, canonical_net_target

__all__ = [
    "Act",
    "Effect",
    "Layer",
    "Rule",
    "Verdict",
    "as_act",
    "as_effect",
    "decide",
    "glob_problem",
    "match_texts",
    "matched_glob",
    "matches_any",
    "normalise_target",
    "target_matches",
]


class Act(enum.StrEnum):
    """What the agent does to a target.

    ``read`` and ``write`` name a workspace-relative path, ``exec`` a program
    (a name or a path), ``net`` a ``host`` or ``host:port``.
    """

    READ = "read"
    WRITE = "write"
    EXEC = "exec"
    NET = "net"


class Effect(enum.StrEnum):
    """What the policy says about an act; ``allow`` < ``ask`` < ``deny`` in strictness."""

    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"

    @property
    def strictness(self) -> int:
        """0 for ``allow``, 1 for ``ask``, 2 for ``deny``."""
        return _STRICTNESS[self]

    @staticmethod
    def stricter(a: Effect, b: Effect) -> Effect:
        """The stricter of ``a`` and ``b``; ``a`` when they are equal."""
        return b if b.strictness > a.strictness else a


_STRICTNESS = {Effect.ALLOW: 0, Effect.ASK: 1, Effect.DENY: 2}


def as_act(value: Act | str) -> Act:
    """``value`` as an :class:`Act`; an unknown name is a :class:`ConfigError`."""
    try:
        return Act(value)
    except ValueError:
        known = ", ".join(act.value for act in Act)
        raise ConfigError(f"expected one of {known}, not {value!r}") from None


def as_effect(value: Effect | str) -> Effect:
    """``value`` as an :class:`Effect`; an unknown name is a :class:`ConfigError`."""
    try:
        return Effect(value)
    except ValueError:
        known = ", ".join(effect.value for effect in Effect)
        raise ConfigError(f"expected one of {known}, not {value!r}") from None


def glob_problem(glob: str) -> str | None:
    """What makes ``glob`` unusable in a rule (empty, or holding NUL), or ``None``."""
    if not glob:
        return "a glob must not be empty"
    if "\0" in glob:
        return "a glob must not contain a NUL character"
    return None


def normalise_target(act: Act | str, target: str) -> str:
    """The form of ``target`` that rules are matched against and verdicts report.

    Paths (``read``, ``write``) get ``/`` separators and lose ``.`` parts,
    ``x/..`` pairs and a leading ``./``; hosts (``net``) take their one
    canonical spelling (``0x7f.1:0080`` is ``127.0.0.1:80``, see
    :mod:`io_harness.policy._hosts`); programs (``exec``) are kept as given.
    Doing this twice changes nothing.
    """
    act = as_act(act)
    if act in (Act.READ, Act.WRITE):
        return normalise_path(target)
    if act is Act.NET:
        return canonical_net_target(target)
    return target


def target_matches(act: Act, glob: str, target: str) -> bool:
    """Whether ``glob`` matches the already normalised ``target`` of ``act``.

    A path or program matches when the glob matches it whole or its last part;
    a path glob that begins with ``./`` is anchored at the workspace root and
    matches the whole path only. A net target matches when the glob matches
    ``host:port`` or the bare host, in any letter case, the glob's host taken in
    its canonical spelling when it holds no wildcard (``[::1]`` means ``::1``).
    """
    if act in (Act.READ, Act.WRITE) and glob.startswith("./"):
        return match_glob(glob[2:], target)
    return matches_any(matched_glob(act, glob), match_texts(act, target), fold_case=act is Act.NET)


def matched_glob(act: Act, glob: str) -> str:
    """The form of a rule's ``glob`` that targets of ``act`` are matched against."""
    return canonical_net_glob(glob) if act is Act.NET else glob


def match_texts(act: Act, target: str) -> tuple[str, ...]:
    """The texts a glob of ``act`` is tried against, for a normalised ``target``."""
    return host_candidates(target) if act is Act.NET else path_candidates(target)


def matches_any(glob: str, texts: tuple[str, ...], *, fold_case: bool = False) -> bool:
    """Whether ``glob`` matches any of ``texts`` whole."""
    return any(match_glob(glob, text, fold_case=fold_case) for text in texts)


class Rule(CheckedModel):
    """One glob over the targets of one act, and the effect when it matches."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    act: Act
    glob: str
    effect: Effect

    @field_validator("glob")
    @classmethod
    def _usable(cls, value: str) -> str:
        problem = glob_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    def matches(self, target: str) -> bool:
        """Whether this rule applies to ``target`` (normalised here first) of its act."""
        return target_matches(self.act, self.glob, normalise_target(self.act, target))

    def __str__(self) -> str:
        return f"{self.effect.value} {self.act.value} {self.glob}"


class Layer(CheckedModel):
    """A named, ordered group of rules.

    Names beginning ``builtin-`` belong to the harness's own layers; the
    builder and the TOML loader add no rules to them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    rules: tuple[Rule, ...] = ()


class Verdict(BaseModel):
    """What the policy says about one act on one target, and why.

    ``rule`` and ``layer`` name the rule that decided; both are ``None`` when
    no rule matched and the act's default decided.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    act: Act
    target: str
    """The target as normalised for matching."""
    effect: Effect
    rule: Rule | None = None
    layer: str | None = None

    def describe(self) -> str:
        """One line, e.g. ``write src/x.py: ask (rule 'ask write *' in layer 'app')``."""
        head = f"{self.act.value} {self.target}: {self.effect.value}"
        if self.rule is None:
            return f"{head} (the default for {self.act.value})"
        return f"{head} (rule '{self.rule}' in layer '{self.layer}')"


_TIERS = (Effect.DENY, Effect.ASK, Effect.ALLOW)


def _workspace_program(act: Act, target: str) -> bool:
    """Whether ``target`` names a program by a relative path: a file in the workspace.

    Such a program is allowed only by a rule for its whole path: an allow of a
    program's name must not also allow a file the agent made under that name.
    Deny and ask rules still match its last part.
    """
    return act is Act.EXEC and "/" in target and not target.startswith("/")


def decide(layers: Iterable[Layer], act: Act, target: str, default: Effect) -> Verdict:
    """The verdict of ``layers`` on the normalised ``target`` of ``act``.

    The first matching deny rule (layers in order, then rules in order) wins,
    else the first matching ask rule, else the first matching allow rule;
    with none, ``default`` with no rule named.
    """
    layers = tuple(layers)
    texts, fold_case = match_texts(act, target), act is Act.NET
    for effect in _TIERS:
        tried = (target,) if effect is Effect.ALLOW and _workspace_program(act, target) else texts
        for layer in layers:
            for rule in layer.rules:
                if (
                    rule.act is act
                    and rule.effect is effect
                    and matches_any(matched_glob(act, rule.glob), tried, fold_case=fold_case)
                ):
                    return Verdict(
                        act=act, target=target, effect=effect, rule=rule, layer=layer.name
                    )
    return Verdict(act=act, target=target, effect=default)
