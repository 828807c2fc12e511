"""The exec tool through the whole loop: the policy's allow, ask and deny, its bounds."""

from __future__ import annotations

import socket
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import support
from io_harness import (
    NO_SANDBOX,
    Act,
    Budget,
    ConfigError,
    Decision,
    Policy,
    RunOutcome,
    Store,
    TaskContract,
    WorkspaceFileContains,
    resume,
    run,
)
from io_harness.sandbox import SandboxConfig, SandboxError, SandboxLimits, SandboxOutcome
from io_harness.testing import ScriptedProvider, call, reply
from io_harness.tools._exec import bounded, exec_observation
from support import observation

PY = sys.executable
MARK = [PY, "-c", "open('marker.txt', 'a').write('ran\\n')"]
"""A command whose every run leaves a line in the workspace."""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello\n")
    return folder


contract = partial(
    support.contract,
    goal="run the command",
    file="marker.txt",
    needle="ran",
    tools=("exec",),
    max_steps=3,
)
"""The task of the runs here: done when marker.txt holds ``ran``."""


def execs(*argvs: list[Any]) -> ScriptedProvider:
    """A model that runs each argv in one step, then ends its turn."""
    return ScriptedProvider(
        [reply(calls=[call("exec", argv=argv) for argv in argvs]), reply("done"), reply("done")]
    )


def exec_policy(effect: str) -> Policy:
    layer = Policy.permissive().layer("exec-rules")
    return getattr(layer, f"{effect}_exec")("python*")  # type: ignore[no-any-return]


async def test_an_allowed_command_runs_and_its_output_reaches_the_model(
    root: Path, store: Store
) -> None:
    provider = execs([PY, "-c", "print(open('notes.txt').read().upper()); import sys; sys.exit(0)"])

    result = await run(
        contract(root, max_steps=2), provider, store=store, policy=exec_policy("allow")
    )

    seen = observation(provider)
    assert "exit status 0" in seen
    assert "HELLO" in seen
    assert "stderr: (empty)" in seen
    (row,) = store.trace(result.run_id).tool_calls
    assert row.name == "exec" and not row.is_error
    allowed = [p for p in store.trace(result.run_id).permissions if p.act == "exec"]
    assert [(p.target, p.decision) for p in allowed] == [(PY, "allowed")]
    assert allowed[0].argv is not None and "notes.txt" in " ".join(allowed[0].argv)


async def test_a_command_the_policy_asks_about_waits_and_runs_once_when_approved(
    root: Path, store: Store
) -> None:
    provider = ScriptedProvider([reply(calls=[call("exec", argv=MARK)])])

    first = await run(contract(root), provider, store=store, policy=exec_policy("ask"))

    assert first.outcome is RunOutcome.AWAITING_APPROVAL
    assert first.request is not None and first.request.act is Act.EXEC
    assert first.request.target == PY and first.request.argv == tuple(MARK)
    assert not (root / "marker.txt").exists()

    later = ScriptedProvider([reply("done")])
    done = await resume(first.run_id, later, store=store, decision=Decision.approve())

    assert done.outcome is RunOutcome.SUCCESS
    assert (root / "marker.txt").read_text() == "ran\n"
    assert later.requests == []  # the approved step's check passed
    trace = store.trace(first.run_id)
    (row,) = trace.tool_calls
    assert "exit status 0" in row.result
    assert [e.kind for e in trace.sandbox_events].count("exec") == 1


async def test_a_denied_command_is_refused_to_the_model_and_never_runs(
    root: Path, store: Store
) -> None:
    provider = execs(MARK)

    result = await run(
        contract(root, max_steps=2), provider, store=store, policy=exec_policy("deny")
    )

    assert result.outcome is RunOutcome.STEP_CAP_REACHED
    seen = observation(provider)
    assert seen.startswith(f"exec: refused by the policy: exec {PY}: deny")
    assert "rule 'deny exec python*' in layer 'exec-rules'" in seen
    assert not (root / "marker.txt").exists()
    assert store.trace(result.run_id).sandbox_events == ()


async def test_a_command_an_approver_denies_is_refused_with_its_reason(
    root: Path, store: Store
) -> None:
    provider = ScriptedProvider([reply(calls=[call("exec", argv=MARK)])])
    first = await run(contract(root), provider, store=store, policy=exec_policy("ask"))

    later = ScriptedProvider([reply("understood")])
    await resume(first.run_id, later, store=store, decision=Decision.deny("no commands today"))

    assert "no commands today" in observation(later, 0)
    assert not (root / "marker.txt").exists()


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        ([], "argv: List should have at least 1 item"),
        ([PY, 3], "argv.1: Input should be a valid string"),
        ("echo hi", "argv: Input should be a valid list"),
        ([""], "the program (argv[0]) is empty"),
    ],
)
async def test_bad_argv_is_an_error_the_model_reads(
    root: Path, store: Store, argv: Any, problem: str
) -> None:
    provider = execs(argv)

    await run(contract(root, max_steps=2), provider, store=store)

    seen = observation(provider)
    assert seen.startswith("exec: invalid arguments:")
    assert problem in seen


async def test_a_command_that_prints_a_lot_is_shown_head_and_tail_with_the_cut_said(
    root: Path, store: Store
) -> None:
    script = "import sys; sys.stdout.write('A' * 50000 + 'MID' + 'DLE' + 'B' * 50000 + 'END')"
    provider = execs([PY, "-c", script])

    await run(contract(root, max_steps=2), provider, store=store)

    seen = observation(provider)
    assert "stdout (100009 bytes; the first 8192 and the last 8192 are shown)" in seen
    assert "[... 83625 bytes of stdout cut here ...]" in seen
    assert "MIDDLE" not in seen
    assert seen.rstrip().endswith("B" * 100 + "END" + "\nstderr: (empty)")
    assert len(seen) < 20_000


def test_bounding_keeps_short_streams_whole_and_drops_split_characters() -> None:
    assert bounded("", "stdout") == "stdout: (empty)"
    assert bounded("two\nlines\n", "stderr") == "stderr (10 bytes):\ntwo\nlines"
    cut = bounded("é" * 10, "stdout", head=3, tail=3)
    assert cut.splitlines()[1:] == ["é", "[... 14 bytes of stdout cut here ...]", "é"]


@pytest.mark.parametrize(
    ("script", "said"),
    [
        ("import sys; sys.exit(3)", "exit status 3"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", "killed by signal SIGTERM"),
    ],
)
async def test_the_exit_status_or_the_signal_is_reported(
    root: Path, store: Store, script: str, said: str
) -> None:
    provider = execs([PY, "-c", script])

    result = await run(contract(root, max_steps=2), provider, store=store)

    assert observation(provider).splitlines()[0] == said
    (row,) = store.trace(result.run_id).tool_calls
    assert row.is_error


async def test_a_command_past_its_cap_is_killed_and_the_cap_is_reported(
    root: Path, store: Store
) -> None:
    provider = execs([PY, "-c", "import time; time.sleep(60)"])
    capped = SandboxConfig(limits=SandboxLimits(wall_seconds=1), accept_floor=True)

    result = await run(contract(root, max_steps=2), provider, store=store, sandbox=capped)

    seen = observation(provider)
    assert "killed at the wall cap" in seen
    assert "went past the sandbox's wall cap" in seen
    kinds = [(e.kind, e.call_id) for e in store.trace(result.run_id).sandbox_events]
    assert ("cap_hit", "call_1_1") in kinds


async def test_a_command_past_the_disk_cap_is_killed_and_the_model_told_what_it_wrote(
    root: Path, store: Store
) -> None:
    code = (
        "import time\n"
        "for i in range(40): open(f'disk-{i}.bin', 'wb').write(b'x' * (1 << 20))\n"
        "time.sleep(600)"
    )
    provider = execs([PY, "-c", code])
    limits = SandboxLimits(disk_bytes=4 << 20, file_size_bytes=2 << 20, wall_seconds=30)
    capped = SandboxConfig(limits=limits, accept_floor=True)

    result = await run(contract(root, max_steps=2), provider, store=store, sandbox=capped)

    seen = observation(provider)
    assert "killed at the disk cap" in seen
    assert "went past the sandbox's disk cap (its writes added " in seen
    caps = [e for e in store.trace(result.run_id).sandbox_events if e.kind == "cap_hit"]
    assert [e.detail["cap"] for e in caps] == ["disk"]
    assert caps[0].detail["written_bytes"] > 4 << 20


@pytest.mark.parametrize("sandbox", ["default", None])
async def test_a_command_is_cut_off_where_the_run_s_wall_budget_ends(
    root: Path, store: Store, sandbox: str | None
) -> None:
    provider = execs([PY, "-c", "import time; time.sleep(60)"])
    budget = Budget(max_steps=3, max_wall_seconds=4)
    bounded_run = TaskContract.workspace(
        "wait", root, WorkspaceFileContains("marker.txt", "ran"), budget=budget, tools=["exec"]
    )
    options: dict[str, Any] = {} if sandbox == "default" else {"sandbox": NO_SANDBOX}

    result = await run(bounded_run, provider, store=store, **options)

    assert result.outcome is RunOutcome.TIME_BUDGET_EXCEEDED
    (row,) = store.trace(result.run_id).tool_calls
    assert "killed at the wall cap" in row.result
    caps = [e for e in store.trace(result.run_id).sandbox_events if e.kind == "cap_hit"]
    assert [e.detail["cap"] for e in caps] == ["wall"]


async def test_each_connection_through_the_proxy_is_a_net_act_the_policy_decides(
    root: Path, store: Store
) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        other = port + 1 if port < 65535 else port - 1
        code = (
            "import os, socket\n"
            "for target in sys.argv[1:]:\n"
            "    c = socket.socket(socket.AF_UNIX); c.connect(os.environ['IOH_PROXY_SOCKET'])\n"
            "    c.sendall(f'CONNECT {target} HTTP/1.1\\r\\n\\r\\n'.encode())\n"
            "    print(target, c.recv(200).decode().splitlines()[0]); c.close()\n"
        )
        argv = [PY, "-c", "import sys\n" + code, f"127.0.0.1:{port}", f"127.0.0.1:{other}"]
        provider = execs(argv)
        policy = Policy.permissive().layer("net").deny_net(f"127.0.0.1:{other}")
        config = SandboxConfig(network="allow_list", allow_hosts=("127.0.0.1",))

        result = await run(
            contract(root, max_steps=2), provider, store=store, policy=policy, sandbox=config
        )

    seen = observation(provider)
    assert f"127.0.0.1:{port} HTTP/1.1 200" in seen
    assert f"127.0.0.1:{other} HTTP/1.1 403" in seen
    nets = [p for p in store.trace(result.run_id).permissions if p.act == "net"]
    assert [(p.target, p.decision, p.call_id) for p in nets] == [
        (f"127.0.0.1:{port}", "allowed", "call_1_1"),
        (f"127.0.0.1:{other}", "refused", "call_1_1"),
    ]


async def test_a_program_that_does_not_exist_is_reported(root: Path, store: Store) -> None:
    provider = execs(["no-such-program-ioh"])

    await run(contract(root, max_steps=2), provider, store=store)

    assert "could not start" in observation(provider) or "exit status 127" in observation(provider)


async def test_exec_is_not_offered_unless_the_contract_asks_for_it(
    root: Path, store: Store
) -> None:
    provider = execs(MARK)

    await run(contract(root, tools=(), max_steps=2), provider, store=store)

    assert "exec" not in [spec.name for spec in provider.requests[0].tools]
    assert observation(provider).startswith("unknown tool 'exec'")
    assert not (root / "marker.txt").exists()


async def test_exec_is_offered_and_named_in_the_prompt_when_enabled(
    root: Path, store: Store
) -> None:
    provider = execs(MARK)

    await run(contract(root, max_steps=2), provider, store=store)

    request = provider.requests[0]
    assert [spec.name for spec in request.tools][-1] == "exec"
    assert "exec" in request.system


async def test_without_a_sandbox_exec_runs_directly_and_the_trace_says_so(
    root: Path, store: Store
) -> None:
    provider = execs(MARK)

    result = await run(contract(root), provider, store=store, sandbox=NO_SANDBOX)

    assert result.outcome is RunOutcome.SUCCESS and result.sandbox == "none"
    (event,) = store.trace(result.run_id).sandbox_events
    assert (event.kind, event.backend) == ("exec", "none")


def test_exec_in_a_single_file_contract_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text(
        'goal = "g"\nfile = "a.txt"\ntools = ["exec"]\n[verify]\nkind = "file_contains"\n'
        'needle = "x"\n'
    )

    with pytest.raises(ConfigError, match="single-file contract has only its two file tools"):
        TaskContract.from_toml(tmp_path / "c.toml")


def test_an_unknown_tool_name_is_a_config_error(root: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown tool 'shell'; the optional tools are: exec"):
        contract(root, tools=("shell",))
    with pytest.raises(ConfigError, match="tools is a list"):
        TaskContract.workspace("g", root, WorkspaceFileContains("a", "b"), tools="exec")
    (tmp_path / "c.toml").write_text(
        'goal = "g"\nroot = "ws"\ntools = ["exec", "bash"]\n[verify]\n'
        'kind = "workspace_file_contains"\nfile = "a"\nneedle = "x"\n'
    )
    with pytest.raises(ConfigError, match=r"c\.toml: tools: .*unknown tool 'bash'"):
        TaskContract.from_toml(tmp_path / "c.toml")


def test_a_toml_contract_enables_exec(tmp_path: Path, root: Path) -> None:
    (tmp_path / "c.toml").write_text(
        'goal = "g"\nroot = "ws"\ntools = ["exec"]\n[verify]\n'
        'kind = "workspace_file_contains"\nfile = "a"\nneedle = "x"\n'
    )

    assert TaskContract.from_toml(tmp_path / "c.toml").tools == ("exec",)


async def test_a_sandbox_no_backend_can_give_fails_before_any_provider_call(
    root: Path, store: Store
) -> None:
    provider = execs(MARK)
    floor_only = SandboxConfig(backends=("floor",))  # denies the network; the floor cannot

    with pytest.raises(SandboxError, match="cannot deny the network"):
        await run(contract(root), provider, store=store, sandbox=floor_only)

    assert provider.requests == []
    assert store.runs() == []


async def test_a_sandbox_of_the_wrong_type_is_a_config_error(root: Path, store: Store) -> None:
    with pytest.raises(
        ConfigError,
        match="sandbox must be DEFAULT_SANDBOX, NO_SANDBOX, a SandboxConfig or a Sandbox",
    ):
        await run(contract(root), execs(MARK), store=store, sandbox="bubblewrap")  # type: ignore[arg-type]


def test_the_observation_says_a_cut_the_sandbox_made() -> None:
    outcome = SandboxOutcome(
        backend="x",
        argv=("prog", "a b"),
        exit_code=0,
        signal=None,
        cap_hit=None,
        stdout="start\n[... 10 bytes of output cut here ...]\nend\n",
        stderr="",
        truncated=True,
        duration=0.0,
    )

    seen = exec_observation(outcome)

    assert seen.splitlines()[:3] == [
        "exit status 0",
        "$ prog 'a b'",
        "[the sandbox kept only part of the output; the cut is marked in it]",
    ]


def test_the_observation_says_a_command_ended_past_the_disk_cap() -> None:
    outcome = SandboxOutcome(
        backend="x",
        argv=("writer",),
        exit_code=0,
        signal=None,
        cap_hit="disk",
        stdout="",
        stderr="",
        truncated=False,
        duration=0.0,
        written_bytes=5 << 20,
    )

    seen = exec_observation(outcome)

    assert seen.splitlines()[:3] == [
        "over the disk cap when it ended (exit status 0)",
        "$ writer",
        "[the command went past the sandbox's disk cap (its writes added 5242880 bytes to "
        "the folders it may write) before it ended]",
    ]
