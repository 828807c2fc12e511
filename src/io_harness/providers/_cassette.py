"""Cassettes: model answers recorded to JSONL by :class:`Record`, answered by :class:`Replay`.

Format, version 1 (stable; a change bumps the version). UTF-8 JSON Lines. The
first line is the header::

    {"io_harness_cassette": 1, "provider": "openai", "model": "gpt-5-mini"}

Each further line is one attempt at one model call, in the order made::

    {"turn": 0, "request": {...CompletionRequest...}, "response": {...CompletionResponse...}}
    {"turn": 1, "request": {...}, "error": {"kind": "server", "message": "...",
                                            "status": 500, "retry_after": null}}

``turn`` is the number of assistant messages in the request's conversation:
the 0-based index of the model call within its run. A turn holds its failed
attempts before the answer, so a replay retries where the recording did.
Requests and responses are the canonical models' JSON; nothing else (no
keys, no headers) is written.

A strict replay compares each request with the recorded one, except for
durations printed in seconds (``0.65s``, as pytest ends its report): those
differ on every run of the same check.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from io_harness._validation import describe_validation, read_config_text
from io_harness.errors import ConfigError, ProviderError, ProviderErrorKind
from io_harness.messages import CompletionRequest, CompletionResponse, StreamDelta
from io_harness.providers._base import Provider, StreamingProvider

__all__ = ["CASSETTE_VERSION", "Record", "Replay", "turn_of"]

CASSETTE_VERSION = 1
_SHOWN_CHARS = 200
_DURATION = re.compile(r"\b\d+\.\d+s\b")


def _without_durations(text: str) -> str:
    return _DURATION.sub("<seconds>", text)


def turn_of(request: CompletionRequest) -> int:
    """The index of this model call in its run: the assistant turns before it."""
    return sum(1 for message in request.messages if message.role == "assistant")


class _RecordedError(BaseModel):
    """The schema of ``ProviderError.to_dict()`` in a cassette line."""

    model_config = ConfigDict(extra="forbid")

    kind: ProviderErrorKind
    message: str
    status: int | None = None
    retry_after: float | None = None


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    turn: int
    request: CompletionRequest
    response: CompletionResponse | None = None
    error: _RecordedError | None = None


def _first_difference(recorded: Any, actual: Any, where: str = "") -> str | None:
    if isinstance(recorded, dict) and isinstance(actual, dict):
        for key in sorted(set(recorded) | set(actual)):
            inner = f"{where}.{key}" if where else key
            if key not in actual or key not in recorded:
                return f"{inner}: present in only one of the two"
            found = _first_difference(recorded[key], actual[key], inner)
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(actual, list):
        for index, (a, b) in enumerate(zip(recorded, actual, strict=False)):
            found = _first_difference(a, b, f"{where}[{index}]")
            if found:
                return found
        if len(recorded) != len(actual):
            return f"{where}: recorded {len(recorded)} items, got {len(actual)}"
        return None
    if (
        isinstance(recorded, str)
        and isinstance(actual, str)
        and _without_durations(recorded) != _without_durations(actual)
    ):
        at = next(
            (i for i, (a, b) in enumerate(zip(recorded, actual, strict=False)) if a != b),
            min(len(recorded), len(actual)),
        )
        return (
            f"{where}, from character {at}: recorded {_window(recorded, at)}, "
            f"got {_window(actual, at)}"
        )
    if recorded != actual:
        return f"{where}: recorded {_clip(recorded)}, got {_clip(actual)}"
    return None


def _window(text: str, at: int) -> str:
    """``text`` around position ``at``, as JSON, saying what lies outside the window."""
    start, end = max(0, at - 40), at + _SHOWN_CHARS - 40
    before = f"[{start} chars]..." if start else ""
    after = f"...[+{len(text) - end} chars]" if len(text) > end else ""
    return f"{before}{json.dumps(text[start:end], ensure_ascii=False)}{after}"


def _clip(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    if len(text) <= _SHOWN_CHARS:
        return text
    return f"{text[:_SHOWN_CHARS]}... [+{len(text) - _SHOWN_CHARS} chars]"


class Replay:
    """A provider that answers from a cassette, offline and deterministically.

    With ``strict`` (the default) each request must equal the recorded one;
    the first difference is a ``bad_request`` :class:`ProviderError` naming
    where the two part. A model call the cassette does not hold is the same
    kind of error. Replay is resume-safe: it finds a call's answer by its turn.
    """

    def __init__(self, path: str | Path, *, strict: bool = True) -> None:
        self.path = Path(path)
        self.strict = strict
        self.name = "replay"
        header, entries = _load(self.path)
        self.model: str = str(header.get("model", "replay"))
        self.recorded_provider = str(header.get("provider", "unknown"))
        self._turns: dict[int, list[_Entry]] = defaultdict(list)
        for entry in entries:
            self._turns[entry.turn].append(entry)
        self._cursor: dict[int, int] = defaultdict(int)

    def endpoints(self) -> tuple[str, ...]:
        """None: a replay never connects anywhere."""
        return ()

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """The recorded answer to this turn, or the recorded failure raised again."""
        turn = turn_of(request)
        attempts = self._turns.get(turn, [])
        index = self._cursor[turn]
        if index >= len(attempts):
            raise ProviderError(
                "bad_request",
                f"replay: {self.path.name} holds no answer for model call {turn + 1} "
                f"(it records {len(self._turns)} calls)",
            )
        self._cursor[turn] += 1
        entry = attempts[index]
        if self.strict:
            difference = _first_difference(
                entry.request.model_dump(mode="json"), request.model_dump(mode="json")
            )
            if difference is not None:
                raise ProviderError(
                    "bad_request",
                    f"replay: model call {turn + 1} differs from {self.path.name} at {difference}",
                )
        if entry.error is not None:
            raise ProviderError.from_dict(entry.error.model_dump())
        assert entry.response is not None  # _load guarantees one of the two
        return entry.response


def _load(path: Path) -> tuple[dict[str, Any], list[_Entry]]:
    lines = read_config_text(path, "cassette").splitlines()
    if not lines:
        raise ConfigError(f"cassette {path}: the file is empty")
    try:
        header = json.loads(lines[0])
    except json.JSONDecodeError as exc:
        raise ConfigError(f"cassette {path}: line 1 is not JSON: {exc}") from None
    version = header.get("io_harness_cassette") if isinstance(header, dict) else None
    if version != CASSETTE_VERSION:
        raise ConfigError(
            f"cassette {path}: line 1 is not a version {CASSETTE_VERSION} cassette header "
            f"(found version {version!r})"
        )
    entries = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            entry = _Entry.model_validate_json(line)
        except ValidationError as exc:
            raise ConfigError(
                f"cassette {path}: line {number}: {describe_validation(exc)}"
            ) from None
        if (entry.response is None) == (entry.error is None):
            raise ConfigError(f"cassette {path}: line {number}: needs a response or an error")
        entries.append(entry)
    return header, entries


class Record:
    """Wraps a provider and writes every attempt to a cassette :class:`Replay` reads.

    The file is created (or overwritten) at construction and each attempt is
    appended and flushed as it completes, so a crash keeps what was recorded.
    Only canonical requests and answers are written: never a key or a header.
    A streaming provider stays streaming when wrapped.
    """

    def __init__(self, provider: Provider, path: str | Path) -> None:
        self.inner = provider
        self.path = Path(path)
        self.name = provider.name
        self.model = provider.model
        self.path.parent.mkdir(parents=True, exist_ok=True)
        header = {
            "io_harness_cassette": CASSETTE_VERSION,
            "provider": self.name,
            "model": self.model,
        }
        self.path.write_text(json.dumps(header) + "\n", encoding="utf-8")

    def endpoints(self) -> tuple[str, ...]:
        """The wrapped provider's endpoints."""
        return self.inner.endpoints()

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """Ask the wrapped provider and record what happened."""
        try:
            response = await self.inner.complete(request)
        except ProviderError as exc:
            self._failed(request, exc)
            raise
        self._answered(request, response)
        return response

    async def stream(
        self, request: CompletionRequest
    ) -> AsyncIterator[StreamDelta | CompletionResponse]:
        """The wrapped provider's stream, passed through; its final answer is recorded."""
        if not isinstance(self.inner, StreamingProvider):
            yield await self.complete(request)
            return
        try:
            async for item in self.inner.stream(request):
                if isinstance(item, CompletionResponse):
                    self._answered(request, item)
                yield item
        except ProviderError as exc:
            self._failed(request, exc)
            raise

    def _answered(self, request: CompletionRequest, response: CompletionResponse) -> None:
        entry = _Entry(turn=turn_of(request), request=request, response=response)
        self._append(entry.model_dump_json(exclude={"error"}))

    def _failed(self, request: CompletionRequest, exc: ProviderError) -> None:
        error = _RecordedError.model_validate(exc.to_dict())
        entry = _Entry(turn=turn_of(request), request=request, error=error)
        self._append(entry.model_dump_json(exclude={"response"}))

    def _append(self, line: str) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
