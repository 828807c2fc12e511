"""The :class:`Policy`: layered rules over acts, defaults, and an optional bound."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, field_validator

from io_harness._validation import CheckedModel
from io_harness.errors import ConfigError
from io_harness.policy._mandatory import mandatory_denial
from io_harness.policy._rules import (
    Act,
    Effect,
    Layer,
    Rule,
    Verdict,
    as_act,
    as_effect,
    decide,
    glob_problem,
    normalise_target,
)

__all__ = ["BUILTIN_PREFIX", "PROVIDER_LAYER", "Policy"]

BUILTIN_PREFIX = "builtin-"
"""Layer names with this prefix are the harness's own; callers add no rules to them."""

PROVIDER_LAYER = "provider"
"""The layer a run adds for its provider's endpoints (``docs/network.md``); no policy may name
a layer of its own so, or a verdict naming it could not say whose rule decided."""

_SECRETS = (".env", "*.pem", "*.key", "id_rsa", "id_ed25519")


class Policy(CheckedModel):
    """Layered rules over acts, a default effect per act, and an optional bound.

    :meth:`explain` decides an act: the first matching deny rule in any layer
    (layers in order, rules in order), else the first matching ask rule, else
    the first matching allow rule, else ``defaults[act]``. Layer order only
    chooses which rule a verdict names; a deny anywhere beats an allow
    anywhere. When ``within`` is set, the stricter of this verdict and the
    bound's verdict is the answer, so nothing here can be wider than the bound.

    A run given no policy is governed by :meth:`default`: read, write and
    exec allowed, net denied (tools stay in the workspace and commands in the
    sandbox either way; the provider still reaches its model, see
    ``docs/network.md``). Start from :meth:`default`, :meth:`permissive` or
    :meth:`guarded` and build with the methods below; each returns a new
    policy::

        Policy.guarded().layer("app").allow_write("src/*").ask_exec("python")
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    layers: tuple[Layer, ...] = ()
    defaults: dict[Act, Effect]
    """The effect for each act when no rule matches; every act has one."""
    within: Policy | None = None
    """A bound: its verdict wins wherever it is stricter."""

    @field_validator("layers")
    @classmethod
    def _names_unique(cls, layers: tuple[Layer, ...]) -> tuple[Layer, ...]:
        names = [layer.name for layer in layers]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"layer names must be unique; repeated: {', '.join(repeated)}")
        return layers

    @field_validator("defaults")
    @classmethod
    def _every_act(cls, defaults: dict[Act, Effect]) -> dict[Act, Effect]:
        missing = [act.value for act in Act if act not in defaults]
        if missing:
            raise ValueError(f"every act needs a default; missing: {', '.join(missing)}")
        return {act: defaults[act] for act in Act}  # one key order, so dumps compare equal

    @classmethod
    def guarded(cls) -> Policy:
        """Read allowed, write and exec asked, net denied; secrets denied to read and write.

        The secrets are ``.env``, ``*.pem``, ``*.key``, ``id_rsa`` and
        ``id_ed25519`` at any depth, in a layer named ``builtin-secrets``.
        """
        rules = tuple(
            Rule(act=act, glob=glob, effect=Effect.DENY)
            for act in (Act.READ, Act.WRITE)
            for glob in _SECRETS
        )
        defaults = {Act.READ: Effect.ALLOW, Act.WRITE: Effect.ASK}
        defaults |= {Act.EXEC: Effect.ASK, Act.NET: Effect.DENY}
        return cls(layers=(Layer(name=f"{BUILTIN_PREFIX}secrets", rules=rules),), defaults=defaults)

    @classmethod
    def default(cls) -> Policy:
        """What a run is governed by when given no policy: read, write and exec allowed, net denied.

        No layers. The run's provider still reaches its model: the harness
        allows its endpoints in a layer of its own (``docs/network.md``).
        """
        return cls(defaults=dict.fromkeys(Act, Effect.ALLOW) | {Act.NET: Effect.DENY})

    @classmethod
    def permissive(cls) -> Policy:
        """Every act allowed, net included, no layers."""
        return cls(defaults=dict.fromkeys(Act, Effect.ALLOW))

    @classmethod
    def from_toml(cls, path: str | Path) -> Policy:
        """The policy in the ``[policy]`` table of a TOML file (see :meth:`from_table`).

        An unreadable file, bad TOML or a file without ``[policy]`` is a
        :class:`ConfigError` naming the file.
        """
        from io_harness.policy._toml import load_policy_file

        return load_policy_file(cls, Path(path))

    @classmethod
    def from_table(cls, data: Mapping[str, Any], where: str, *, key: str = "policy") -> Policy:
        """The policy described by the parsed contents of a ``[policy]`` table.

        ``where`` (a file name) begins every error message and ``key`` is the
        table's own key path, so a mistake reads
        ``contract.toml: policy.layers.app.alow_write: unknown key; ...``.
        """
        from io_harness.policy._toml import load_policy_table

        return load_policy_table(cls, data, where, key)

    def layer(self, name: str) -> Policy:
        """A copy with a new empty layer named ``name`` last; later rules go there.

        An empty name, a name already used, one starting ``builtin-`` or
        ``provider`` (the run's layer for its provider's endpoints) is a
        :class:`ConfigError`.
        """
        if not isinstance(name, str) or not name:
            raise ConfigError("Policy.layer: a layer name is a non-empty string")
        if name.startswith(BUILTIN_PREFIX):
            raise ConfigError(
                f"Policy.layer: {name!r}: the {BUILTIN_PREFIX!r} prefix is kept for "
                "the harness's own layers"
            )
        if name == PROVIDER_LAYER:
            raise ConfigError(
                f"Policy.layer: {name!r} is the name of the layer a run adds for its "
                "provider's endpoints; give your layer another name"
            )
        if any(layer.name == name for layer in self.layers):
            raise ConfigError(f"Policy.layer: there is already a layer named {name!r}")
        return self._replace(layers=(*self.layers, Layer(name=name)))

    def rule(self, act: Act | str, glob: str, effect: Effect | str) -> Policy:
        """A copy whose last layer ends with one more rule."""
        try:
            act, effect = as_act(act), as_effect(effect)
        except ConfigError as exc:
            raise ConfigError(f"Policy.rule: {exc}") from None
        return self._add("rule", act, effect, (glob,))

    def allow_read(self, *globs: str) -> Policy:
        """A copy whose last layer also allows reading paths matching ``globs``."""
        return self._add("allow_read", Act.READ, Effect.ALLOW, globs)

    def ask_read(self, *globs: str) -> Policy:
        """A copy whose last layer also asks before reading paths matching ``globs``."""
        return self._add("ask_read", Act.READ, Effect.ASK, globs)

    def deny_read(self, *globs: str) -> Policy:
        """A copy whose last layer also denies reading paths matching ``globs``."""
        return self._add("deny_read", Act.READ, Effect.DENY, globs)

    def allow_write(self, *globs: str) -> Policy:
        """A copy whose last layer also allows writing paths matching ``globs``."""
        return self._add("allow_write", Act.WRITE, Effect.ALLOW, globs)

    def ask_write(self, *globs: str) -> Policy:
        """A copy whose last layer also asks before writing paths matching ``globs``."""
        return self._add("ask_write", Act.WRITE, Effect.ASK, globs)

    def deny_write(self, *globs: str) -> Policy:
        """A copy whose last layer also denies writing paths matching ``globs``."""
        return self._add("deny_write", Act.WRITE, Effect.DENY, globs)

    def allow_exec(self, *globs: str) -> Policy:
        """A copy whose last layer also allows running programs matching ``globs``."""
        return self._add("allow_exec", Act.EXEC, Effect.ALLOW, globs)

    def ask_exec(self, *globs: str) -> Policy:
        """A copy whose last layer also asks before running programs matching ``globs``."""
        return self._add("ask_exec", Act.EXEC, Effect.ASK, globs)

    def deny_exec(self, *globs: str) -> Policy:
        """A copy whose last layer also denies running programs matching ``globs``."""
        return self._add("deny_exec", Act.EXEC, Effect.DENY, globs)

    def allow_net(self, *globs: str) -> Policy:
        """A copy whose last layer also allows connecting to hosts matching ``globs``."""
        return self._add("allow_net", Act.NET, Effect.ALLOW, globs)

    def ask_net(self, *globs: str) -> Policy:
        """A copy whose last layer also asks before connecting to hosts matching ``globs``."""
        return self._add("ask_net", Act.NET, Effect.ASK, globs)

    def deny_net(self, *globs: str) -> Policy:
        """A copy whose last layer also denies connecting to hosts matching ``globs``."""
        return self._add("deny_net", Act.NET, Effect.DENY, globs)

    def with_defaults(
        self,
        *,
        read: Effect | str | None = None,
        write: Effect | str | None = None,
        exec: Effect | str | None = None,
        net: Effect | str | None = None,
    ) -> Policy:
        """A copy with the defaults of the acts given replaced; the others kept."""
        given = {Act.READ: read, Act.WRITE: write, Act.EXEC: exec, Act.NET: net}
        defaults = dict(self.defaults)
        for act, effect in given.items():
            if effect is not None:
                try:
                    defaults[act] = as_effect(effect)
                except ConfigError as exc:
                    raise ConfigError(f"Policy.with_defaults: {act.value}: {exc}") from None
        return self._replace(defaults=defaults)

    def explain(self, act: Act | str, target: str) -> Verdict:
        """The verdict on ``act`` over ``target``, naming the rule and layer that decided."""
        try:
            act = as_act(act)
        except ConfigError as exc:
            raise ConfigError(f"Policy.explain: {exc}") from None
        normal = normalise_target(act, target)
        own = decide(self.layers, act, normal, self.defaults[act])
        own = mandatory_denial(act, normal, own) or own
        if self.within is None:
            return own
        bound = self.within.explain(act, normal)
        return bound if bound.effect.strictness > own.effect.strictness else own

    def merge(self, other: Policy) -> Policy:
        """Both policies at once: every verdict is the stricter of the two.

        The result is this policy with ``other`` added as a bound at the end of
        its ``within`` chain, so no layers are copied and no layer names can
        clash. Where both verdicts are equally strict, this policy's names the
        rule. Stacking layers into one flat list instead would let an allow rule
        of one side open what the other side's default closes.
        """
        within = other if self.within is None else self.within.merge(other)
        return self._replace(within=within)

    def contain(self, child: Policy) -> Policy:
        """``child`` narrowed by this policy: for every act and target, the stricter verdict.

        The result is ``child`` bounded by this policy (``child.merge(self)``):
        an allow of the child never opens what this policy asks about or
        denies, and a deny or ask of the child, from a rule or from its
        default, is never lost. Where both agree, the child's rule is named.
        The bound is what makes this hold: merging rules into one list would
        let a child's ask rule beat a parent's default deny.
        """
        return child.merge(self)

    def describe(self) -> str:
        """The policy as lines of text: defaults, each layer's rules in order, then any bound."""
        shown = ", ".join(f"{act.value} {effect.value}" for act, effect in self.defaults.items())
        lines = [f"defaults: {shown}"]
        for layer in self.layers:
            lines.append(f"layer {layer.name}:")
            lines.extend(f"  {rule}" for rule in layer.rules)
            if not layer.rules:
                lines.append("  (no rules)")
        if self.within is not None:
            lines.append("within (wherever this bound is stricter, its verdict wins):")
            lines.extend(f"  {line}" for line in self.within.describe().splitlines())
        return "\n".join(lines)

    def _add(self, method: str, act: Act, effect: Effect, globs: Iterable[object]) -> Policy:
        globs = tuple(globs)
        if not globs:
            raise ConfigError(f"Policy.{method}: give at least one glob")
        if not self.layers or self.layers[-1].name.startswith(BUILTIN_PREFIX):
            raise ConfigError(
                f"Policy.{method}: no layer of yours to add rules to; "
                "open one first with .layer(name)"
            )
        rules: list[Rule] = []
        for glob in globs:
            if not isinstance(glob, str):
                raise ConfigError(
                    f"Policy.{method}: a glob is a string, not {type(glob).__name__}; "
                    "pass several globs as separate arguments"
                )
            problem = glob_problem(glob)
            if problem is not None:
                raise ConfigError(f"Policy.{method}: {glob!r}: {problem}")
            rules.append(Rule(act=act, glob=glob, effect=effect))
        last = self.layers[-1]
        layer = Layer(name=last.name, rules=(*last.rules, *rules))
        return self._replace(layers=(*self.layers[:-1], layer))

    def _replace(self, **changes: Any) -> Policy:
        fields = {"layers": self.layers, "defaults": self.defaults, "within": self.within}
        return Policy(**(fields | changes))
