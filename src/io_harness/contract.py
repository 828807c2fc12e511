"""The task contract: the goal, the subject, the criterion, the constraints and the budget."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from io_harness._validation import CheckedModel, describe_validation
from io_harness.errors import ConfigError
from io_harness.pricing import MICROS
from io_harness.sandbox import Sandbox
from io_harness.verify import Criterion, Mode, Subject

__all__ = ["OPTIONAL_TOOLS", "Budget", "TaskContract"]

OPTIONAL_TOOLS = ("exec", "ask_user")
"""Tools a workspace contract may add to the file tools, by name."""


class Budget(CheckedModel):
    """The limits a run stops at, each a distinct outcome.

    ``max_steps`` counts model calls that were answered; ``max_wall_seconds``
    is real time since the run started, time between a crash and its resume
    included; ``max_tokens`` is input plus output tokens over the whole run;
    ``max_retries``, when set, caps how many times one model call is retried
    after transient failures (by default only the harness's
    :class:`~io_harness.RetryPolicy` bounds them: two minutes of retries);
    ``max_cost`` is money over the whole run, in the currency of the
    :class:`~io_harness.pricing.PriceTable` the run is given (a run with a
    cost budget and no price for its model is a :class:`ConfigError`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_steps: int = Field(30, ge=1)
    max_wall_seconds: float | None = Field(None, gt=0)
    max_tokens: int | None = Field(None, ge=1)
    max_retries: int | None = Field(None, ge=0)
    max_cost: Decimal | None = Field(None, gt=0)

    @field_validator("max_cost", mode="before")
    @classmethod
    def _exact(cls, value: object) -> object:
        # 0.1 from TOML or Python means one tenth, not its binary neighbour.
        return Decimal(repr(value)) if isinstance(value, float) else value

    @property
    def max_cost_micros(self) -> int | None:
        """``max_cost`` in micro-units, rounded down (the budget never grows by rounding)."""
        if self.max_cost is None:
            return None
        return int(self.max_cost * MICROS)


class TaskContract(BaseModel):
    """What the agent must achieve and how the harness will know it did.

    Build one with :meth:`file` (one file, two tools) or :meth:`workspace`
    (a folder, the file tools), or load one with :meth:`from_toml`. Paths are
    stored absolute.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    goal: str = Field(min_length=1)
    mode: Mode
    root: Path
    """The workspace root; in single-file mode, the file's folder."""
    path: Path | None = None
    """The file, in single-file mode."""
    verify: Criterion
    constraints: tuple[str, ...] = ()
    budget: Budget = Field(default_factory=Budget)
    tools: tuple[str, ...] = ()
    """Optional tools the run offers besides the file tools (workspace mode): ``"exec"``,
    ``"ask_user"`` (the model may ask the person a question, see ``docs/asking.md``)."""
    skills: Path | None = None
    """A folder of skills the agent may read (``read_skill``); see ``docs/skills.md``."""
    role: str | None = None
    """The role of the harness's roles file the agent works under; see ``docs/roles.md``."""

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, tools: tuple[str, ...]) -> tuple[str, ...]:
        for name in tools:
            if name not in OPTIONAL_TOOLS:
                raise ValueError(
                    f"unknown tool {name!r}; the optional tools are: {', '.join(OPTIONAL_TOOLS)}"
                )
        if len(set(tools)) != len(tools):
            raise ValueError("a tool is named twice")
        return tools

    @model_validator(mode="after")
    def _consistent(self) -> TaskContract:
        if (self.mode == "file") != (self.path is not None):
            raise ValueError("a single-file contract names a path; a workspace one does not")
        if self.mode == "file" and self.tools:
            raise ValueError(
                f"a single-file contract has only its two file tools; {self.tools[0]!r} needs "
                "a workspace contract"
            )
        return self

    @classmethod
    def file(
        cls,
        goal: str,
        path: str | Path,
        verify: Criterion,
        *,
        constraints: Sequence[str] = (),
        budget: Budget | None = None,
        skills: str | Path | None = None,
        role: str | None = None,
    ) -> TaskContract:
        """A single-file contract: the agent may read and write ``path`` only.

        ``skills`` names a folder of skills the agent may read; ``role`` a role
        of the harness's roles file to work under.
        """
        file = Path(path).absolute()
        return cls._build(
            goal=goal,
            mode="file",
            root=file.parent,
            path=file,
            verify=verify,
            constraints=constraints,
            budget=budget or Budget(),
            skills=skills,
            role=role,
        )

    @classmethod
    def workspace(
        cls,
        goal: str,
        root: str | Path,
        verify: Criterion,
        *,
        constraints: Sequence[str] = (),
        budget: Budget | None = None,
        tools: Sequence[str] = (),
        skills: str | Path | None = None,
        role: str | None = None,
    ) -> TaskContract:
        """A workspace contract: the agent works on every file under ``root``.

        ``tools`` adds optional tools: ``["exec"]`` lets the agent run commands
        (no shell; each checked by the policy as ``exec``, run in the sandbox).
        ``skills`` names a folder of skills the agent may read; ``role`` a role
        of the harness's roles file to work under.
        """
        return cls._build(
            goal=goal,
            mode="workspace",
            root=Path(root).absolute(),
            verify=verify,
            constraints=constraints,
            budget=budget or Budget(),
            tools=tools,
            skills=skills,
            role=role,
        )

    @classmethod
    def _build(cls, **fields: Any) -> TaskContract:
        if isinstance(fields["constraints"], str):
            raise ConfigError("constraints is a list of sentences; put a single one in a list")
        fields["constraints"] = tuple(fields["constraints"])
        if isinstance(fields.get("tools"), str):
            raise ConfigError("tools is a list of tool names; put a single one in a list")
        fields["tools"] = tuple(fields.get("tools", ()))
        skills = fields.get("skills")
        if skills is not None and not isinstance(skills, str | Path):
            raise ConfigError(f"skills is a folder's path, not {type(skills).__name__}")
        fields["skills"] = Path(skills).absolute() if skills is not None else None
        try:
            contract = cls(**fields)
        except ValidationError as exc:
            raise ConfigError(f"invalid contract: {describe_validation(exc)}") from None
        contract.verify.check_config(contract.mode)
        return contract

    @classmethod
    def from_toml(cls, path: str | Path) -> TaskContract:
        """Load a contract from TOML; relative paths resolve against the file's folder.

        A missing file, bad TOML or a wrong key is a :class:`ConfigError` naming it.
        """
        from io_harness._contract_toml import load_contract

        return load_contract(cls, Path(path))

    def subject(self, deadline: float | None = None, sandbox: Sandbox | None = None) -> Subject:
        """What the criterion checks, with the time the run has left.

        The criterion's commands run in ``sandbox``; ``None``: directly.
        """
        return Subject(
            mode=self.mode, root=self.root, file=self.path, deadline=deadline, sandbox=sandbox
        )

    def check(self) -> None:
        """Raise :class:`ConfigError` for what would make the run fail before it starts."""
        self.verify.check_config(self.mode)
        if self.mode == "workspace" and not self.root.is_dir():
            raise ConfigError(f"the workspace {self.root} does not exist or is not a folder")
        if self.mode == "file" and self.root.exists() and not self.root.is_dir():
            raise ConfigError(f"the contract's file {self.path} is below a file, not a folder")
        if self.path is not None and self.path.is_dir():
            raise ConfigError(f"the contract's file {self.path} is a folder")
