"""A sub-agent's private copy of the workspace, and bringing its changes back.

Every test works on real folders under ``tmp_path``: a parent workspace, a
copy taken with ``isolate``, edits made to either side with plain file
operations, then ``bring_back``.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from io_harness.trees._isolate import BroughtBack, Snapshot, bring_back, isolate, snapshot

HASH = hashlib.sha256(b"x").hexdigest()


def _one_file(rel: str) -> str:
    return json.dumps({"files": {rel: HASH}})


def _tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


@pytest.fixture
def parent(tmp_path: Path) -> Path:
    root = tmp_path / "parent"
    root.mkdir()
    return _tree(
        root,
        {
            "README.md": b"hello\n",
            "src/app.py": b"print('app')\n",
            "src/pkg/deep/util.py": b"def util(): ...\n",
            "notes.txt": b"notes\n",
        },
    )


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    return tmp_path / "copy"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_copy_and_its_snapshot_agree_with_the_parent(parent: Path, copy: Path) -> None:
    base = isolate(parent, copy)

    assert base == snapshot(parent) == snapshot(copy)
    assert set(base.files) == {"README.md", "src/app.py", "src/pkg/deep/util.py", "notes.txt"}
    assert base.files["README.md"] == hashlib.sha256(b"hello\n").hexdigest()


def test_files_in_nested_folders_are_copied_byte_for_byte(parent: Path, copy: Path) -> None:
    big = os.urandom(3 * 1024 * 1024 + 17)  # several read chunks
    (parent / "src/pkg/deep/blob.bin").write_bytes(big)

    base = isolate(parent, copy)

    assert (copy / "src/pkg/deep/util.py").read_bytes() == b"def util(): ...\n"
    assert (copy / "src/pkg/deep/blob.bin").read_bytes() == big
    assert base.files["src/pkg/deep/blob.bin"] == hashlib.sha256(big).hexdigest()


def test_file_modes_are_kept_in_the_copy(parent: Path, copy: Path) -> None:
    (parent / "run.sh").write_bytes(b"#!/bin/sh\n")
    (parent / "run.sh").chmod(0o755)
    (parent / "notes.txt").chmod(0o600)
    (parent / "README.md").chmod(0o444)

    isolate(parent, copy)

    assert _mode(copy / "run.sh") == 0o755
    assert _mode(copy / "notes.txt") == 0o600
    assert _mode(copy / "README.md") == 0o444


def test_symlinks_are_neither_followed_nor_copied(parent: Path, copy: Path, tmp_path: Path) -> None:
    outside = _tree(tmp_path / "outside", {"secret.txt": b"secret\n"})
    (parent / "link.txt").symlink_to(parent / "README.md")
    (parent / "outside").symlink_to(outside, target_is_directory=True)
    (parent / "dangling").symlink_to(parent / "missing")

    base = isolate(parent, copy)

    assert not {"link.txt", "outside/secret.txt", "dangling"} & set(base.files)
    assert not {"link.txt", "outside/secret.txt", "dangling"} & set(snapshot(parent).files)
    assert not (copy / "link.txt").exists()
    assert not (copy / "outside").exists()
    assert not (copy / "dangling").is_symlink()


def test_a_copy_is_refused_inside_the_workspace_or_over_an_existing_folder(
    parent: Path, copy: Path
) -> None:
    with pytest.raises(ValueError, match="inside the workspace"):
        isolate(parent, parent / "copy")
    copy.mkdir()
    with pytest.raises(FileExistsError):
        isolate(parent, copy)
    with pytest.raises(FileNotFoundError):
        isolate(parent, copy.parent / "missing" / "copy")


def test_the_childs_modifications_additions_and_deletions_all_come_back(
    parent: Path, copy: Path
) -> None:
    base = isolate(parent, copy)
    (copy / "src/app.py").write_bytes(b"print('changed')\n")
    _tree(copy, {"src/new/module.py": b"NEW = 1\n"})
    (copy / "src/new/module.py").chmod(0o750)
    (copy / "notes.txt").unlink()

    result = bring_back(base, copy, parent)

    assert result.brought == ("notes.txt", "src/app.py", "src/new/module.py")
    assert result.conflicts == ()
    assert (parent / "src/app.py").read_bytes() == b"print('changed')\n"
    assert (parent / "src/new/module.py").read_bytes() == b"NEW = 1\n"
    assert _mode(parent / "src/new/module.py") == 0o750
    assert not (parent / "notes.txt").exists()
    assert (parent / "README.md").read_bytes() == b"hello\n"
    assert snapshot(parent) == snapshot(copy)
    assert not [p for p in parent.rglob("*") if p.name.endswith(".ioh-tmp")]


def test_a_file_the_parent_also_changed_is_a_conflict_and_the_parents_bytes_stay(
    parent: Path, copy: Path
) -> None:
    base = isolate(parent, copy)
    (copy / "src/app.py").write_bytes(b"child's version\n")
    (parent / "src/app.py").write_bytes(b"parent's version\n")

    result = bring_back(base, copy, parent)

    assert result.conflicts == ("src/app.py",)
    assert result.brought == ()
    assert (parent / "src/app.py").read_bytes() == b"parent's version\n"
    assert (copy / "src/app.py").read_bytes() == b"child's version\n"


def test_a_file_the_parent_deleted_while_the_child_changed_it_is_a_conflict(
    parent: Path, copy: Path
) -> None:
    base = isolate(parent, copy)
    (copy / "notes.txt").write_bytes(b"child's notes\n")
    (parent / "notes.txt").unlink()
    _tree(copy, {"added.txt": b"child\n"})
    _tree(parent, {"added.txt": b"parent\n"})

    result = bring_back(base, copy, parent)

    assert result.conflicts == ("added.txt", "notes.txt")
    assert not (parent / "notes.txt").exists()
    assert (parent / "added.txt").read_bytes() == b"parent\n"


def test_changes_to_different_files_on_each_side_both_survive(parent: Path, copy: Path) -> None:
    base = isolate(parent, copy)
    (copy / "src/app.py").write_bytes(b"child edit\n")
    (parent / "README.md").write_bytes(b"parent edit\n")

    result = bring_back(base, copy, parent)

    assert result == BroughtBack(("src/app.py",), (), copy)
    assert (parent / "src/app.py").read_bytes() == b"child edit\n"
    assert (parent / "README.md").read_bytes() == b"parent edit\n"


def test_an_identical_change_on_both_sides_is_neither_brought_nor_a_conflict(
    parent: Path, copy: Path
) -> None:
    base = isolate(parent, copy)
    for side in (parent, copy):
        (side / "src/app.py").write_bytes(b"same edit\n")
        (side / "notes.txt").unlink()
    (parent / "src/app.py").chmod(0o640)

    result = bring_back(base, copy, parent)

    assert result.brought == ()
    assert result.conflicts == ()
    assert _mode(parent / "src/app.py") == 0o640  # untouched, not rewritten
    assert result.describe().startswith("No files changed")


def test_a_file_the_child_turned_into_a_symlink_is_not_deleted_from_the_parent(
    parent: Path, copy: Path
) -> None:
    base = isolate(parent, copy)
    (copy / "notes.txt").unlink()
    (copy / "notes.txt").symlink_to("/etc/passwd")

    result = bring_back(base, copy, parent)

    assert result.brought == ()
    assert (parent / "notes.txt").read_bytes() == b"notes\n"
    assert not (parent / "notes.txt").is_symlink()


def test_nothing_is_written_through_a_symlinked_folder_in_the_parent(
    parent: Path, copy: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    base = isolate(parent, copy)
    _tree(copy, {"gen/out.txt": b"child\n"})
    (parent / "gen").symlink_to(outside, target_is_directory=True)

    result = bring_back(base, copy, parent)

    assert result.conflicts == ("gen/out.txt",)
    assert list(outside.iterdir()) == []


def test_a_file_the_child_replaced_with_a_folder_comes_back(parent: Path, copy: Path) -> None:
    base = isolate(parent, copy)
    (copy / "notes.txt").unlink()
    _tree(copy, {"notes.txt/today.md": b"today\n"})

    result = bring_back(base, copy, parent)

    assert result.brought == ("notes.txt", "notes.txt/today.md")
    assert (parent / "notes.txt/today.md").read_bytes() == b"today\n"


def test_a_snapshot_survives_a_json_round_trip(parent: Path) -> None:
    (parent / "caf\u00e9 n\u00b0 1.txt").write_bytes(b"unicode name\n")
    base = snapshot(parent)

    again = Snapshot.from_json(base.to_json())

    assert again == base
    assert dict(again.files) == dict(base.files)


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        (_one_file("../x"), "inside the root"),
        (_one_file("a/../../x"), "inside the root"),
        (_one_file("/abs"), "inside the root"),
        (_one_file("./a"), "normal form"),
        ('{"files": {"a": "not a hash"}}', "sha256"),
        ('{"files": {"a": 1}}', "hash strings"),
        ('["a", "b"]', "JSON object"),
        ('"files"', "JSON object"),
        ('{"files": []}', "JSON object"),
        ("{not json", "not valid JSON"),
    ],
)
def test_from_json_refuses_paths_outside_the_root_and_the_wrong_shape(
    text: str, complaint: str
) -> None:
    with pytest.raises(ValueError, match=complaint):
        Snapshot.from_json(text)


def test_a_snapshot_cannot_be_built_with_a_path_that_leaves_the_root() -> None:
    with pytest.raises(ValueError, match="inside the root"):
        Snapshot({"../escape": HASH})


def test_the_description_names_the_conflict_and_where_the_childs_version_is(
    parent: Path, copy: Path
) -> None:
    base = isolate(parent, copy)
    (copy / "src/app.py").write_bytes(b"child\n")
    (parent / "src/app.py").write_bytes(b"parent\n")
    (copy / "README.md").write_bytes(b"child readme\n")

    text = bring_back(base, copy, parent).describe()

    assert "README.md" in text
    assert "src/app.py" in text
    assert str(copy / "src/app.py") in text
    assert "parent's copy was kept" in text


def test_a_long_list_of_brought_files_is_cut_short(copy: Path) -> None:
    many = tuple(f"f{n:03}.txt" for n in range(50))

    text = BroughtBack(many, (), copy).describe()

    assert "Brought back 50 files" in text
    assert "f019.txt" in text
    assert "f020.txt" not in text
    assert "and 30 more" in text


def test_the_copy_keeps_every_folders_mode_too(parent: Path, copy: Path) -> None:
    (parent / "private").mkdir(mode=0o700)
    (parent / "private" / "config.py").write_text("KEY = 1\n")
    (parent / "private" / "config.py").chmod(0o644)
    parent.chmod(0o750)

    isolate(parent, copy)

    assert _mode(copy) == 0o750
    assert _mode(copy / "private") == 0o700
    assert _mode(copy / "private" / "config.py") == 0o644
    assert _mode(copy / "src") == _mode(parent / "src")


@pytest.mark.skipif(os.geteuid() != 0, reason="reading as another user needs root to switch")
async def test_an_isolated_childs_copy_is_private_to_the_harness(
    tmp_path: Path, project: Path
) -> None:
    from io_harness import Containment, Harness, Store, TaskContract, WorkspaceFileContains, tool
    from io_harness.testing import ScriptedProvider, call, reply

    (project / "private").mkdir(mode=0o700)
    (project / "private" / "config.py").write_text("KEY = 'hunter2'\n")
    (project / "private" / "config.py").chmod(0o644)
    seen: list[str] = []
    holders: list[Path] = []

    @tool
    def peek() -> str:
        """Try, as nobody, to reach every file of the child's copy."""
        copies = [p for p in Path(tempfile.gettempdir()).glob("ioh-isolated-*") if p.is_dir()]
        holder = max(copies, key=lambda p: p.stat().st_mtime)
        holders.append(holder)
        seen.append(oct(stat.S_IMODE(holder.stat().st_mode)))
        for path in [holder, *holder.rglob("*")]:
            done = subprocess.run(
                ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat", str(path)],
                capture_output=True,
                check=False,
                timeout=30,
            )
            if b"hunter2" in done.stdout:
                seen.append(f"read {path}")
        return "peeked"

    spawn = call(
        "spawn_agent",
        goal="child",
        verify={"kind": "workspace_file_contains", "file": "child.txt", "needle": "child"},
        isolate=True,
    )
    provider = ScriptedProvider(
        [
            reply(calls=[spawn]),
            reply(calls=[call("peek"), call("write_file", path="child.txt", content="child\n")]),
            reply("child done"),
            reply(calls=[call("write_file", path="done.txt", content="done")]),
            reply("done"),
        ]
    )
    harness = Harness(
        provider, store=Store.memory(), containment=Containment(max_depth=1), tools=[peek]
    )

    await harness.run(TaskContract.workspace("g", project, WorkspaceFileContains("done.txt", "")))

    assert seen == ["0o700"]
    assert len(holders) == 1 and not holders[0].exists()  # removed with its copy
