"""A suite: cases (contracts, each run a number of times) over providers, and how many at once.

Written in TOML (relative paths are the suite file's)::

    name = "textstats"                    # the label suite=; default: the file's stem
    concurrency = 4                       # runs at once (default 4)

    [[case]]
    contract = "cases/add/contract.toml"  # a contract file
    repeat = 3                            # runs of it per provider (default 1)

    [[provider]]
    spec = "openai:gpt-5-mini"            # as `ioh run --provider` takes it

    [[provider]]
    name = "claude, then gpt"             # default: the spec(s)
    spec = ["anthropic:claude-sonnet-4-5", "openai:gpt-5-mini"]  # a fallback chain

``{case}`` in a spec is the case's name (``replay:cassettes/{case}.jsonl``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from io_harness._validation import CheckedModel, describe_validation, loading, read_toml
from io_harness.contract import TaskContract
from io_harness.errors import ConfigError

__all__ = ["CASE_PLACEHOLDER", "Suite", "SuiteCase", "SuiteProvider"]

CASE_PLACEHOLDER = "{case}"
"""Written in a provider spec, the name of the case the provider answers."""
CONTRACT_FILE = "contract.toml"
"""A case's contract file of this name names the case after its folder."""

ModelT = TypeVar("ModelT", bound=CheckedModel)

_SUITE_KEYS = ("approve", "case", "concurrency", "isolate", "name", "prices", "provider")
_CASE_KEYS = ("contract", "name", "repeat")
_PROVIDER_KEYS = ("name", "spec")


class SuiteCase(CheckedModel):
    """One task of a suite: a contract, run ``repeat`` times with each provider.

    ``contract`` is a contract file (its ``[policy]``, ``[sandbox]``, ``[[mcp]]`` and
    roles file apply as under ``ioh run``) or a :class:`TaskContract` built in
    Python. ``name`` defaults to the contract file's folder when the file is
    ``contract.toml``, else to its stem; a :class:`TaskContract` case needs one.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = ""
    contract: Path | TaskContract
    repeat: int = Field(1, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _named(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "name" in data:
            return data
        contract = data.get("contract")
        if not isinstance(contract, str | Path):
            return data
        path = Path(contract)
        folder_named = path.name == CONTRACT_FILE and path.parent.name
        return {**data, "name": path.parent.name if folder_named else path.stem}

    @model_validator(mode="after")
    def _has_name(self) -> SuiteCase:
        if not self.name:
            raise ConfigError("SuiteCase: name: a contract built in Python has no file to name it")
        return self

    def load(self) -> TaskContract:
        """The case's contract, loaded and checked (its workspace exists); a ConfigError
        otherwise."""
        contract = (
            self.contract
            if isinstance(self.contract, TaskContract)
            else TaskContract.from_toml(self.contract)
        )
        try:
            contract.check()
        except ConfigError as exc:
            raise ConfigError(f"case {self.name!r}: {exc}") from None
        return contract


class SuiteProvider(CheckedModel):
    """One provider a suite compares: a name, and the specs of ``ioh run --provider``.

    Several specs are a fallback chain, asked in order. A provider with no
    specs is one a caller's ``harness_for`` builds (see :func:`run_suite`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = ""
    specs: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _named(cls, data: Any) -> Any:
        if isinstance(data, dict) and "name" not in data and data.get("specs"):
            return {**data, "name": _default_name(data["specs"])}
        return data

    @field_validator("specs", mode="before")
    @classmethod
    def _listed(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _has_name(self) -> SuiteProvider:
        if not self.name:
            raise ConfigError("SuiteProvider: name: give one, or specs to name it by")
        return self

    def specs_for(self, case: SuiteCase) -> tuple[str, ...]:
        """The specs with ``{case}`` replaced by the case's name."""
        return tuple(spec.replace(CASE_PLACEHOLDER, case.name) for spec in self.specs)


class Suite(CheckedModel):
    """Cases run with providers: each case ``repeat`` times with each provider.

    - ``concurrency``: how many runs at once, at most.
    - ``isolate``: each run works in its own copy of its case's workspace,
      removed after the run (the default); ``False`` runs every run in the
      contract's own folder, one after another's changes.
    - ``prices``: a price table (TOML) runs are priced with.
    - ``approve``: what an ask of the policy gets, since nobody is there to
      answer it: ``"deny"`` (the model reads the refusal) or ``"approve-all"``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    cases: tuple[SuiteCase, ...] = Field(min_length=1)
    providers: tuple[SuiteProvider, ...] = ()
    concurrency: int = Field(4, ge=1)
    isolate: bool = True
    prices: Path | None = None
    approve: Literal["deny", "approve-all"] = "deny"

    @model_validator(mode="after")
    def _unique(self) -> Suite:
        for what, names in (
            ("case", [case.name for case in self.cases]),
            ("provider", [provider.name for provider in self.providers]),
        ):
            twice = next((name for name in names if names.count(name) > 1), None)
            if twice is not None:
                raise ValueError(f"two {what}s are named {twice!r}; give each its own name")
        return self

    @classmethod
    def from_toml(cls, path: str | Path) -> Suite:
        """Load a suite file; relative paths (contracts, prices, ``replay:`` cassettes)
        resolve against its folder. A mistake is a :class:`ConfigError` naming its key."""
        path = Path(path)
        data = read_toml(path, "suite")
        folder = path.parent.absolute()
        _known(data, _SUITE_KEYS, str(path))
        fields: dict[str, Any] = {k: v for k, v in data.items() if k not in ("case", "provider")}
        fields.setdefault("name", path.stem)
        if isinstance(fields.get("prices"), str):
            fields["prices"] = folder / fields["prices"]
        fields["cases"] = [
            _case(table, folder, f"{path}: case.{i}")
            for i, table in enumerate(_tables(data.get("case", []), "case", path))
        ]
        fields["providers"] = [
            _provider(table, folder, f"{path}: provider.{i}")
            for i, table in enumerate(_tables(data.get("provider", []), "provider", path))
        ]
        if not fields["cases"]:
            raise ConfigError(f"{path}: no cases; add a [[case]] table with a contract")
        try:
            with loading():
                return cls.model_validate(fields)
        except ValidationError as exc:
            raise ConfigError(f"{path}: {describe_validation(exc)}") from None

    def with_providers(self, specs: Sequence[str]) -> Suite:
        """This suite with one provider per spec instead of its own, each named by its spec;
        a spec given twice is a ConfigError."""
        doubled = sorted({spec for spec in specs if list(specs).count(spec) > 1})
        if doubled:
            raise ConfigError(f"--provider {doubled[0]} is given twice; give each provider once")
        providers = [SuiteProvider(name=spec, specs=(spec,)) for spec in specs]
        return self.model_copy(update={"providers": tuple(providers)})

    @property
    def runs(self) -> int:
        """How many runs the suite makes: each case's repeats times the providers."""
        return sum(case.repeat for case in self.cases) * len(self.providers)


def _known(data: dict[str, Any], keys: Sequence[str], where: str) -> None:
    unknown = sorted(set(data) - set(keys))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; the keys are: {', '.join(keys)}")


def _tables(value: Any, key: str, path: Path) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(one, dict) for one in value):
        raise ConfigError(f"{path}: {key}: expected tables ([[{key}]])")
    return value


def _case(table: dict[str, Any], folder: Path, where: str) -> SuiteCase:
    _known(table, _CASE_KEYS, where)
    contract = table.get("contract")
    if not isinstance(contract, str):
        raise ConfigError(f"{where}: contract: expected the path of a contract file")
    return _checked(SuiteCase, {**table, "contract": folder / contract}, where)


def _provider(table: dict[str, Any], folder: Path, where: str) -> SuiteProvider:
    _known(table, _PROVIDER_KEYS, where)
    specs = table.get("spec")
    if isinstance(specs, str):
        specs = [specs]
    if not isinstance(specs, list) or not specs or not all(isinstance(s, str) for s in specs):
        raise ConfigError(f"{where}: spec: expected a provider spec, or a list of them")
    fields = {
        "name": table.get("name", _default_name(specs)),  # the specs as written, not resolved
        "specs": [_resolved(spec, folder) for spec in specs],
    }
    return _checked(SuiteProvider, fields, where)


def _default_name(specs: str | Sequence[str]) -> str:
    """A provider's name when it is given none: its spec, or its chain's joined by ``>``."""
    return specs if isinstance(specs, str) else " > ".join(specs)


def _resolved(spec: str, folder: Path) -> str:
    """A ``replay:`` spec's cassette made absolute against the suite's folder."""
    kind, _, rest = spec.strip().partition(":")
    if kind != "replay" or not rest or Path(rest).is_absolute():
        return spec.strip()
    return f"replay:{folder / rest}"


def _checked(cls: type[ModelT], fields: Any, where: str) -> ModelT:
    try:
        with loading():
            return cls.model_validate(fields)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {describe_validation(exc)}") from None
