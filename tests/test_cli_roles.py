"""``ioh roles check``: each role's provider, prompt and composed toolset, from real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from io_harness.cli import main

ROLES = """
[roles.coder]
provider = "anthropic:claude-sonnet-4-5"
system_prompt = "prompts/coder.md"
tools = ["read_file", "edit_file", "run_tests"]
context_window = 200000

[roles.reviewer]
tools = ["read_file"]
"""


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    # Keep each tool's line whole, whatever the terminal running the tests.
    monkeypatch.setenv("COLUMNS", "250")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace committing schemas for read_file and edit_file, a description for read_file."""
    root = tmp_path / "ws"
    (root / "prompts").mkdir(parents=True)
    (root / "prompts" / "coder.md").write_text("You write code.\n")
    (root / "roles.toml").write_text(ROLES)
    tools = root / "descriptions" / "tools"
    tools.mkdir(parents=True)
    (tools / "read_file.json").write_text(json.dumps({"type": "object"}))
    (tools / "edit_file.json").write_text(json.dumps({"type": "object"}))
    skills = root / "descriptions" / "skills"
    skills.mkdir(parents=True)
    (skills / "read_file.md").write_text("---\ndescription: Read a file.\n---\n")
    return root


def test_check_prints_each_roles_toolset_with_sources_and_files(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["roles", "check", str(workspace)]) == 0
    out = capsys.readouterr().out
    lines = [line.rstrip() for line in out.splitlines()]
    coder = lines.index("coder")
    reviewer = lines.index("reviewer")
    assert coder < reviewer
    assert lines[coder + 1 : reviewer] == [
        "  provider: anthropic:claude-sonnet-4-5",
        "  system prompt: prompts/coder.md",
        "  context window: 200000 tokens",
        "  tools (2):",
        "    read_file  elected  descriptions/tools/read_file.json  "
        "descriptions/skills/read_file.md",
        "    edit_file  elected  descriptions/tools/edit_file.json  no description",
        "  dropped (no schema in descriptions/tools/): run_tests",
    ]
    assert lines[reviewer + 1 : reviewer + 5] == [
        "  provider: the harness's",
        "  system prompt: none (the harness's)",
        "  tools (1):",
        "    read_file  elected  descriptions/tools/read_file.json  "
        "descriptions/skills/read_file.md",
    ]
    assert out.count("refused in-band") == 1
    assert "answer elected names" in out


def test_check_defaults_to_the_current_folder_and_takes_another_roles_file(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(workspace)
    assert main(["roles", "check"]) == 0
    assert "roles file roles.toml: 2 roles" in capsys.readouterr().out
    other = workspace.parent / "solo.toml"
    other.write_text('[roles.solo]\ntools = ["edit_file", "grep"]\n')
    assert main(["roles", "check", "--roles", str(other)]) == 0
    out = capsys.readouterr().out
    assert "solo" in out
    assert "edit_file  elected  descriptions/tools/edit_file.json  no description" in out
    assert "grep  elected  built-in schema  built-in description" in out


def test_a_bad_schema_exits_2_naming_the_file(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = workspace / "descriptions" / "tools" / "edit_file.json"
    bad.write_text("{not json")
    assert main(["roles", "check", str(workspace)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing half-printed before the error
    error = " ".join(captured.err.split())
    assert error.startswith("error: tool 'edit_file': schema file")
    assert str(bad) in error
    assert len(captured.err.strip().splitlines()) == 1


def test_a_mistake_in_the_roles_file_exits_2_naming_file_and_key(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workspace / "roles.toml").write_text('[roles.coder]\ntools = ["a", "a"]\n')
    assert main(["roles", "check", str(workspace)]) == 2
    error = capsys.readouterr().err
    assert "roles.toml: roles.coder.tools: 'a' is declared twice" in error
