"""Skills and memory end to end, through the Harness and a contract, with the scripted model."""

from __future__ import annotations

from pathlib import Path

import pytest

from io_harness import (
    ConfigError,
    Decision,
    Harness,
    Policy,
    ResumeError,
    RunOutcome,
    Store,
    TaskContract,
)
from io_harness.testing import ScriptedProvider, call, reply
from support import contract, observations

DONE = call("write_file", path="done.txt", content="done\n")


@pytest.fixture
def skills(tmp_path: Path) -> Path:
    folder = tmp_path / "skills"
    (folder / "release-notes" / "references").mkdir(parents=True)
    (folder / "release-notes" / "SKILL.md").write_text(
        "---\nname: release-notes\ndescription: How we write release notes.\n---\n"
        "Write one line per change, newest first.\n"
    )
    (folder / "release-notes" / "references" / "style.md").write_text("Use the past tense.\n")
    (folder / "triage.md").write_text("# Triage\n\nLabel each issue by area.\n\nSteps...\n")
    return folder


# -- skills ---------------------------------------------------------------------------


async def test_a_contracts_skills_are_a_catalogue_in_the_prompt_and_read_on_demand(
    tmp_path: Path, skills: Path
) -> None:
    (tmp_path / "work").mkdir()
    provider = ScriptedProvider(
        [
            reply(calls=[call("read_skill", name="release-notes")]),
            reply(calls=[call("read_skill", name="release-notes", file="references/style.md")]),
            reply(calls=[DONE]),
        ]
    )

    result = await Harness(provider).run(contract(tmp_path / "work", skills=skills))

    assert result.outcome is RunOutcome.SUCCESS
    system = provider.requests[0].system
    assert "- release-notes: How we write release notes." in system
    assert "- triage: Label each issue by area." in system
    assert "newest first" not in system  # bodies are never in the prompt
    assert "read_skill" in [spec.name for spec in provider.requests[0].tools]
    assert "Write one line per change, newest first." in observations(provider, 1)[0]
    assert "Use the past tense." in observations(provider, 2)[0]


async def test_a_harness_skills_folder_serves_every_run_and_toml_names_one_too(
    tmp_path: Path, skills: Path
) -> None:
    (tmp_path / "work").mkdir()
    toml = tmp_path / "contract.toml"
    toml.write_text(
        'goal = "write done.txt"\nroot = "work"\nskills = "skills"\n'
        '[verify]\nkind = "workspace_file_contains"\nfile = "done.txt"\nneedle = "done"\n'
    )
    assert TaskContract.from_toml(toml).skills == skills

    provider = ScriptedProvider([reply(calls=[DONE])])
    await Harness(provider, skills=skills).run(contract(tmp_path / "work"))

    assert "- triage:" in provider.requests[0].system


async def test_without_skills_read_skill_is_never_offered(tmp_path: Path) -> None:
    provider = ScriptedProvider([reply(calls=[DONE])])

    await Harness(provider).run(contract(tmp_path))

    assert "read_skill" not in [spec.name for spec in provider.requests[0].tools]
    assert "read_skill" not in provider.requests[0].system


async def test_read_skill_is_refused_by_a_deny_read_on_the_skills_folder(
    tmp_path: Path, skills: Path
) -> None:
    (tmp_path / "work").mkdir()
    provider = ScriptedProvider(
        [reply(calls=[call("read_skill", name="triage")]), reply(calls=[DONE])]
    )
    store = Store.memory()
    policy = Policy.permissive().layer("no-skills").deny_read(f"{skills}/*")

    result = await Harness(provider, store=store, policy=policy).run(
        contract(tmp_path / "work", skills=skills)
    )

    assert result.outcome is RunOutcome.SUCCESS
    assert "refused by the policy" in observations(provider, 1)[0]
    system = provider.requests[0].system
    assert "- triage: (not shown: the run's policy does not let" in system
    assert "How we write release notes" not in system and "Label each issue" not in system
    (refusal,) = [p for p in store.trace(result.run_id).permissions if p.act == "read"]
    assert refusal.target == str(skills / "triage.md")
    assert refusal.layer == "no-skills"


async def test_a_missing_skills_folder_is_a_config_error_before_any_provider_call(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([])

    with pytest.raises(ConfigError, match="nowhere"):
        await Harness(provider).run(contract(tmp_path, skills=tmp_path / "nowhere"))

    assert provider.requests == []


# -- memory ---------------------------------------------------------------------------


async def test_what_a_run_remembers_opens_the_next_run_on_the_same_workspace(
    tmp_path: Path,
) -> None:
    store = Store.open(tmp_path / "runs.db")
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    first = ScriptedProvider(
        [
            reply(calls=[call("remember", key="test-command", value="make test")]),
            reply(
                calls=[call("remember", key="scratch", value="x"), call("forget", key="scratch")]
            ),
            reply(calls=[DONE]),
        ]
    )
    result = await Harness(first, store=store, memory=True).run(contract(work))
    assert result.outcome is RunOutcome.SUCCESS
    assert observations(first, 1) == ["remembered test-command"]
    assert observations(first, 2) == ["remembered scratch", "forgot scratch"]

    second = ScriptedProvider([reply(calls=[DONE])])
    await Harness(second, store=store, memory=True).run(contract(work))
    other = ScriptedProvider([reply(calls=[DONE])])
    await Harness(other, store=store, memory=True).run(contract(elsewhere))

    opening = second.requests[0].messages[0].text
    assert opening.startswith("write done.txt\n\n")
    assert "- test-command: make test" in opening
    assert "scratch" not in opening
    assert "test-command" not in other.requests[0].messages[0].text  # another workspace
    assert [s.name for s in second.requests[0].tools if s.name in ("remember", "forget")] == [
        "remember",
        "forget",
    ]
    log = store.trace(result.run_id).memory
    assert [(row.op, row.key) for row in log] == [
        ("set", "test-command"),
        ("set", "scratch"),
        ("forget", "scratch"),
    ]
    store.close()


async def test_remembering_past_the_caps_evicts_the_oldest_and_says_which(
    tmp_path: Path,
) -> None:
    store = Store.memory()
    calls = [call("remember", key=f"k{i}", value=f"v{i}") for i in range(65)]
    provider = ScriptedProvider([reply(calls=calls), reply(calls=[DONE])])

    result = await Harness(provider, store=store, memory=True).run(contract(tmp_path))

    assert result.outcome is RunOutcome.SUCCESS
    replies = observations(provider, 1)
    assert replies[63] == "remembered k63"
    assert replies[64].startswith("remembered k64; evicted the oldest: k0")
    keys = [e.key for e in store.memory_entries(str(tmp_path.resolve()))]
    assert keys == [f"k{i}" for i in range(1, 65)]
    evictions = [row for row in store.trace(result.run_id).memory if row.op == "evict"]
    assert [(row.key, row.value) for row in evictions] == [("k0", "v0")]


async def test_a_policy_can_refuse_a_remember(tmp_path: Path) -> None:
    store = Store.memory()
    provider = ScriptedProvider(
        [reply(calls=[call("remember", key="token", value="secret")]), reply(calls=[DONE])]
    )
    policy = Policy.permissive().layer("memory").deny_write("memory:*")

    result = await Harness(provider, store=store, policy=policy, memory=True).run(
        contract(tmp_path)
    )

    assert result.outcome is RunOutcome.SUCCESS
    assert "refused by the policy" in observations(provider, 1)[0]
    assert store.memory_entries(str(tmp_path.resolve())) == []


async def test_a_resumed_run_keeps_the_memory_tools_it_started_with(tmp_path: Path) -> None:
    store = Store.memory()
    policy = Policy.permissive().layer("ask").ask_write("notes.txt")
    notes = call("write_file", path="notes.txt", content="n\n")
    started = await Harness(
        ScriptedProvider([reply(calls=[notes])]), store=store, policy=policy, memory=True
    ).run(contract(tmp_path))
    assert started.outcome is RunOutcome.AWAITING_APPROVAL

    provider = ScriptedProvider([reply(calls=[DONE])])
    # A harness without memory= resumes the run with the tools it started with.
    resumed = await Harness(provider, store=store, policy=policy).resume(
        started.run_id, decision=Decision.approve()
    )

    assert resumed.outcome is RunOutcome.SUCCESS
    assert {"remember", "forget"} <= {spec.name for spec in provider.requests[0].tools}


async def test_a_workspace_file_cannot_take_a_name_the_policy_keeps_for_memory(
    tmp_path: Path,
) -> None:
    # Otherwise allow_write("memory:*"), meant for notes, would let the agent write
    # a file named memory:x without being asked.
    provider = ScriptedProvider(
        [
            reply(calls=[call("write_file", path="memory:x", content="y")]),
            reply(calls=[call("write_file", path="notes/memory:x", content="y")]),
            reply(calls=[DONE]),
        ]
    )

    result = await Harness(provider).run(contract(tmp_path))

    assert result.outcome is RunOutcome.SUCCESS
    assert "kept for the agent's memory" in observations(provider, 1)[0]
    assert "kept for the agent's memory" in observations(provider, 2)[0]
    assert not (tmp_path / "memory:x").exists()
    assert not (tmp_path / "notes" / "memory:x").exists()


async def test_a_resume_needs_the_skills_its_prompt_lists(tmp_path: Path, skills: Path) -> None:
    (tmp_path / "work").mkdir()
    store = Store.memory()
    policy = Policy.permissive().layer("ask").ask_write("done.txt")
    started = await Harness(
        ScriptedProvider([reply(calls=[DONE])]), store=store, policy=policy
    ).run(contract(tmp_path / "work", skills=skills))
    assert started.outcome is RunOutcome.AWAITING_APPROVAL
    triage = skills / "triage.md"
    body = triage.read_text()

    triage.unlink()
    with pytest.raises(ResumeError, match="skill 'triage' is gone"):
        await Harness(ScriptedProvider([]), store=store).resume(
            started.run_id, decision=Decision.approve()
        )
    triage.write_text(body.replace("Label each issue", "Tag each issue"))
    with pytest.raises(ResumeError, match="skill 'triage' has a new description"):
        await Harness(ScriptedProvider([]), store=store).resume(
            started.run_id, decision=Decision.approve()
        )

    triage.write_text(body + "\nA body edited since is read as it is now.\n")
    resumed = await Harness(ScriptedProvider([]), store=store).resume(
        started.run_id, decision=Decision.approve()
    )
    assert resumed.outcome is RunOutcome.SUCCESS
