"""Loading a :class:`Policy` from the ``[policy]`` table of a TOML file::

    [policy]
    base = "guarded"          # or "default", "permissive"; "guarded" when omitted
    [policy.defaults]         # optional; replaces the base's defaults it names
    exec = "deny"
    [policy.layers.app]       # named layers, in document order
    allow_read = ["*"]
    deny_write = ["secrets/*"]
    ask_exec = ["python"]

A layer's keys are ``{allow,ask,deny}_{read,write,exec,net}``, each a list of
globs. The layer's rules keep the order of its keys and of each list. Every
mistake is a :class:`ConfigError` that names the file and the whole key path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import date, datetime, time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from io_harness._validation import read_toml
from io_harness.errors import ConfigError
from io_harness.policy._policy import BUILTIN_PREFIX, PROVIDER_LAYER
from io_harness.policy._rules import Act, Effect, glob_problem

if TYPE_CHECKING:
    from io_harness.policy._policy import Policy

__all__ = ["load_policy_file", "load_policy_table"]

_TOP_KEYS = ("base", "defaults", "layers")
_BASES = ("guarded", "default", "permissive")
_ACTS = tuple(act.value for act in Act)
_EFFECTS = tuple(effect.value for effect in Effect)
_RULE_KEYS = tuple(f"{effect}_{act}" for effect in _EFFECTS for act in _ACTS)
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def load_policy_file(cls: type[Policy], path: Path) -> Policy:
    """The policy in the ``[policy]`` table of the TOML file at ``path``."""
    data = read_toml(path, "policy")
    if "policy" not in data:
        raise ConfigError(f"{path}: no [policy] table; a policy file keeps its policy there")
    return load_policy_table(cls, data["policy"], str(path), "policy")


def load_policy_table(cls: type[Policy], data: Any, where: str, key: str) -> Policy:
    """The policy described by ``data``, the parsed table found at ``key`` in ``where``."""
    table = _table(data, where, key)
    for name in table:
        if name not in _TOP_KEYS:
            raise _error(where, _join(key, name), f"unknown key; the keys are: {_list(_TOP_KEYS)}")
    base = table.get("base", "guarded")
    if base not in _BASES:
        raise _error(where, f"{key}.base", f"expected one of {_list(_BASES)}, not {base!r}")
    policy = {"guarded": cls.guarded, "default": cls.default, "permissive": cls.permissive}[base]()
    if "defaults" in table:
        policy = policy.with_defaults(**_defaults(table["defaults"], where, f"{key}.defaults"))
    layers = _table(table.get("layers", {}), where, f"{key}.layers")
    for name, layer in layers.items():
        policy = _add_layer(policy, name, layer, where, _join(f"{key}.layers", name))
    return policy


def _defaults(data: Any, where: str, key: str) -> dict[str, Effect]:
    defaults: dict[str, Effect] = {}
    for act, effect in _table(data, where, key).items():
        if act not in _ACTS:
            raise _error(where, _join(key, act), f"unknown key; the keys are: {_list(_ACTS)}")
        if effect not in _EFFECTS:
            message = f"expected one of {_list(_EFFECTS)}, not {effect!r}"
            raise _error(where, _join(key, act), message)
        defaults[act] = Effect(effect)
    return defaults


def _add_layer(policy: Policy, name: object, data: Any, where: str, key: str) -> Policy:
    if not isinstance(name, str):
        raise _error(where, key, "a layer's name must be a string")
    if not name:
        raise _error(where, key, "a layer needs a non-empty name")
    if name.startswith(BUILTIN_PREFIX):
        message = f"the {BUILTIN_PREFIX!r} prefix is kept for the harness's own layers"
        raise _error(where, key, message)
    if name == PROVIDER_LAYER:
        message = "the name of the layer a run adds for its provider's endpoints; use another"
        raise _error(where, key, message)
    rules = _table(data, where, key, what="a table of rules")
    policy = policy.layer(name)
    for rule_key, globs in rules.items():
        here = _join(key, rule_key)
        if rule_key not in _RULE_KEYS:
            raise _error(where, here, f"unknown key; the keys are: {_list(_RULE_KEYS)}")
        if isinstance(globs, str):
            message = f"expected a list of globs; write [{json.dumps(globs)}], not a bare string"
            raise _error(where, here, message)
        if not isinstance(globs, list):
            raise _error(where, here, f"expected a list of globs, not {_kind(globs)}")
        effect, _, act = rule_key.partition("_")
        for index, glob in enumerate(globs):
            if not isinstance(glob, str):
                raise _error(where, f"{here}.{index}", f"expected a glob string, not {_kind(glob)}")
            problem = glob_problem(glob)
            if problem is not None:
                raise _error(where, f"{here}.{index}", problem)
            policy = policy.rule(act, glob, effect)
    return policy


def _table(data: Any, where: str, key: str, what: str = "a table") -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise _error(where, key, f"expected {what}, not {_kind(data)}")
    return data


def _error(where: str, key: str, message: str) -> ConfigError:
    return ConfigError(f"{where}: {key}: {message}" if where else f"{key}: {message}")


def _join(key: str, name: object) -> str:
    # A name that is not a bare TOML key is shown quoted, as TOML would write it.
    name = str(name)
    return f"{key}.{name}" if _BARE_KEY.fullmatch(name) else f"{key}.{json.dumps(name)}"


def _list(names: tuple[str, ...]) -> str:
    return ", ".join(names)


def _kind(value: object) -> str:
    kinds: tuple[tuple[type | tuple[type, ...], str], ...] = (
        (bool, "a boolean"),
        (str, "a string"),
        (int, "an integer"),
        (float, "a number"),
        (list, "a list"),
        (Mapping, "a table"),
        ((datetime, date, time), "a date or time"),
    )
    for kind, name in kinds:
        if isinstance(value, kind):
            return name
    return type(value).__name__
