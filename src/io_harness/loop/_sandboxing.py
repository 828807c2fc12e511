"""Which sandbox a run's commands run in, why, and what the trace keeps of it.

A :class:`~io_harness.Harness` takes ``sandbox=``: :data:`DEFAULT_SANDBOX`
(the default) is ``select()`` of the default configuration (a resume: of the
configuration the run started with); a :class:`SandboxConfig` is selected
for; a :class:`Sandbox` is used as given; :data:`NO_SANDBOX` opts out
(commands run directly, uncontained). ``None`` is refused, since it could mean
either.
The choice is made before the first provider call, so a machine that cannot
give the containment asked for fails the run with a ``SandboxError`` before
anything happens.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NoReturn

from pydantic import ValidationError

from io_harness._validation import loading
from io_harness.errors import ConfigError, ResumeError
from io_harness.sandbox import DIRECT, Sandbox, SandboxConfig, SandboxEvent, select
from io_harness.store._records import SandboxEventRow

__all__ = [
    "DEFAULT_SANDBOX",
    "NO_SANDBOX",
    "RunSandbox",
    "SandboxChoice",
    "check_choice",
    "choose_sandbox",
    "event_rows",
]


class _Choice(enum.Enum):
    SELECT = "select"
    OFF = "off"

    def __repr__(self) -> str:
        return "DEFAULT_SANDBOX" if self is _Choice.SELECT else "NO_SANDBOX"


DEFAULT_SANDBOX = _Choice.SELECT
"""The default of ``sandbox=``: ``select()`` a backend for the default configuration."""

NO_SANDBOX = _Choice.OFF
"""``sandbox=NO_SANDBOX``: commands run directly on this machine, with no containment."""

SandboxChoice = Sandbox | SandboxConfig | _Choice
"""What a :class:`~io_harness.Harness` takes as ``sandbox=``."""


@dataclass(frozen=True, slots=True)
class RunSandbox:
    """The sandbox a run (or a resume of it) uses, and how it came to be chosen."""

    sandbox: Sandbox | None
    why: str

    @property
    def backend(self) -> str:
        """The backend's name; ``"none"`` when commands run directly."""
        return self.sandbox.name if self.sandbox is not None else DIRECT

    def record_json(self) -> str:
        """What the run's ``sandbox`` column keeps: backend, why and configuration."""
        config = self.sandbox.config.model_dump(mode="json") if self.sandbox else None
        return json.dumps({"backend": self.backend, "why": self.why, "config": config})


def check_choice(choice: object) -> None:
    """Raise :class:`ConfigError` unless ``choice`` is something ``sandbox=`` takes."""
    if not isinstance(choice, _Choice | SandboxConfig | Sandbox):
        _refuse(choice)


def _refuse(choice: object) -> NoReturn:
    if choice is None:
        raise ConfigError(
            "sandbox=None could mean the default or none: leave it out (DEFAULT_SANDBOX) "
            "for containment, or give NO_SANDBOX to run commands uncontained"
        )
    raise ConfigError(
        "sandbox must be DEFAULT_SANDBOX, NO_SANDBOX, a SandboxConfig or a Sandbox, "
        f"not {type(choice).__name__}"
    )


def choose_sandbox(choice: object, stored_json: str | None = None, run_id: str = "") -> RunSandbox:
    """The sandbox for ``choice`` (see the module); ``stored_json`` is a resumed run's record.

    A configuration no backend can give is a ``SandboxError``; a ``choice``
    of the wrong type is a :class:`ConfigError`.
    """
    if choice is NO_SANDBOX:
        return RunSandbox(None, "opted out (NO_SANDBOX): commands run directly, uncontained")
    if choice is DEFAULT_SANDBOX:
        stored = _stored_config(stored_json, run_id)
        if stored is not None:
            return _selected(stored, "selected for the configuration the run started with")
        return _selected(SandboxConfig(), "selected for the default configuration")
    if isinstance(choice, SandboxConfig):
        return _selected(choice, "selected for the caller's configuration")
    if isinstance(choice, Sandbox):
        return RunSandbox(choice, "given by the caller")
    _refuse(choice)


def _selected(config: SandboxConfig, how: str) -> RunSandbox:
    sandbox = select(config)
    # select() leaves what it passed by on the sandbox, each with its reason.
    passed = getattr(sandbox, "selection", ())
    if passed:
        return RunSandbox(sandbox, f"{how}; passed by: {'; '.join(map(str, passed))}")
    return RunSandbox(sandbox, f"{how}; the first of the chain")


def _stored_config(stored_json: str | None, run_id: str) -> SandboxConfig | None:
    if not stored_json:
        return None
    try:
        config = json.loads(stored_json).get("config")
        if config is None:
            return None
        with loading():
            return SandboxConfig.model_validate(config)
    except (ValueError, AttributeError, ValidationError) as exc:
        raise ResumeError(
            f"run {run_id!r} holds a sandbox configuration this version cannot read: {exc}"
        ) from None


def event_rows(call_id: str, events: Iterable[SandboxEvent]) -> list[SandboxEventRow]:
    """Sandbox events as the store keeps them."""
    return [
        SandboxEventRow(
            call_id=call_id,
            kind=event.kind,
            backend=event.backend,
            # Details are JSON values; a Path a backend put in one is kept as text.
            detail_json=json.dumps(dict(event.detail), default=str),
            at=event.at,
        )
        for event in events
    ]
