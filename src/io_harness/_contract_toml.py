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

A ``[policy]`` table is not part of the contract: :meth:`Policy.from_toml`
reads it, and ``ioh run`` governs the run by it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from io_harness._validation import describe_validation, loading, read_config_text, read_toml
from io_harness.errors import ConfigError

if TYPE_CHECKING:
    from io_harness.contract import TaskContract

__all__ = ["load_contract"]

_KEYS = {"goal", "root", "file", "verify", "constraints", "budget", "policy"}
_NOT_CONTRACT = ("root", "file", "policy")  # the subject is rebuilt; the policy is Policy's


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
    fields: dict[str, Any] = {k: v for k, v in data.items() if k not in _NOT_CONTRACT}
    for key in ("root", "file"):
        if key in data and not isinstance(data[key], str):
            raise ConfigError(f"{path}: {key}: expected a path string")
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
        raise ConfigError(f"{path}: {describe_validation(exc)}") from None
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
