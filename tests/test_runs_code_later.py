"""Nothing an agent does changes what git, a shell or an editor will later execute.

Attacked as a malicious model would: writes into the ``.git`` folder in every
spelling a case-folding filesystem treats alike, a ``.git`` file pointing at a
folder the agent made, a command that moves ``.git`` away and builds another,
and an isolated sub-agent whose copy grew a hook that bring-back would carry
into the parent's workspace.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from io_harness import (
    Containment,
    Harness,
    Policy,
    RunOutcome,
    SandboxConfig,
    Store,
    TaskContract,
    WorkspaceFileContains,
    tool,
)
from io_harness.testing import ScriptedProvider, call, reply

APP = Policy.permissive().layer("app").allow_write("*").allow_exec("*")


@pytest.mark.parametrize(
    "path",
    [
        ".git/commondir",
        ".git/config.worktree",
        ".git/hooks/pre-commit",
        ".git/info/attributes",
        ".git/modules/lib/config",
        ".git/modules/lib/hooks/post-checkout",
        ".git/worktrees/w/commondir",
        ".git",
        "vendor/lib/.git",
        "vendor/lib/.git/config",
        ".GIT/config",
        ".Git/hooks/pre-push",
        ".git./config",
        ".git /config",
        "GIT~1/config",
        ".g\u200cit/config",
        "a/.BashRC",
        "deep/down/.envrc",
        ".VSCODE/tasks.json",
    ],
)
def test_a_write_into_what_runs_code_later_is_denied_in_every_spelling(path: str) -> None:
    verdict = APP.explain("write", path)

    assert verdict.effect.value == "deny"
    assert verdict.layer == "mandatory"


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(
    before=st.lists(st.sampled_from(["src", "vendor", "a b", "x.git", "gitx"]), max_size=3),
    spelling=st.sampled_from([".git", ".GIT", ".gIt", ".git.", ".git..", ".git ", "git~1"]),
    after=st.lists(
        st.sampled_from(["config", "hooks", "pre-commit", "commondir", "x"]), max_size=3
    ),
)
def test_any_path_through_a_git_folder_is_denied_to_a_wildcard_allow(
    before: list[str], spelling: str, after: list[str]
) -> None:
    path = "/".join([*before, spelling, *after])

    assert APP.explain("write", path).layer == "mandatory"


def test_only_a_rule_naming_the_entry_lets_a_write_in() -> None:
    named = Policy.permissive().layer("app").allow_write(".git/hooks/pre-commit")
    near = Policy.permissive().layer("app").allow_write("*.git*", ".gitignore")

    assert named.explain("write", ".git/hooks/pre-commit").effect.value == "allow"
    assert near.explain("write", ".git/config").layer == "mandatory"
    assert near.explain("write", ".gitignore").effect.value == "allow"
    assert APP.explain("write", "x.git/config").effect.value == "allow"


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=False, timeout=60
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    assert _git(root, "init", "-q").returncode == 0
    (root / "app.py").write_text("x = 1\n")
    return root


def _git_state(root: Path) -> dict[str, bytes]:
    git = root / ".git"
    return {
        p.relative_to(git).as_posix(): p.read_bytes()
        for p in sorted(git.rglob("*"))
        if p.is_file() and "objects" not in p.parts
    }


async def _run(repo: Path, calls: list[Any], **options: Any) -> tuple[Store, str]:
    store = Store.memory()
    provider = ScriptedProvider([reply(calls=calls), reply("done")])
    contract = TaskContract.workspace(
        "g", repo, WorkspaceFileContains("done.txt", "done"), tools=["exec"]
    )
    result = await Harness(provider, store=store, policy=APP, **options).run(contract)
    assert result.outcome is RunOutcome.SUCCESS, result
    return store, result.run_id


async def test_a_git_file_pointing_at_a_folder_the_agent_made_is_never_written(
    repo: Path,
) -> None:
    before = _git_state(repo)
    calls = [
        call("write_file", path="evil/config", content="[core]\n\tfsmonitor = touch pwned\n"),
        call("write_file", path=".git/commondir", content="../evil\n"),
        call("write_file", path=".git", content="gitdir: evil\n"),
        call("write_file", path="done.txt", content="done"),
    ]

    store, run_id = await _run(repo, calls, sandbox=SandboxConfig(backends=("bubblewrap",)))

    results = [c.result for c in store.trace(run_id).tool_calls]
    assert all("layer 'mandatory'" in r for r in results[1:3]), results
    assert _git_state(repo) == before
    assert _git(repo, "status", "--short").returncode == 0
    assert not (repo / "pwned").exists()


@pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap is Linux's")
async def test_a_command_can_neither_move_the_git_folder_away_nor_write_into_it(
    repo: Path,
) -> None:
    before = _git_state(repo)
    script = (
        "mv .git .git-away; mkdir -p .git/hooks; "
        "printf '#!/bin/sh\\ntouch pwned\\n' > .git/hooks/pre-commit; "
        "echo '[core] fsmonitor = touch pwned' >> .git/config; "
        "rm -rf .git/hooks; ln -s /tmp .git/objects/x; true"
    )
    calls = [
        call("exec", argv=["sh", "-c", script]),
        call("write_file", path="done.txt", content="done"),
    ]

    await _run(repo, calls, sandbox=SandboxConfig(backends=("bubblewrap",)))

    assert _git_state(repo) == before
    assert not (repo / ".git-away").exists()
    assert not (repo / ".git" / "objects" / "x").exists()
    (repo / "app.py").write_text("x = 2\n")
    assert _git(repo, "add", "app.py").returncode == 0
    committed = _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "m")
    assert committed.returncode == 0, committed.stderr
    assert not (repo / "pwned").exists()


async def test_bring_back_never_carries_a_git_folder_an_isolated_child_got_into_the_parent(
    tmp_path: Path,
) -> None:
    plain = tmp_path / "plain"  # no repository yet: a brought-back .git would make one
    plain.mkdir()
    started = time.time()

    @tool
    def plant() -> str:
        """Stand in for a racing process that wrote a repository into the child's copy."""
        (copy,) = [
            p / "workspace"
            for p in Path(tempfile.gettempdir()).glob("ioh-isolated-*")
            if p.stat().st_mtime >= started - 1
        ]
        assert _git(copy, "init", "-q").returncode == 0
        (copy / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\ntouch pwned\n")
        return "planted"

    spawn = call(
        "spawn_agent",
        goal="child",
        verify={"kind": "workspace_file_contains", "file": "child.txt", "needle": "child"},
        isolate=True,
    )
    child = [call("plant"), call("write_file", path="child.txt", content="from the child\n")]
    provider = ScriptedProvider(
        [
            reply(calls=[spawn]),
            reply(calls=child),
            reply("child done"),
            reply(calls=[call("write_file", path="done.txt", content="done")]),
            reply("done"),
        ]
    )
    store = Store.memory()
    contract = TaskContract.workspace("g", plain, WorkspaceFileContains("done.txt", "done"))
    harness = Harness(
        provider, store=store, policy=APP, containment=Containment(max_depth=1), tools=[plant]
    )

    result = await harness.run(contract)

    assert result.outcome is RunOutcome.SUCCESS
    assert sorted(p.name for p in plain.iterdir()) == ["child.txt", "done.txt"]
    report = next(
        c.result for c in store.trace(result.run_id).tool_calls if c.name == "spawn_agent"
    )
    assert "Not brought back" in report and ".git/hooks/pre-commit" in report
    refused = {p.layer for p in store.trace(result.run_id).permissions if p.decision == "refused"}
    assert refused == {"mandatory"}
