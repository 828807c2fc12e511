"""Loading a :class:`TaskContract` from a TOML file.

The file's keys are the contract's fields, except that the subject is named by
``root`` (a workspace) or ``file`` (single-file mode), and a ``pytest``
criterion may name its tests with ``test_file``. Relative paths resolve
against the TOML file's folder::

    goal = "make the test suite pass"
    root = "project"
    constraints = ["do not edit the tests"]

    [verify]
    kind = "command"
    argv = ["python", "-m", "pytest", "-q"]

    [budget]
    max_steps = 20

A workspace contract may add optional tools: ``tools = ["exec"]``. A
contract may name a folder of skills the agent may read: ``skills = "skills"``.

A ``[policy]`` table is not part of the contract: :meth:`Policy.from_toml`
reads it, and ``ioh run`` governs the run by it. Nor are ``[[mcp]]`` tables
(each an :class:`~io_harness.McpServer`; :func:`mcp_servers` reads them and
``ioh run`` starts them), nor a ``[sandbox]`` table
(the fields of :class:`~io_harness.sandbox.SandboxConfig`; its limits in
``[sandbox.limits]``): :func:`sandbox_config` reads it, and ``ioh run`` selects
the run's sandbox by it. Both are checked when the contract loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from io_harness._contract_words import contract_problems
from io_harness._mcp import McpServer, servers_from_tables
from io_harness._validation import loading, read_config_text, read_toml
from io_harness.errors import ConfigError
from io_harness.sandbox import SandboxConfig

if TYPE_CHECKING:
    from io_harness.contract import TaskContract

__all__ = ["load_contract", "mcp_servers", "sandbox_config", "sandbox_table"]

_KEYS = {
    "goal", "root", "file", "verify", "constraints", "budget", "tools", "skills", "policy",
    "sandbox", "mcp", "role",
}  # fmt: skip
_NOT_CONTRACT = ("root", "file", "policy", "sandbox", "mcp")
# The subject is rebuilt from root or file; the policy is Policy's; the sandbox is the run's.


def load_contract(cls: type[TaskContract], path: Path) -> TaskContract:
    """Read, check and build the contract in ``path``."""
    data = read_toml(path, "contract")
    folder = path.parent.absolute()
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: unknown key {unknown[0]!r}; the keys are: {', '.join(sorted(_KEYS))}"
        )
    has_root, has_file = "root" in data, "file" in data
    if has_root == has_file:
        raise ConfigError(f"{path}: give exactly one of 'root' (a workspace) or 'file'")
    if "sandbox" in data:
        sandbox_table(data["sandbox"], path)
    if "mcp" in data:
        servers_from_tables(data["mcp"], str(path), folder=folder)
    fields: dict[str, Any] = {k: v for k, v in data.items() if k not in _NOT_CONTRACT}
    for key in ("root", "file", "skills"):
        if key in data and not isinstance(data[key], str):
            raise ConfigError(f"{path}: {key}: expected a path string")
    if "skills" in data:
        fields["skills"] = folder / data["skills"]
    if has_file:
        file = folder / data["file"]
        fields.update(mode="file", root=file.parent, path=file)
    else:
        fields.update(mode="workspace", root=folder / data["root"])
    if "verify" not in data:
        raise ConfigError(f"{path}: verify: missing; the contract needs a criterion")
    fields["verify"] = _criterion(data["verify"], folder, path, "verify")
    try:
        with loading():
            contract = cls.model_validate(fields)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {contract_problems(exc)}") from None
    try:
        contract.verify.check_config(contract.mode)
    except ConfigError as exc:
        raise ConfigError(f"{path}: verify: {exc}") from None
    return contract


def _criterion(value: Any, folder: Path, path: Path, key: str) -> Any:
    # Reads ``test_file`` into ``test_src`` at any depth; the rest is pydantic's to check.
    if not isinstance(value, dict):
        return value
    value = dict(value)
    if "test_file" in value:
        test_file = folder / str(value.pop("test_file"))
        value["test_src"] = read_config_text(test_file, f"{path}: {key}.test_file")
    if isinstance(value.get("criteria"), list):
        value["criteria"] = [
            _criterion(part, folder, path, f"{key}.criteria.{i}")
            for i, part in enumerate(value["criteria"])
        ]
    return value


def mcp_servers(path: Path) -> tuple[McpServer, ...]:
    """The MCP servers of the ``[[mcp]]`` tables of a contract file (none: an empty tuple)."""
    data = read_toml(path, "contract")
    if "mcp" not in data:
        return ()
    return tuple(servers_from_tables(data["mcp"], str(path), folder=path.parent.absolute()))


def sandbox_config(path: Path) -> SandboxConfig | None:
    """The sandbox configuration in the ``[sandbox]`` table of a contract file, if it has one."""
    data = read_toml(path, "contract")
    return sandbox_table(data["sandbox"], path) if "sandbox" in data else None


def sandbox_table(value: Any, path: Path) -> SandboxConfig:
    """A parsed ``[sandbox]`` table as a :class:`SandboxConfig`; a mistake names its key."""
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: sandbox: expected a table")
    try:
        with loading():
            return SandboxConfig.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(
            f"sandbox.{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors(include_url=False)
        )
        raise ConfigError(f"{path}: {problems}") from None
