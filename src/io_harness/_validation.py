"""Turning pydantic validation errors into one line that names each key."""

from __future__ import annotations

import contextlib
import tomllib
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from io_harness.errors import ConfigError

__all__ = ["CheckedModel", "describe_validation", "loading", "read_config_text", "read_toml"]

_LOADING: ContextVar[bool] = ContextVar("io_harness_loading", default=False)


@contextlib.contextmanager
def loading() -> Iterator[None]:
    """Mark a load from a file or the store: nested models leave errors to the loader."""
    token = _LOADING.set(True)
    try:
        yield
    finally:
        _LOADING.reset(token)


def describe_validation(exc: ValidationError, *, top: str = "(top level)") -> str:
    """Each problem as ``key.path: message``, joined with ``; ``."""
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or top
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)


class CheckedModel(BaseModel):
    """A model callers build in Python: a bad field is a ConfigError that names it.

    Inside :func:`loading` the pydantic error goes on up instead, so the loader
    can name the file and the whole key path.
    """

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            if _LOADING.get():
                raise
            raise ConfigError(f"{type(self).__name__}: {describe_validation(exc)}") from None


def read_config_text(path: Path, what: str) -> str:
    """The UTF-8 text of a file the caller configured; ConfigError if it cannot be read.

    ``what`` begins the message, e.g. ``"cassette run.jsonl"``.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{what}: cannot read {path}: {exc.strerror or exc}") from None
    return config_text(data, path, what)


def config_text(data: bytes, path: Path, what: str) -> str:
    """The UTF-8 text of the bytes read from ``path``; a ConfigError naming it if not text."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{what}: {path} is not UTF-8 text (bad byte at offset {exc.start})"
        ) from None


def read_toml(path: Path, what: str) -> dict[str, Any]:
    """The parsed TOML file at ``path``; unreadable or bad TOML is a ConfigError naming it.

    ``what`` names the file's role in the message: ``"contract"`` gives
    ``path: cannot read the contract: ...``.
    """
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
