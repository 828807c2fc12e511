"""Where a stored row becomes a record: every column checked once, one error naming the row.

Each table the store reads has a pydantic model whose fields are its columns
(the trace's records, and the private rows below), and :func:`records` is the
one place a row becomes one. What a damaged or crafted store can hold — a
JSON column that is not JSON or not the shape it keeps, nested past anything
the harness writes; NULL where a value belongs; text in a number's column; a
time no calendar has; a status or outcome this version does not know — is a
:class:`~io_harness.errors.StorageError` of one line naming the run, the
table, the row and what is wrong. What is read past this point need not
guard against the store.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Json,
    ValidationError,
    model_validator,
)

from io_harness._arguments import arguments_value_problem
from io_harness._validation import describe_validation, loading
from io_harness.errors import StorageError
from io_harness.messages import Message
from io_harness.policy._approval import ApprovalRequest, Decision

__all__ = [
    "STORED_JSON_DEPTH",
    "ApprovalRecord",
    "Count",
    "JsonArrayText",
    "JsonObjectText",
    "JsonText",
    "MessageRecord",
    "Moment",
    "RunRecord",
    "Seconds",
    "StoredRecord",
    "decoded_json",
    "records",
]

STORED_JSON_DEPTH = 128
"""How deep a JSON column may nest. The harness writes nothing deeper (a tool call's
arguments, at most 64 levels, inside an event, a journal or a message), and the JSON
parsers and serialisers a trace meets accept well past it."""

_LAST_MOMENT = 253_402_300_799.0
"""The last second of year 9999: the latest time a calendar (``datetime``) can show."""
_SHOWN_PROBLEM_CHARS = 300
_SHOWN_KEY_CHARS = 60


def decoded_json(text: object) -> object:
    """A JSON column's value, within :data:`STORED_JSON_DEPTH`; a ValueError says why not.

    A value that is not text (one built in Python) is returned as it is.
    """
    if not isinstance(text, str | bytes):
        return text
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"the JSON nests deeper than {STORED_JSON_DEPTH} levels") from None
    if _depth(value) > STORED_JSON_DEPTH:
        raise ValueError(f"the JSON nests deeper than {STORED_JSON_DEPTH} levels")
    return value


def _depth(value: object) -> int:
    deepest, stack = 0, [(1, value)]
    while stack:
        depth, node = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            if deepest > STORED_JSON_DEPTH:
                return deepest
            members = node.values() if isinstance(node, dict) else node
            stack.extend((depth + 1, member) for member in members)
    return deepest


def _json_text(kind: type[object] | None) -> AfterValidator:
    """A check that a text column holds JSON (of ``kind``: ``dict``, ``list``), kept as text."""

    def check(text: str) -> str:
        value = decoded_json(text)
        if kind is not None and not isinstance(value, kind):
            wanted = "an object" if kind is dict else "an array"
            raise ValueError(f"the JSON is {_json_kind(value)}, not {wanted}")
        return text

    return AfterValidator(check)


def _holding(model: type[BaseModel]) -> AfterValidator:
    """A check that a text column's JSON loads as ``model``; the text is kept as it is."""

    def check(text: str) -> str:
        decoded_json(text)  # the depth first: the model's own parser has a lower limit
        try:
            model.model_validate_json(text)
        except ValidationError as exc:
            raise ValueError(f"not a stored {model.__name__}: {describe_validation(exc)}") from None
        return text

    return AfterValidator(check)


def _json_kind(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    return "an array" if isinstance(value, list) else "an object"


JsonText = Annotated[str, _json_text(None)]
"""A column holding JSON text, kept as text (a tool call's arguments as sent)."""
JsonObjectText = Annotated[str, _json_text(dict)]
JsonArrayText = Annotated[str, _json_text(list)]
Count = Annotated[int, Field(ge=0)]
"""Tokens, steps, micro-units of money: never negative."""
Moment = Annotated[float, Field(ge=0, le=_LAST_MOMENT, allow_inf_nan=False)]
"""A Unix time a calendar can show."""
Seconds = Annotated[float, Field(allow_inf_nan=False)]
"""A duration."""
RunStatus = Literal["running", "awaiting", "finished"]
RunOutcomeWord = Literal[
    "success",
    "step_cap_reached",
    "time_budget_exceeded",
    "token_budget_exceeded",
    "cost_budget_exceeded",
    "provider_failed",
    "context_exhausted",
    "awaiting_approval",
    "awaiting_answer",
]
"""``RunOutcome``'s values (the store knows nothing of the loop; a test keeps them equal)."""
ApprovalStatus = Literal["pending", "decided", "performing", "done"]


class StoredRecord(BaseModel):
    """One stored row; :meth:`columns` are the columns a store selects for it, and
    :attr:`row_key` the ones that name the row in an error."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    row_key: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def columns(cls) -> tuple[str, ...]:
        """The table's columns this record holds, in field order."""
        return tuple(cls.model_fields)


RecordT = TypeVar("RecordT", bound=BaseModel)


def records(
    cls: type[RecordT],
    table: str,
    rows: Iterable[Sequence[Any]],
    *,
    owner: str | None = None,
) -> tuple[RecordT, ...]:
    """``rows`` of ``table``, selected in the order of ``cls``'s fields, as records.

    ``owner`` names whose rows they are (``run 'r1'``); by default the row's
    own ``run_id`` or ``id`` column does. A row that does not load is a
    StorageError of one line: the owner, the table, the row, the column, why.
    """
    columns = tuple(cls.model_fields)
    loaded: list[RecordT] = []
    with loading():
        for row in rows:
            values = dict(zip(columns, row, strict=True))
            try:
                loaded.append(cls.model_validate(values))
            except ValidationError as exc:
                raise StorageError(_unloadable(cls, table, values, owner, exc)) from None
    return tuple(loaded)


def _unloadable(
    cls: type[BaseModel],
    table: str,
    values: dict[str, Any],
    owner: str | None,
    exc: ValidationError,
) -> str:
    if owner is None:
        named = values.get("run_id", values.get("id"))
        owner = f"run {_shown(named)}"
    key: tuple[str, ...] = getattr(cls, "row_key", ())
    where = ", ".join(f"{column} {_shown(values.get(column))}" for column in key)
    problems = exc.errors(include_url=False)
    first = problems[0]
    column = ".".join(str(part) for part in first["loc"]) or "the row"
    problem = f"{column}: {first['msg'].removeprefix('Value error, ')}"
    if len(problems) > 1:
        problem += f" (and {len(problems) - 1} more)"
    problem = " ".join(problem.split())  # one line, whatever the message held
    if len(problem) > _SHOWN_PROBLEM_CHARS:
        problem = problem[:_SHOWN_PROBLEM_CHARS] + "..."
    row = f"a row of {table} ({where})" if where else f"its row of {table}"
    return f"{owner} holds {row} that does not load: {problem}"


def _shown(value: object) -> str:
    """A stored value in an error: its repr (control characters escaped), cut short."""
    text = repr(value)
    return text if len(text) <= _SHOWN_KEY_CHARS else f"{text[:_SHOWN_KEY_CHARS]}..."


class RunRecord(StoredRecord):
    """A ``runs`` row: what :class:`~io_harness.store._records.StoredRun`,
    :class:`~io_harness.store._records.RunSummary` and a tree's nodes are made of."""

    id: str
    goal: str
    contract: JsonObjectText
    system_prompt: str
    tools: JsonArrayText
    provider: str
    model: str
    status: RunStatus
    outcome: RunOutcomeWord | None
    steps: Count
    input_tokens: Count
    output_tokens: Count
    cache_read_tokens: Count
    cache_write_tokens: Count
    reasoning_tokens: Count
    cost_micros: Count
    unpriced_calls: Count
    started_at: Moment
    finished_at: Moment | None
    error: JsonObjectText | None
    policy: JsonObjectText | None
    remembered: JsonArrayText | None
    labels: Json[dict[str, str]] | None
    sandbox: str | None
    """Kept as text: a record that does not load is shown as ``(unreadable)``, not refused."""
    prices: JsonObjectText | None
    setup: JsonObjectText | None
    parent_id: str | None
    root_id: str | None
    depth: Count
    spawn_call: str | None
    tree: JsonObjectText | None
    journal: JsonObjectText | None


class MessageRecord(StoredRecord):
    """A ``messages`` row: its place and the canonical Message it holds."""

    row_key: ClassVar[tuple[str, ...]] = ("seq",)

    seq: int
    body: Json[Message]

    @model_validator(mode="after")
    def _arguments_within_bounds(self) -> MessageRecord:
        for call in self.body.tool_calls:
            if isinstance(call.arguments, dict):
                problem = arguments_value_problem(call.arguments)
                if problem is not None:
                    raise ValueError(f"tool call {call.id!r}: {problem}")
        return self


class ApprovalRecord(StoredRecord):
    """An ``approvals`` row as the loop reads it: its JSON kept as the text stored."""

    row_key: ClassVar[tuple[str, ...]] = ("id",)

    id: str
    run_id: str
    step: Count
    status: ApprovalStatus
    request: Annotated[str, _holding(ApprovalRequest)]
    progress: JsonObjectText
    decision: Annotated[str, _holding(Decision)] | None
    created_at: Moment
    decided_at: Moment | None
