"""A run under a role, end to end: its composed toolset per call, and the calls it may make."""

from __future__ import annotations

import json
import shutil
from functools import partial
from pathlib import Path

import pytest

import support
from io_harness import (
    ConfigError,
    Harness,
    Policy,
    Roles,
    RunOutcome,
    Store,
)
from io_harness.testing import ScriptedProvider, call, reply
from io_harness.tools import tool

WRITE_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "committed: where"},
        "content": {"type": "string"},
    },
    "required": ["path", "content"],
}


@tool
def stamp(label: str) -> str:
    """Stamp a label."""
    return f"stamped {label}"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    (root / "descriptions" / "tools").mkdir(parents=True)
    (root / "descriptions" / "skills").mkdir(parents=True)
    (root / "descriptions" / "tools" / "write_file.json").write_text(json.dumps(WRITE_SCHEMA))
    (root / "descriptions" / "tools" / "read_file.json").write_text('{"type": "object"}')
    (root / "descriptions" / "skills" / "write_file.md").write_text(
        "---\ndescription: Write a whole file (committed).\n---\nbody\n"
    )
    (tmp_path / "writer.md").write_text("You are the writer.\n")
    (tmp_path / "roles.toml").write_text(
        '[roles.writer]\nsystem_prompt = "writer.md"\n'
        'tools = ["write_file", "read_file", "undescribed"]\n'
    )
    return root


contract = partial(support.contract, role="writer")
"""The task of the runs here, under the writer role: done when done.txt holds ``done``."""


async def test_a_roles_calls_are_composed_from_its_files_and_limited_to_its_set(
    work: Path,
) -> None:
    provider = ScriptedProvider(
        [
            reply("trying", [call("invented", x=1), call("stamp", label="a")]),
            reply(
                "again",
                [call("invented", x=2), call("write_file", path="done.txt", content="done")],
            ),
        ]
    )
    store = Store.memory()
    harness = Harness(provider, store=store, roles=work.parent / "roles.toml", tools=[stamp])

    result = await harness.run(contract(work), run_id="r")

    assert result.outcome is RunOutcome.SUCCESS
    first, second = provider.requests
    assert [t.name for t in first.tools] == ["stamp", "write_file", "read_file"]
    written = first.tools[1]
    assert written.parameters == WRITE_SCHEMA  # verbatim
    assert written.description == "Write a whole file (committed)."
    assert first.tools[2].description == ""
    assert first.system.startswith("You are the writer.\n\nYou are an agent run by io-harness")
    # The history names "invented": it is offered as a stand-in, but never permitted.
    assert [t.name for t in second.tools] == ["stamp", "write_file", "read_file", "invented"]
    assert second.tools[3].parameters == {"type": "object"}
    calls = store.trace("r").tool_calls
    refused = [c.result for c in calls if c.name == "invented"]
    assert (
        refused
        == [
            "invented: the role 'writer' may call only: stamp, write_file, read_file; "
            "'invented' is not one of them"
        ]
        * 2
    )
    assert [c.result for c in calls if c.name == "stamp"] == ["stamped a"]


async def test_a_permitted_call_still_passes_the_policy(work: Path) -> None:
    provider = ScriptedProvider(
        [
            reply(calls=[call("write_file", path="secret.txt", content="x")]),
            reply(calls=[call("write_file", path="done.txt", content="done")]),
        ]
    )
    policy = Policy.default().layer("t").deny_write("secret.txt")
    store = Store.memory()
    harness = Harness(provider, store=store, policy=policy, roles=work.parent / "roles.toml")

    result = await harness.run(contract(work), run_id="p")

    assert result.outcome is RunOutcome.SUCCESS
    assert "refused by the policy" in store.trace("p").tool_calls[0].result
    assert not (work / "secret.txt").exists()


async def test_a_role_needs_a_roles_file_and_a_known_name(work: Path) -> None:
    provider = ScriptedProvider([])
    with pytest.raises(ConfigError, match="has no roles file"):
        await Harness(provider).run(contract(work))
    with pytest.raises(ConfigError, match="no role is named 'critic'"):
        await Harness(provider, roles=work.parent / "roles.toml").run(contract(work, role="critic"))


async def test_a_bad_committed_schema_is_a_config_error_naming_the_file(work: Path) -> None:
    (work / "descriptions" / "tools" / "read_file.json").write_text("{not json")
    harness = Harness(ScriptedProvider([]), roles=work.parent / "roles.toml")

    with pytest.raises(ConfigError, match=r"read_file\.json"):
        await harness.run(contract(work))


def test_ioh_run_reads_the_roles_file_beside_a_contract_and_keeps_it_for_resume(
    work: Path, tmp_path: Path
) -> None:
    from io_harness.cli import main
    from io_harness.providers import Record

    cassette = tmp_path / "model.jsonl"
    answers = ScriptedProvider(
        [
            reply("stamping", [call("invented")]),
            reply(calls=[call("write_file", path="done.txt", content="done")]),
        ]
    )
    recording = tmp_path / "recording"
    shutil.copytree(work / "descriptions", recording / "work" / "descriptions")
    recorded = Harness(Record(answers, cassette), roles=tmp_path / "roles.toml").run_sync(
        contract(recording / "work")
    )
    assert recorded.outcome is RunOutcome.SUCCESS
    toml = tmp_path / "contract.toml"
    toml.write_text(
        'goal = "write done.txt"\nroot = "work"\nrole = "writer"\n'
        '[verify]\nkind = "workspace_file_contains"\nfile = "done.txt"\nneedle = "done"\n'
    )
    store = ["--store", str(tmp_path / "runs.db")]

    assert main(["run", str(toml), *store, "--provider", f"replay:{cassette}"]) == 0
    assert (work / "done.txt").read_text() == "done"
    with Store.open(tmp_path / "runs.db") as opened:
        run = opened.runs()[0]
        refused = opened.trace(run.id).tool_calls[0].result
    assert "the role 'writer' may call only: write_file, read_file" in refused
    assert run.labels["ioh.roles"] == str((tmp_path / "roles.toml").absolute())


@pytest.mark.parametrize("link", ["schema", "description", "folder"])
async def test_a_committed_file_symlinked_to_a_credential_never_reaches_the_model(
    work: Path, tmp_path: Path, link: str
) -> None:
    secret = tmp_path / "credentials"
    secret.mkdir()
    (secret / "aws.json").write_text('{"type": "object", "aws_secret": "hunter2"}')
    (secret / "aws.md").write_text("---\ndescription: hunter2\n---\n")
    tools = work / "descriptions" / "tools"
    if link == "schema":
        (tools / "write_file.json").unlink()
        (tools / "write_file.json").symlink_to(secret / "aws.json")
    elif link == "description":
        (work / "descriptions" / "skills" / "write_file.md").unlink()
        (work / "descriptions" / "skills" / "write_file.md").symlink_to(secret / "aws.md")
    else:
        shutil.rmtree(tools)
        tools.symlink_to(secret, target_is_directory=True)
    provider = ScriptedProvider([reply("x")])
    harness = Harness(provider, store=Store.memory(), roles=work.parent / "roles.toml")

    with pytest.raises(ConfigError, match="symlink") as raised:
        await harness.run(contract(work))

    assert "hunter2" not in str(raised.value)
    assert provider.requests == []


async def test_a_committed_file_the_policy_does_not_let_be_read_stops_the_run_before_the_model(
    work: Path,
) -> None:
    provider = ScriptedProvider([reply("x")])
    policy = Policy.permissive().layer("app").deny_read("descriptions/tools/write_file.json")
    harness = Harness(
        provider, store=Store.memory(), policy=policy, roles=work.parent / "roles.toml"
    )

    with pytest.raises(ConfigError, match="the run's policy does not let it be read"):
        await harness.run(contract(work))

    assert provider.requests == []


@pytest.mark.parametrize("prompt", ["/etc/passwd", "../secret.md", "linked.md"])
def test_a_roles_prompt_file_is_read_only_inside_the_roles_files_folder(
    tmp_path: Path, prompt: str
) -> None:
    (tmp_path / "secret.md").write_text("hunter2\n")
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "linked.md").symlink_to(tmp_path / "secret.md")
    (folder / "roles.toml").write_text(f'[roles.coder]\nsystem_prompt = "{prompt}"\n')

    with pytest.raises(ConfigError, match=r"roles\.coder\.system_prompt") as raised:
        Roles.from_toml(folder / "roles.toml")

    assert "hunter2" not in str(raised.value)
