"""The roles file: named roles, each with a provider spec, a system prompt and declared tools.

A roles file is TOML, one ``[roles.NAME]`` table per role::

    [roles.coder]
    provider = "anthropic:claude-sonnet-4-5"
    system_prompt = "prompts/coder.md"
    tools = ["read_file", "edit_file", "run_tests"]
    context_window = 200000

Every key is optional. ``system_prompt`` is a path relative to the roles
file; its text is read when the file loads. The provider is kept as its spec
string (the one ``ioh --provider`` takes), never built here. Every mistake is
a :class:`ConfigError` naming the file and the key path
(``roles.toml: roles.coder.tools.2: ...``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, Field, ValidationError, field_validator

from io_harness._confined import PathRefused, Workspace
from io_harness._validation import CheckedModel, config_text, loading, read_toml
from io_harness.compaction._settings import Compaction
from io_harness.errors import ConfigError
from io_harness.providers._presets import SPEC_FORMS
from io_harness.tools._names import TOOL_NAME

__all__ = ["ROLE_KEYS", "Role", "Roles", "name_problem"]

ROLE_KEYS = ("provider", "system_prompt", "tools", "context_window", "compaction")
"""The keys a ``[roles.NAME]`` table may hold."""

# The kinds before the ':' of each form ("anthropic[:MODEL]" -> "anthropic"), so the list
# stays the one the CLI's help and provider_from_spec's errors show.
_PROVIDER_KINDS = frozenset(form.partition(":")[0].partition("[")[0] for form in SPEC_FORMS)


def name_problem(name: str, what: str) -> str | None:
    """Why ``name`` cannot name a ``what`` (a role, a tool), or ``None`` when it can."""
    if not TOOL_NAME.fullmatch(name):
        return f"{name!r} is not a {what} name: 1-64 of a-z, A-Z, 0-9, '_' and '-'"
    return None


def _tool_name(name: str) -> str:
    problem = name_problem(name, "tool")
    if problem is not None:
        raise ValueError(problem)
    return name


class Role(CheckedModel):
    """One role: which model, which instructions and which tools an agent of it gets.

    ``provider`` is a provider spec (``"anthropic:claude-sonnet-4-5"``), or
    ``None`` for the harness's own provider. ``system_prompt`` is the prompt's
    text (a roles file names a file; :meth:`Roles.from_toml` reads it), and
    ``system_prompt_file`` where that text came from (``None`` when built in
    Python). ``tools`` are the declared tool names in order, each 1-64 of
    ``[a-zA-Z0-9_-]``, none twice: declaring a name offers the tool only when
    the workspace commits its schema or the run has it built in (see
    :func:`~io_harness.roles.compose`).
    A bad field is a :class:`ConfigError` naming it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    provider: str | None = Field(None, strict=True)
    system_prompt: str | None = Field(None, strict=True)
    tools: tuple[Annotated[str, Field(strict=True), AfterValidator(_tool_name)], ...] = ()
    context_window: int | None = Field(None, gt=0, strict=True)
    """The model's context window in tokens, when the role knows it better than the harness."""
    compaction: Compaction | None = None
    """How a run of this role is compacted (a ``[roles.NAME.compaction]`` table), over the
    harness's setting."""
    system_prompt_file: Path | None = None

    @field_validator("name")
    @classmethod
    def _name_fits(cls, name: str) -> str:
        problem = name_problem(name, "role")
        if problem is not None:
            raise ValueError(problem)
        return name

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, spec: str | None) -> str | None:
        if spec is not None and spec.strip().partition(":")[0] not in _PROVIDER_KINDS:
            raise ValueError(f"unknown provider {spec!r}; give one of: {', '.join(SPEC_FORMS)}")
        return spec

    @field_validator("tools")
    @classmethod
    def _each_once(cls, tools: tuple[str, ...]) -> tuple[str, ...]:
        twice = next((name for i, name in enumerate(tools) if name in tools[:i]), None)
        if twice is not None:
            raise ValueError(f"{twice!r} is declared twice")
        return tools


class Roles:
    """The roles of a roles file (or built in Python), by name, in the order given.

    Mapping-like: ``name in roles``, ``len(roles)``, iteration over the names,
    :meth:`get` for a role (an unknown name is a :class:`ConfigError` naming
    the known ones), :attr:`names`, and :attr:`roles` as a read-only mapping.
    """

    __slots__ = ("_roles", "source")

    def __init__(self, roles: Mapping[str, Role], *, source: Path | None = None) -> None:
        """Hold ``roles``; each key must be its role's name. ``source`` is the file, if any."""
        for key, role in roles.items():
            if not isinstance(role, Role):
                raise ConfigError(f"roles: {key!r} is a {type(role).__name__}, not a Role")
            if role.name != key:
                raise ConfigError(f"roles: the role under {key!r} is named {role.name!r}")
        self._roles: Mapping[str, Role] = MappingProxyType(dict(roles))
        self.source = source
        """The roles file these roles were loaded from; ``None`` when built in Python."""

    @classmethod
    def from_toml(cls, path: str | Path) -> Roles:
        """Load the roles of a TOML roles file; ``system_prompt`` files are read relative to it.

        A missing file, bad TOML, an unknown key, a wrong type, a bad name, a
        tool declared twice or a prompt file that cannot be read is a
        :class:`ConfigError` naming the file and the key path.
        """
        path = Path(path)
        data = read_toml(path, "roles file")
        unknown = sorted(set(data) - {"roles"})
        if unknown:
            raise ConfigError(f"{path}: unknown key {unknown[0]!r}; the keys are: roles")
        tables = data.get("roles")
        if not isinstance(tables, dict) or not tables:
            raise ConfigError(f"{path}: roles: expected at least one [roles.NAME] table")
        folder = path.parent.absolute()
        roles = {name: _role(name, table, path, folder) for name, table in tables.items()}
        return cls(roles, source=path)

    @property
    def names(self) -> tuple[str, ...]:
        """The roles' names, in the order given."""
        return tuple(self._roles)

    @property
    def roles(self) -> Mapping[str, Role]:
        """The roles by name, read-only."""
        return self._roles

    def get(self, name: str) -> Role:
        """The role named ``name``; an unknown name is a :class:`ConfigError` naming the known."""
        role = self._roles.get(name)
        if role is None:
            where = f" in {self.source}" if self.source is not None else ""
            known = ", ".join(self._roles) or "(none)"
            raise ConfigError(f"no role is named {name!r}{where}; the roles are: {known}")
        return role

    def __contains__(self, name: object) -> bool:
        return name in self._roles

    def __iter__(self) -> Iterator[str]:
        return iter(self._roles)

    def __len__(self) -> int:
        return len(self._roles)

    def __repr__(self) -> str:
        return f"Roles({', '.join(self._roles)})"


def _role(name: str, table: Any, path: Path, folder: Path) -> Role:
    """The role of one parsed ``[roles.NAME]`` table; a mistake names the file and key."""
    key = f"roles.{name}"
    problem = name_problem(name, "role")
    if problem is not None:
        raise ConfigError(f"{path}: roles: {problem}")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: {key}: expected a table")
    unknown = sorted(set(table) - set(ROLE_KEYS))
    if unknown:
        raise ConfigError(
            f"{path}: {key}.{unknown[0]}: unknown key; the keys are: {', '.join(ROLE_KEYS)}"
        )
    if "tools" in table and not isinstance(table["tools"], list):
        raise ConfigError(f"{path}: {key}.tools: expected an array of tool names")
    fields: dict[str, Any] = {"name": name, **table}
    prompt = table.get("system_prompt")
    if prompt is not None:
        if not isinstance(prompt, str) or not prompt.strip():
            raise ConfigError(f"{path}: {key}.system_prompt: expected a path string")
        fields["system_prompt"] = _prompt_text(folder, prompt, f"{path}: {key}.system_prompt")
        fields["system_prompt_file"] = folder / prompt
    try:
        with loading():
            return Role.model_validate(fields)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {_described(exc, key)}") from None


def _prompt_text(folder: Path, prompt: str, shown: str) -> str:
    """The text of a role's prompt file, a path inside the roles file's folder.

    A roles file may come with a repository, so its prompt file is confined as
    the agent's paths are: no absolute path, no ``..``, no symlink followed.
    """
    try:
        data = Workspace(folder, called="the roles file's folder").read_bytes(prompt)
    except PathRefused as exc:
        raise ConfigError(f"{shown}: {exc}") from None
    except OSError as exc:
        raise ConfigError(
            f"{shown}: cannot read {folder / prompt}: {exc.strerror or exc}"
        ) from None
    if data is None:
        raise ConfigError(f"{shown}: cannot read {folder / prompt}: No such file or directory")
    return config_text(data, folder / prompt, shown)


def _described(exc: ValidationError, key: str) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        loc = ".".join(str(part) for part in error["loc"])
        problems.append(f"{key}.{loc}: {error['msg'].removeprefix('Value error, ')}")
    return "; ".join(problems)
