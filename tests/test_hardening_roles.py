"""Hardening of roles and compaction (issue 24, items 9 and 15).

A role declaring the harness's own tools gets their schemas when the workspace
commits none, and a role that could call nothing stops before the first model
call (``ioh roles check`` fails for it). A compaction pass that could leave
nothing out of the view is not made.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from io_harness import (
    Budget,
    Compaction,
    CompletionRequest,
    CompletionResponse,
    ConfigError,
    FileContains,
    Harness,
    RunOutcome,
    Store,
    TaskContract,
    WorkspaceFileContains,
)
from io_harness.cli import main
from io_harness.testing import ScriptedProvider, call, reply

ODD_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"],
    "x-committed": True,
}


def roles_file(folder: Path, text: str) -> Path:
    path = folder / "roles.toml"
    path.write_text(text)
    return path


def workspace(tmp_path: Path) -> Path:
    """A workspace with no descriptions/ folder: nothing committed for any tool."""
    root = tmp_path / "work"
    root.mkdir()
    (root / "notes.txt").write_text("a note\n")
    return root


def task(root: Path, role: str | None, tools: tuple[str, ...] = ()) -> TaskContract:
    return TaskContract.workspace(
        "write done.txt",
        root,
        WorkspaceFileContains("done.txt", "done"),
        budget=Budget(max_steps=3),
        tools=tools,
        role=role,
    )


def writes_done() -> ScriptedProvider:
    return ScriptedProvider(
        [reply("writing", [call("write_file", path="done.txt", content="done")])]
    )


# -- item 9: a role's built-ins, and a role that may call nothing ------------------------------


async def test_a_role_declaring_built_ins_in_a_workspace_with_no_descriptions_gets_their_schemas(
    tmp_path: Path,
) -> None:
    root = workspace(tmp_path)
    roles = roles_file(tmp_path, '[roles.rw]\ntools = ["read_file", "write_file"]\n')
    plain, under_role = writes_done(), writes_done()

    await Harness(plain).run(task(root, None))
    (root / "done.txt").unlink()
    result = await Harness(under_role, roles=roles).run(task(root, "rw"))

    assert result.outcome is RunOutcome.SUCCESS
    request = under_role.requests[0]
    assert [t.name for t in request.tools] == ["read_file", "write_file"]
    # The schemas and descriptions are the built-ins' own, as a run without a role is offered.
    own = {t.name: t for t in plain.requests[0].tools}
    assert list(request.tools) == [own["read_file"], own["write_file"]]
    assert "Your tools: read_file, write_file." in request.system


async def test_a_committed_schema_still_wins_over_a_built_ins_verbatim(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    (root / "descriptions" / "tools").mkdir(parents=True)
    (root / "descriptions" / "tools" / "write_file.json").write_text(json.dumps(ODD_SCHEMA))
    (root / "descriptions" / "skills").mkdir(parents=True)
    (root / "descriptions" / "skills" / "read_file.md").write_text(
        "---\ndescription: Read one committed file.\n---\n"
    )
    roles = roles_file(tmp_path, '[roles.rw]\ntools = ["write_file", "read_file"]\n')
    provider = writes_done()

    result = await Harness(provider, roles=roles).run(task(root, "rw"))

    assert result.outcome is RunOutcome.SUCCESS
    written, read = provider.requests[0].tools
    assert written.name == "write_file" and written.parameters == ODD_SCHEMA
    assert written.description == ""  # a committed schema with no description file
    assert read.name == "read_file" and read.description == "Read one committed file."
    assert read.parameters["properties"]["path"]["type"] == "string"  # the built-in's own


async def test_a_declared_built_in_the_run_does_not_have_is_not_offered(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    roles = roles_file(tmp_path, '[roles.runner]\ntools = ["exec", "write_file"]\n')
    provider = writes_done()

    result = await Harness(provider, roles=roles).run(task(root, "runner"))

    assert result.outcome is RunOutcome.SUCCESS
    # The contract's tools do not include exec, so nothing of this run answers it.
    assert [t.name for t in provider.requests[0].tools] == ["write_file"]


async def test_a_single_file_run_elects_its_own_two_file_tools(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("")
    roles = roles_file(tmp_path, '[roles.rw]\ntools = ["read_file", "write_file"]\n')
    contract = TaskContract.file(
        "write done", target, FileContains("done"), budget=Budget(max_steps=3), role="rw"
    )
    plain = ScriptedProvider([reply("w", [call("write_file", content="done\n")])])
    under_role = ScriptedProvider([reply("w", [call("write_file", content="done\n")])])

    await Harness(plain).run(contract.model_copy(update={"role": None}))
    target.write_text("")
    result = await Harness(under_role, roles=roles).run(contract)

    assert result.outcome is RunOutcome.SUCCESS
    assert under_role.requests[0].tools == plain.requests[0].tools


@pytest.mark.parametrize("declared", ["[]", '["ghost", "read_skill"]'])
async def test_a_role_that_may_call_nothing_is_a_config_error_before_the_first_call(
    tmp_path: Path, declared: str
) -> None:
    root = workspace(tmp_path)
    roles = roles_file(tmp_path, f"[roles.idle]\ntools = {declared}\n")
    provider = writes_done()
    store = Store.memory()

    with pytest.raises(ConfigError, match="the role 'idle' may call no tools") as raised:
        await Harness(provider, store=store, roles=roles).run(task(root, "idle"), run_id="r")

    assert provider.requests == []
    assert store.runs() == []  # nothing was stored either
    if declared != "[]":
        assert "(ghost, read_skill)" in str(raised.value)
        assert str(root / "descriptions" / "tools") in str(raised.value)


async def test_a_role_with_only_injected_tools_may_still_run(tmp_path: Path) -> None:
    from io_harness.tools import tool

    @tool
    def finish(note: str) -> str:
        """Write done.txt."""
        (root / "done.txt").write_text("done\n")
        return f"finished: {note}"

    root = workspace(tmp_path)
    roles = roles_file(tmp_path, "[roles.caller]\ntools = []\n")
    provider = ScriptedProvider([reply("ok", [call("finish", note="x")]), reply("finished")])

    result = await Harness(provider, roles=roles, tools=[finish]).run(task(root, "caller"))

    assert result.outcome is RunOutcome.SUCCESS
    assert [t.name for t in provider.requests[0].tools] == ["finish"]


def test_ioh_roles_check_lists_built_ins_and_exits_1_for_a_role_that_may_call_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    root = workspace(tmp_path)
    roles_file(
        root,
        '[roles.rw]\ntools = ["read_file", "write_file"]\n'
        '[roles.idle]\ntools = ["ghost"]\n'
        '[roles.runner]\ntools = ["exec"]\n',
    )

    assert main(["roles", "check", str(root)]) == 1

    out = capsys.readouterr().out
    lines = [line.rstrip() for line in out.splitlines()]
    rw, idle, runner = lines.index("rw"), lines.index("idle"), lines.index("runner")
    assert lines[rw + 3 : idle] == [
        "  tools (2):",
        "    read_file  elected  built-in schema  built-in description",
        "    write_file  elected  built-in schema  built-in description",
    ]
    assert lines[idle + 3 : idle + 5] == [
        "  tools: none",
        "  dropped (no schema in descriptions/tools/): ghost",
    ]
    assert lines[idle + 5].startswith("  the role 'idle' may call no tools: none of its declared")
    assert "refused before its first model call" in lines[idle + 5]
    assert lines[runner + 4] == (
        "    exec  elected  built-in schema  built-in description"
        "  (when the contract's tools include it)"
    )


def test_ioh_roles_check_exits_0_when_every_role_may_call_something(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = workspace(tmp_path)
    roles_file(root, '[roles.rw]\ntools = ["read_file", "write_file"]\n')

    assert main(["roles", "check", str(root)]) == 0
    assert "tools (2):" in capsys.readouterr().out


# -- item 15: no compaction pass that could leave nothing out -----------------------------------

LONG_GOAL = "write done.txt after reading notes.txt three times. " + "Context. " * 600


def is_compactor(request: CompletionRequest) -> bool:
    return request.system.startswith("You compact the conversation")


def listed(request: CompletionRequest) -> list[tuple[int, bool]]:
    """The messages a pass's request lists: each position and whether it is protected."""
    shown = re.findall(r"^#(\d+) \w+( \(protected\))?:", str(request.messages[0].text), re.M)
    return [(int(seq), bool(guarded)) for seq, guarded in shown]


def respond(request: CompletionRequest) -> CompletionResponse:
    """The compactor leaves out every unprotected message, saying how many reads went; the
    agent reads notes.txt three times (those a summary took away count), then writes."""
    if is_compactor(request):
        listing = str(request.messages[0].text)
        shown = re.findall(r"^#(\d+) (\w+)( \(protected\))?:", listing, re.M)
        ids = [int(seq) for seq, _, guarded in shown if not guarded]
        reads = sum(1 for _, role, guarded in shown if not guarded and role == "assistant")
        summary = call("write_summary", text=f"reads: {reads}")
        return reply(calls=[summary, call("mark_for_deletion", ids=ids)])
    summarised = re.findall(r"reads: (\d+)", str(request.messages[0].text))
    reads = sum(map(int, summarised)) + sum(m.role == "assistant" for m in request.messages)
    if reads < 3:
        return reply(f"reading {reads}", [call("read_file", path="notes.txt")])
    return reply("done", [call("write_file", path="done.txt", content="done\n")])


def long_task(root: Path) -> TaskContract:
    return TaskContract.workspace(
        LONG_GOAL, root, WorkspaceFileContains("done.txt", "done"), budget=Budget(max_steps=8)
    )


async def test_a_compaction_pass_that_could_leave_nothing_out_is_not_made(tmp_path: Path) -> None:
    # The task alone passes the share from the first step, and keep_recent covers every
    # other message of the run: no pass could ever leave a message out.
    root = workspace(tmp_path)
    provider = ScriptedProvider(respond, context_window=1000)
    store = Store.memory()
    harness = Harness(provider, store=store, compaction=Compaction(at_share=0.5, keep_recent=8))

    result = await harness.run(long_task(root), run_id="c")

    assert result.outcome is RunOutcome.SUCCESS
    assert result.steps == 4
    assert [r for r in provider.requests if is_compactor(r)] == []
    assert store.trace("c").compactions == ()


async def test_a_pass_is_made_once_it_could_leave_something_out(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    provider = ScriptedProvider(respond, context_window=1000)
    store = Store.memory()
    harness = Harness(provider, store=store, compaction=Compaction(at_share=0.5, keep_recent=2))

    result = await harness.run(long_task(root), run_id="c")

    assert result.outcome is RunOutcome.SUCCESS
    passes = [r for r in provider.requests if is_compactor(r)]
    assert passes
    # Every pass made had a message it could leave out, and left one out.
    assert all(any(not guarded for _, guarded in listed(p)) for p in passes)
    kinds = [c.kind for c in store.trace("c").compactions]
    assert kinds.count("summary") == len(passes) and "delete" in kinds
