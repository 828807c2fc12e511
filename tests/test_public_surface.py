"""The public surface is one list: ``io_harness._EXPORTS``, by the module that owns each name.

``__all__`` and the ``TYPE_CHECKING`` imports repeat it for type checkers; these
tests hold both to it, so a name added in one place and not the others fails.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import io_harness

INIT = Path(io_harness.__file__)


def _type_checking_imports() -> dict[str, set[str]]:
    """Each module the ``if TYPE_CHECKING:`` block imports from, with the names it takes."""
    tree = ast.parse(INIT.read_text())
    (block,) = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
    ]
    imported: dict[str, set[str]] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module is not None
        imported.setdefault(node.module, set()).update(alias.name for alias in node.names)
    return imported


def _exported() -> dict[str, set[str]]:
    return {module: set(names) for module, names in io_harness._EXPORTS.items()}


def test_all_is_exactly_the_exported_names() -> None:
    names = [name for names in io_harness._EXPORTS.values() for name in names]

    assert len(names) == len(set(names)), "a name is exported by two modules"
    assert set(io_harness.__all__) == {*names, "__version__"}
    assert len(io_harness.__all__) == len(set(io_harness.__all__))


def test_the_type_checking_imports_are_the_exported_names_from_their_owners() -> None:
    assert _type_checking_imports() == _exported()


def test_every_exported_name_loads_from_its_owner() -> None:
    for module, names in io_harness._EXPORTS.items():
        owner = importlib.import_module(module)
        for name in names:
            assert getattr(io_harness, name) is getattr(owner, name), name


def test_the_message_role_is_not_a_name_a_roles_file_user_would_take_for_a_role() -> None:
    assert "MessageRole" in io_harness.__all__
    assert "Role" not in io_harness.__all__
    assert not hasattr(io_harness, "Role")
