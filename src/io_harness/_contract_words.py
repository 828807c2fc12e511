"""A contract file's validation errors in the contract's own words, each with a hint.

pydantic names a criterion's keys under the kind it tried (``verify.command.argv``),
which no contract file writes, and says what a Python type wants (``Input should be a
valid tuple``). :func:`contract_problems` names each key as the file writes it
(``verify.argv``, ``verify.criteria.0.needle``, ``verify.test_file``) and says what
belongs there, with an example where one helps: ``verify.argv: expected a list, not
the string "python -m pytest"; argv is a list: ["python", "-m", "pytest"]``.
"""

from __future__ import annotations

import difflib
import functools
import json
import shlex
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

__all__ = ["contract_problems"]

_TYPE_WORDS = {
    "string_type": "a string",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "decimal_type": "a number",
    "decimal_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
}
"""What a key of one of these error types holds, as a contract file writes it."""
_BOUNDS = {
    "greater_than_equal": ("ge", "at least"),
    "greater_than": ("gt", "more than"),
    "less_than_equal": ("le", "at most"),
    "less_than": ("lt", "less than"),
}
_TOML_KEYS = {"test_src": "test_file"}
"""A criterion field the file names otherwise: a ``pytest`` criterion's ``test_file``."""


@functools.cache
def _kinds() -> dict[str, type[BaseModel]]:
    """Every criterion's class by its ``kind``, in the union's order."""
    from io_harness.verify import Criterion

    union = typing.get_args(Criterion)[0]
    return {member.model_fields["kind"].default: member for member in typing.get_args(union)}


def contract_problems(exc: ValidationError) -> str:
    """Each problem of a contract file as ``key.path: what belongs there``, joined by ``; ``."""
    errors = exc.errors(include_url=False)
    kept = [error for error in errors if not _echo(error, errors)]
    return "; ".join(_problem(error) for error in kept)


def _echo(error: ErrorDetails, errors: Sequence[ErrorDetails]) -> bool:
    """Whether ``error`` is a list's length said again after one of its items failed."""
    if error["type"] != "too_short":
        return False
    loc = error["loc"]
    return any(len(o["loc"]) > len(loc) and o["loc"][: len(loc)] == loc for o in errors)


class _Place:
    """Where an error is, as the file writes it, and the model of the table holding its key."""

    def __init__(self, loc: tuple[int | str, ...]) -> None:
        from io_harness.contract import Budget, TaskContract

        self.words: list[str] = []
        self.table: type[BaseModel] | None = None
        model: type[BaseModel] | None = TaskContract
        slot = False  # the next part may be the kind pydantic tried, which the file never writes
        for part in loc:
            if slot and isinstance(part, str) and part in _kinds():
                model, slot = _kinds()[part], False
                continue
            self.table, top = model, not self.words
            self.words.append(_TOML_KEYS.get(str(part), str(part)) if _kind(model) else str(part))
            slot = (top and part == "verify") or (
                isinstance(part, int) and self.words[-2:-1] == ["criteria"]
            )
            model = Budget if top and part == "budget" else None
        self.holds_criterion = slot
        """Whether the place holds a criterion (``verify``, ``criteria.N``)."""

    @property
    def criterion(self) -> str | None:
        """The kind of the criterion whose key it is, if it is a criterion's."""
        return _kind(self.table)

    @property
    def where(self) -> str:
        return ".".join(self.words) or "(top level)"

    @property
    def key(self) -> str:
        return self.words[-1] if self.words else ""

    def keys(self) -> list[str]:
        """The keys the table takes, as the file writes them."""
        if self.table is None:
            return []
        return [_TOML_KEYS.get(name, name) for name in self.table.model_fields]

    def whose(self) -> str:
        """Whose keys they are: ``a 'command' criterion``, ``budget``."""
        if self.criterion:
            return f"a {self.criterion!r} criterion"
        return ".".join(self.words[:-1]) or "the contract"


def _kind(model: type[BaseModel] | None) -> str | None:
    field = model.model_fields.get("kind") if model is not None else None
    return str(field.default) if field is not None else None


def _problem(error: ErrorDetails) -> str:
    kind, ctx, given = error["type"], error.get("ctx") or {}, error.get("input")
    place = _Place(error["loc"])
    where = place.where
    if kind == "union_tag_invalid":
        tag = str(ctx.get("tag", ""))
        near = _near(tag, _kinds())
        return (
            f"{where}.kind: {_value(tag)} is not a kind of criterion{near}; "
            f"the kinds are: {', '.join(_kinds())}"
        )
    if kind == "union_tag_not_found":
        return (
            f'{where}.kind: missing; a criterion says which it is (kind = "command"); '
            f"the kinds are: {', '.join(_kinds())}"
        )
    if kind in ("model_attributes_type", "model_type", "dict_type"):
        what = ' (kind = "..." and its keys)' if place.holds_criterion else ""
        return f"{where}: expected a table{what}, not {_what(given)}"
    if kind == "extra_forbidden":
        keys = place.keys()
        listed = f"; the keys of {place.whose()} are: {', '.join(keys)}" if keys else ""
        return f"{where}: unknown key{_near(place.key, keys)}{listed}"
    return _value_problem(kind, place, ctx, given, error["msg"])


def _value_problem(kind: str, place: _Place, ctx: dict[str, Any], given: Any, message: str) -> str:
    """A key that is there but holds what does not belong."""
    where, key = place.where, place.key
    if kind in ("tuple_type", "list_type"):
        hint = f"; {key} is a list: {_example(key, given)}" if isinstance(given, str) else ""
        return f"{where}: expected a list, not {_what(given)}{hint}"
    if kind == "too_short" and ctx.get("field_type") in ("Tuple", "List"):
        least = ctx.get("min_length", 1)
        hint = f": the program and its arguments, as in {_example(key, 'python -m pytest')}"
        return f"{where}: an empty list; it needs at least {least} item{'s' * (least != 1)}" + (
            hint if key == "argv" else ""
        )
    if kind == "string_too_short":
        return f"{where}: must not be empty"
    if kind == "missing":
        return f"{where}: missing{_required(place)}"
    if kind in _TYPE_WORDS:
        return f"{where}: expected {_TYPE_WORDS[kind]}, not {_what(given)}"
    if kind in _BOUNDS:
        name, words = _BOUNDS[kind]
        return f"{where}: must be {words} {ctx.get(name)}, not {_what(given)}"
    if kind == "literal_error":
        return f"{where}: must be {ctx.get('expected')}, not {_what(given)}"
    if kind == "value_error":
        return f"{where}: {message.removeprefix('Value error, ')}"
    return f"{where}: {message}"


def _required(place: _Place) -> str:
    """`` (a 'command' criterion needs argv)``: the keys the criterion cannot do without."""
    model = place.table
    if model is None or place.criterion is None:
        return ""
    needed = [_TOML_KEYS.get(n, n) for n, f in model.model_fields.items() if f.is_required()]
    return f" ({place.whose()} needs {' and '.join(needed)})" if needed else ""


def _what(value: Any) -> str:
    """A value as a contract file writes it, with what it is."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f"the string {_value(value)}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return "nothing" if value is None else type(value).__name__


def _value(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _example(key: str, text: str) -> str:
    """``text`` written as the list ``key`` holds: a command's words, or one item."""
    if key == "argv":
        try:
            words = shlex.split(text)
        except ValueError:  # an unclosed quote: the words as they are
            words = text.split()
        return json.dumps(words or [text], ensure_ascii=False)
    return json.dumps([text], ensure_ascii=False)


def _near(word: str, options: Sequence[str] | dict[str, Any]) -> str:
    close = difflib.get_close_matches(word, list(options), n=1)
    return f" (did you mean {_value(close[0])}?)" if close else ""
