"""``ioh`` with real providers, against loopback servers that speak each vendor's wire.

Keys and base URLs come from the environment, as a user sets them; the
servers are :class:`loopback.LoopbackServer` on 127.0.0.1, so nothing leaves
the machine. Each run has ``max_retries = 0`` so a failing server costs no
back-off.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from io_harness import PriceTable, Store, TaskContract, Usage, run
from io_harness.cli import main
from io_harness.providers import PRESETS, SPEC_FORMS
from io_harness.providers import _openai as openai_module
from io_harness.testing import ScriptedProvider, call, reply
from loopback import LoopbackServer, Reply
from wire_anthropic import messages_stream
from wire_openai import chat_stream, error_reply, usage

OPENAI_KEY = "sk-test-cli-0123456789abcdef"
ANTHROPIC_KEY = "sk-ant-test-cli-0123456789abcdef"
WRITE = json.dumps({"path": "out.txt", "content": "hello\n"})
PRICES = (
    'currency = "USD"\n'
    '[models."gpt-test"]\ninput = 1.25\noutput = 10\n'
    '[models."claude-test"]\ninput = 3\noutput = 15\n'
)
OPENAI_COST = "0.001750"  # 1000 in at 1.25 + 50 out at 10, per million
ANTHROPIC_COST = "0.003300"  # 900 in at 3 + 40 out at 15, per million
VARIABLES = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_MODEL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "OPENAI_COMPATIBLE_API_KEY",
    "OPENAI_COMPATIBLE_BASE_URL",
    "OPENAI_COMPATIBLE_MODEL",
)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    # Wide enough that rich neither wraps nor cuts what these tests look for;
    # the width-sensitive behaviour has its own tests below.
    monkeypatch.setenv("COLUMNS", "250")


def openai_write(model: str = "gpt-test-0613") -> Reply:
    return chat_stream(
        "Writing.",
        tool_calls=[("call_w", "write_file", WRITE)],
        usage=usage(1000, 50),
        model=model,
    )


def anthropic_write() -> Reply:
    return messages_stream(
        "Writing.",
        tool_calls=[("toolu_w", "write_file", WRITE)],
        usage={"input_tokens": 900, "output_tokens": 40},
    )


class Project:
    """A workspace, a contract that wants ``hello`` in ``out.txt``, a price file, a store."""

    def __init__(self, tmp_path: Path, budget: str = "max_retries = 0\n") -> None:
        self.root = tmp_path / "ws"
        self.root.mkdir(exist_ok=True)
        (self.root / "notes.txt").write_text("say hello\n")
        self.contract = tmp_path / "contract.toml"
        self.contract.write_text(
            'goal = "write hello to out.txt"\nroot = "ws"\n'
            '[verify]\nkind = "workspace_file_contains"\nfile = "out.txt"\nneedle = "hello"\n'
            f"[budget]\n{budget}"
        )
        self.prices = tmp_path / "prices.toml"
        self.prices.write_text(PRICES)
        self.store = tmp_path / "runs.db"

    def run(self, *providers: str, prices: bool = False, run_id: str = "r1") -> int:
        argv = ["run", str(self.contract), "--store", str(self.store), "--run-id", run_id]
        for spec in providers:
            argv += ["--provider", spec]
        if prices:
            argv += ["--prices", str(self.prices)]
        return main(argv)

    def show(self, run_id: str = "r1") -> int:
        return main(["show", run_id, "--store", str(self.store)])


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


@pytest.fixture
def openai_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    with LoopbackServer([openai_write()]) as server:
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        yield server


def flat(text: str) -> str:
    """Output with every run of whitespace made one space (line wrapping aside)."""
    return " ".join(text.split())


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error:"), err
    assert "Traceback" not in err
    return lines[0]


# -- a real vendor, end to end ---------------------------------------------------------


def test_ioh_run_with_openai_writes_the_file_and_show_prints_provider_model_and_spend(
    project: Project, openai_server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    status = project.run("openai:gpt-test", prices=True)

    out = flat(capsys.readouterr().out)
    assert status == 0, out
    assert (project.root / "out.txt").read_text() == "hello\n"
    assert "outcome: success after 1 step" in out
    assert f"spend: {OPENAI_COST}" in out
    (request,) = openai_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.json["model"] == "gpt-test"
    assert request.headers["authorization"] == f"Bearer {OPENAI_KEY}"

    assert project.show() == 0
    shown = flat(capsys.readouterr().out)
    assert "provider: openai (gpt-test)" in shown
    assert f"spend: {OPENAI_COST}" in shown
    assert "answered by openai (gpt-test-0613)" in shown
    assert f"cost {OPENAI_COST}" in shown
    assert "check (file changed): PASS" in shown
    assert OPENAI_KEY not in shown


def test_without_prices_show_says_the_spend_is_unpriced(
    project: Project, openai_server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert project.run("openai:gpt-test") == 0
    assert "spend: unpriced" in flat(capsys.readouterr().out)

    assert project.show() == 0
    shown = flat(capsys.readouterr().out)
    assert "spend: unpriced" in shown
    assert "answered by openai (gpt-test-0613)" in shown
    assert "unpriced" in shown.split("answered by openai", 1)[1]
    assert "cost 0.000000" not in shown
    with Store.open(project.store) as store:
        (row,) = store.trace("r1").provider_calls
        summary = store.runs()[0]
    assert row.cost_micros is None
    assert (summary.cost_micros, summary.unpriced_calls) == (0, 1)


def test_a_second_provider_answers_when_the_first_fails(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(_request: object) -> Reply:
        return error_reply(500, "upstream broke", type="server_error")

    with LoopbackServer(broken) as openai, LoopbackServer([anthropic_write()]) as anthropic:
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{openai.url}/v1")
        monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic.url)
        status = project.run("openai:gpt-test", "anthropic:claude-test", prices=True)

    out = flat(capsys.readouterr().out)
    assert status == 0, out
    assert (project.root / "out.txt").read_text() == "hello\n"
    assert len(openai.requests) == 1  # max_retries = 0: one attempt, then the next provider
    (asked,) = anthropic.requests
    assert asked.path == "/v1/messages" and asked.json["model"] == "claude-test"
    assert f"spend: {ANTHROPIC_COST}" in out

    assert project.show() == 0
    shown = flat(capsys.readouterr().out)
    assert "provider attempt 1 failed: openai: server" in shown
    assert "answered by anthropic (claude-test-1)" in shown
    assert f"cost {ANTHROPIC_COST}" in shown
    assert f"spend: {ANTHROPIC_COST}" in shown
    with Store.open(project.store) as store:
        rows = store.trace("r1").provider_calls
    assert [(r.provider, r.error_kind, r.cost_micros) for r in rows] == [
        ("openai", "server", 0),
        ("anthropic", None, 3300),
    ]


# -- errors before anything runs ---------------------------------------------------------


def test_a_missing_key_is_one_line_naming_the_variable(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # short enough to stay one line at any width

    status = project.run("anthropic:claude-x")

    captured = capsys.readouterr()
    assert status == 2
    line = one_error_line(captured.err)
    assert "ANTHROPIC_API_KEY" in line
    assert not project.store.exists()  # refused before the store is even opened


def test_a_fallback_member_without_a_key_stops_the_run_before_any_call(
    project: Project, openai_server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    status = project.run("openai:gpt-test", "anthropic:claude-x")

    assert status == 2
    assert "ANTHROPIC_API_KEY" in one_error_line(capsys.readouterr().err)
    assert openai_server.requests == []


@pytest.mark.parametrize(
    "spec", ["telepathy", "telepathy:model-1", "gemini:gemini-pro", "OpenAI:gpt-test"]
)
def test_an_unknown_spec_is_exit_2_listing_the_forms(
    project: Project, capsys: pytest.CaptureFixture[str], spec: str
) -> None:
    status = project.run(spec)

    err = capsys.readouterr().err
    assert status == 2
    assert "Traceback" not in err
    assert err.startswith("error:")
    assert f"unknown provider {spec!r}" in flat(err)
    for form in SPEC_FORMS:
        assert form in err


@pytest.mark.parametrize("spec", ["compatible:no-model-here", "compatible:http://h/v1#"])
def test_a_compatible_spec_without_url_and_model_says_how_to_write_it(
    project: Project, capsys: pytest.CaptureFixture[str], spec: str
) -> None:
    assert project.run(spec) == 2
    assert "compatible:URL#MODEL" in one_error_line(capsys.readouterr().err)


def test_an_unknown_spec_error_is_one_line_even_at_80_columns(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")

    assert project.run("telepathy") == 2

    line = one_error_line(capsys.readouterr().err)
    assert all(form in line for form in SPEC_FORMS)


def test_max_cost_without_prices_is_exit_2_before_any_call(
    tmp_path: Path, openai_server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    project = Project(tmp_path, budget="max_retries = 0\nmax_cost = 0.5\n")

    status = project.run("openai:gpt-test")

    assert status == 2
    line = one_error_line(capsys.readouterr().err)
    assert "max_cost" in line and "--prices" in line
    assert openai_server.requests == []


def test_max_cost_with_prices_that_miss_a_fallback_member_is_exit_2(
    tmp_path: Path,
    openai_server: LoopbackServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project = Project(tmp_path, budget="max_retries = 0\nmax_cost = 0.5\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", openai_server.url)  # never dialled

    status = project.run("openai:gpt-test", "anthropic:claude-unpriced", prices=True)

    assert status == 2
    assert "claude-unpriced" in capsys.readouterr().err
    assert openai_server.requests == []


def test_a_bad_price_file_is_exit_2_naming_it(
    project: Project, openai_server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    project.prices.write_text('[models."gpt-test"]\ninput = 1\n')

    status = project.run("openai:gpt-test", prices=True)

    assert status == 2
    err = capsys.readouterr().err
    assert "prices.toml" in err and "output" in err
    assert "Traceback" not in err
    assert openai_server.requests == []


# -- the cost budget on the command line ---------------------------------------------------


def test_a_run_over_its_cost_budget_stops_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The first call costs 10500 micro-units (8000 in at 1.25, 50 out at 10); the budget
    # is 10000, more than the first prompt can cost.
    project = Project(tmp_path, budget="max_retries = 0\nmax_cost = 0.01\n")
    script = [
        chat_stream(
            tool_calls=[("call_r", "read_file", json.dumps({"path": "notes.txt"}))],
            usage=usage(8000, 50),
        ),
        openai_write(),
    ]
    with LoopbackServer(script) as server:
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        status = project.run("openai:gpt-test", prices=True)

    out = flat(capsys.readouterr().out)
    assert status == 1, out
    assert "cost_budget_exceeded after 1 step" in out
    assert "spend: 0.010500" in out
    assert len(server.requests) == 1
    assert not (project.root / "out.txt").exists()


def test_ioh_resume_counts_the_spend_already_made(
    project: Project,
    openai_server: LoopbackServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    class ProcessDied(BaseException):
        pass

    first = ScriptedProvider(
        [
            reply(
                calls=[call("read_file", path="notes.txt")],
                usage=Usage(input_tokens=2000, output_tokens=100),
                model="gpt-test",
            ),
            ProcessDied(),
        ],
        name="openai",
        model="gpt-test",
    )
    contract = TaskContract.from_toml(project.contract)
    prices = PriceTable.from_toml(project.prices)
    with Store.open(project.store) as store, pytest.raises(ProcessDied):
        asyncio.run(run(contract, first, store=store, run_id="r1", prices=prices))

    status = main(
        [
            "resume",
            "r1",
            "--provider",
            "openai:gpt-test",
            "--prices",
            str(project.prices),
            "--store",
            str(project.store),
        ]
    )

    out = flat(capsys.readouterr().out)
    assert status == 0, out
    # 2000 in at 1.25 + 100 out at 10 before the crash, then the resumed call's 1750.
    assert "spend: 0.005250" in out
    assert len(openai_server.requests) == 1
    assert project.show() == 0
    assert "spend: 0.005250" in flat(capsys.readouterr().out)


# -- other spec forms against loopback --------------------------------------------------------


def test_a_compatible_url_and_model_spec_runs_against_that_server(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    with LoopbackServer([openai_write(model="m-local")]) as server:
        status = project.run(f"compatible:{server.url}/v1#m-local")

    out = capsys.readouterr().out
    assert status == 0, out
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.json["model"] == "m-local"
    assert "max_tokens" in request.json and "max_completion_tokens" not in request.json
    assert request.headers["authorization"] == "Bearer not-needed"
    assert project.show() == 0
    shown = flat(capsys.readouterr().out)
    assert "provider: compatible (m-local)" in shown
    assert "answered by compatible (m-local)" in shown


def test_an_ollama_spec_dials_the_presets_address_without_a_key(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with LoopbackServer([openai_write(model="qwen-test")]) as server:
        # The preset's address, pointed at this loopback server instead of :11434.
        presets = {**PRESETS, "ollama": f"{server.url}/v1"}
        monkeypatch.setattr(openai_module, "PRESETS", presets)
        status = project.run("ollama:qwen-test")

    out = capsys.readouterr().out
    assert status == 0, out
    (request,) = server.requests
    assert request.json["model"] == "qwen-test"
    assert request.headers["authorization"] == "Bearer not-needed"
    assert project.show() == 0
    assert "provider: ollama (qwen-test)" in flat(capsys.readouterr().out)


# -- ioh runs ------------------------------------------------------------------------------------


def runs_with_and_without_prices(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    with LoopbackServer([openai_write(), openai_write()]) as server:
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        assert project.run("openai:gpt-test", prices=True, run_id="priced") == 0
        (project.root / "out.txt").unlink()
        assert project.run("openai:gpt-test", run_id="unpriced") == 0


def test_ioh_runs_has_a_spend_column(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runs_with_and_without_prices(project, monkeypatch)
    capsys.readouterr()

    assert main(["runs", "--store", str(project.store)]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert "spend" in lines[0].split()
    (priced,) = [line for line in lines if line.split()[:1] == ["priced"]]
    (unpriced,) = [line for line in lines if line.split()[:1] == ["unpriced"]]
    assert OPENAI_COST in priced
    assert "unpriced (1 call)" in unpriced
    assert "write hello to out.txt" in priced


def test_ioh_runs_fits_spend_and_goal_in_80_columns(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runs_with_and_without_prices(project, monkeypatch)
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "80")

    assert main(["runs", "--store", str(project.store)]) == 0

    out = capsys.readouterr().out
    assert "unpriced (1 call)" in out
    assert "write hello" in out


def test_a_provider_error_in_the_trace_never_shows_the_key(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = [error_reply(401, f"Incorrect API key provided: {OPENAI_KEY}")]
    with LoopbackServer(script) as server:
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        status = project.run("openai:gpt-test")

    out = capsys.readouterr().out
    assert status == 1
    assert "provider_failed" in out and OPENAI_KEY not in out
    assert project.show() == 0
    shown = capsys.readouterr().out
    assert "auth" in shown and OPENAI_KEY not in shown
