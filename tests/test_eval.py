"""Evaluation suites: every case with every provider, each repeat, within the bound; the rows.

The Python API runs scripted models; ``ioh eval`` runs replayed ones (cassettes
recorded here, or the example's under ``examples/eval``).
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from io_harness import (
    Budget,
    CompletionRequest,
    CompletionResponse,
    ConfigError,
    Harness,
    Policy,
    ProviderError,
    PythonCompiles,
    Record,
    Store,
    TaskContract,
    WorkspaceFileContains,
    run,
)
from io_harness.cli import main
from io_harness.eval import (
    CSV_COLUMNS,
    ResultRow,
    RunRecord,
    Suite,
    SuiteCase,
    SuiteProvider,
    SuiteResult,
    SuiteRun,
    run_suite,
)
from io_harness.testing import ScriptedProvider, ScriptItem, call, reply
from loopback import LoopbackServer, Reply

IOH = Path(sys.executable).with_name("ioh")
EXAMPLE = Path(__file__).parent.parent / "examples" / "eval" / "suite.toml"
WAIT = 60.0
"""The longest a test waits for something to happen (a bound, not a measurement)."""


def write(content: str = "hello\n") -> CompletionResponse:
    return reply("writing", [call("write_file", path="out.txt", content=content)])


def hello_contract(folder: Path, max_steps: int = 3) -> TaskContract:
    """A workspace with a seed file, and a criterion that wants ``hello`` in ``out.txt``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "seed.txt").write_text("seed\n")
    return TaskContract.workspace(
        "write hello to out.txt",
        folder,
        WorkspaceFileContains("out.txt", "hello"),
        budget=Budget(max_steps=max_steps, max_retries=0),
    )


SCRIPTS: dict[str, Callable[[], list[ScriptItem]]] = {
    "direct": lambda: [write()],
    "two-edits": lambda: [write("hel"), write()],  # a failed check after a write is not a try
    "claims": lambda: [reply("done already"), write()],  # told it failed, then fixes it
    "lazy": lambda: [reply("done"), reply("done"), reply("done")],
    "broken": lambda: [ProviderError("auth", "the key is refused")],
}


def scripted(store: Store) -> Callable[[SuiteRun], Harness]:
    """Each run's harness: the script its provider is named after, over ``store``."""
    return lambda one: Harness(ScriptedProvider(SCRIPTS[one.provider.name]()), store=store)


def suite_of(contract: TaskContract, *providers: str, repeat: int = 1, **more: object) -> Suite:
    return Suite(
        name="hello-suite",
        cases=(SuiteCase(name="hello", contract=contract, repeat=repeat),),
        providers=tuple(SuiteProvider(name=name) for name in providers),
        **more,
    )


def by_provider(result: SuiteResult) -> dict[str, list[RunRecord]]:
    found: dict[str, list[RunRecord]] = {}
    for record in result.records:
        found.setdefault(record.provider, []).append(record)
    return found


# -- the Python API --------------------------------------------------------------------


async def test_every_case_runs_with_every_provider_each_repeat_stored_with_its_labels(
    tmp_path: Path, store: Store
) -> None:
    one, two = hello_contract(tmp_path / "one"), hello_contract(tmp_path / "two")
    suite = Suite(
        name="pair",
        cases=(
            SuiteCase(name="one", contract=one, repeat=2),
            SuiteCase(name="two", contract=two, repeat=1),
        ),
        providers=(SuiteProvider(name="direct"), SuiteProvider(name="two-edits")),
    )

    result = await run_suite(suite, harness_for=scripted(store))

    planned = {(r.case, r.provider, r.repeat) for r in result.records}
    assert planned == {
        ("one", "direct", 1), ("one", "direct", 2), ("one", "two-edits", 1),
        ("one", "two-edits", 2), ("two", "direct", 1), ("two", "two-edits", 1),
    }  # fmt: skip
    assert len(result.records) == suite.runs == 6
    assert result.passed
    stored = store.runs(labels={"eval": result.eval_id})
    assert sorted(run.id for run in stored) == sorted(str(r.run_id) for r in result.records)
    for record in result.records:
        labels = next(run.labels for run in stored if run.id == record.run_id)
        assert labels == {
            "suite": "pair",
            "case": record.case,
            "provider": record.provider,
            "repeat": str(record.repeat),
            "eval": result.eval_id,
        }
    assert len(store.runs(labels={"suite": "pair", "case": "one", "provider": "direct"})) == 2
    rows = [(row.case, row.provider, row.runs, row.passed) for row in result.rows()]
    assert rows == [
        ("one", "direct", 2, 2), ("one", "two-edits", 2, 2),
        ("two", "direct", 1, 1), ("two", "two-edits", 1, 1),
    ]  # fmt: skip
    assert [(row.case, row.provider, row.runs) for row in result.totals()] == [
        (None, "direct", 3),
        (None, "two-edits", 3),
    ]


async def test_a_failing_case_and_a_provider_error_are_failures_and_the_suite_goes_on(
    tmp_path: Path, store: Store
) -> None:
    suite = suite_of(hello_contract(tmp_path / "ws"), "direct", "lazy", "broken", repeat=2)

    result = await run_suite(suite, harness_for=scripted(store))

    runs = by_provider(result)
    assert [r.outcome for r in runs["direct"]] == ["success", "success"]
    assert [r.outcome for r in runs["lazy"]] == ["step_cap_reached"] * 2
    assert [(r.outcome, r.error_kind) for r in runs["broken"]] == [("provider_failed", "auth")] * 2
    assert runs["broken"][0].error == "the key is refused"
    assert not result.passed
    rows = {row.provider: row for row in result.rows()}
    assert (rows["direct"].passed, rows["direct"].failures) == (2, {})
    assert (rows["lazy"].passed, rows["lazy"].failures) == (0, {"step_cap_reached": 2})
    assert rows["broken"].failures == {"provider_failed: auth": 2}
    assert rows["lazy"].median_steps == 3
    assert all(r.run_id is not None for r in result.records)  # every run is stored


async def test_first_try_counts_runs_whose_model_was_never_shown_a_failing_check(
    tmp_path: Path, store: Store
) -> None:
    suite = suite_of(hello_contract(tmp_path / "ws"), "direct", "two-edits", "claims")

    result = await run_suite(suite, harness_for=scripted(store))

    runs = by_provider(result)
    assert [(r.outcome, r.first_try, r.steps) for r in runs["direct"]] == [("success", True, 1)]
    # Its first write failed the check, but the model was not told: still its first try.
    assert [(r.outcome, r.first_try, r.steps) for r in runs["two-edits"]] == [("success", True, 2)]
    # It ended its turn, was shown the failing check, then fixed it.
    assert [(r.outcome, r.first_try, r.steps) for r in runs["claims"]] == [("success", False, 2)]
    trace = store.trace(str(runs["two-edits"][0].run_id))
    assert [(v.trigger, v.passed) for v in trace.verifications] == [
        ("file_changed", False),
        ("file_changed", True),
    ]
    rows = {row.provider: row for row in result.rows()}
    assert (rows["claims"].pass_rate, rows["claims"].first_try_rate) == (1.0, 0.0)


async def test_no_more_runs_than_the_bound_are_in_flight_at_once(
    tmp_path: Path, store: Store
) -> None:
    bound, in_flight, peak = 3, [0], [0]
    together = asyncio.Barrier(bound)  # each run's call waits until `bound` calls are made

    async def answer(_request: CompletionRequest) -> CompletionResponse:
        in_flight[0] += 1
        peak[0] = max(peak[0], in_flight[0])
        await together.wait()
        in_flight[0] -= 1
        return write()

    suite = suite_of(hello_contract(tmp_path / "ws"), "counting", repeat=2 * bound)
    started: list[int] = []

    result = await asyncio.wait_for(
        run_suite(
            suite,
            harness_for=lambda _run: Harness(ScriptedProvider(answer), store=store),
            concurrency=bound,
            on_start=lambda one: started.append(one.repeat),
        ),
        WAIT,  # a bound below 3 would never fill the barrier
    )

    assert peak[0] == bound
    assert result.passed
    assert sorted(started) == list(range(1, 2 * bound + 1))


async def test_each_run_works_in_its_own_copy_of_the_workspace_removed_after_it(
    tmp_path: Path, store: Store
) -> None:
    contract = hello_contract(tmp_path / "ws")
    finished: list[RunRecord] = []

    result = await run_suite(
        suite_of(contract, "direct", repeat=3),
        harness_for=scripted(store),
        on_finish=finished.append,
    )

    roots = [
        Path(json.loads(store.load_run(str(r.run_id)).contract_json)["root"])
        for r in result.records
    ]
    assert len(set(roots)) == 3
    assert all(root != contract.root and not root.exists() for root in roots)
    assert all(root.name == "ws" for root in roots)
    assert sorted(path.name for path in contract.root.iterdir()) == ["seed.txt"]  # untouched
    assert sorted(finished, key=lambda r: r.repeat) == sorted(
        result.records, key=lambda r: r.repeat
    )


async def test_a_suite_that_does_not_isolate_runs_in_the_contracts_own_folder(
    tmp_path: Path, store: Store
) -> None:
    contract = hello_contract(tmp_path / "ws")

    result = await run_suite(
        suite_of(contract, "direct", isolate=False), harness_for=scripted(store)
    )

    assert result.passed
    assert (contract.root / "out.txt").read_text() == "hello\n"


async def test_a_run_that_raises_before_its_first_call_is_a_failure_with_its_kind(
    tmp_path: Path, store: Store
) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    contract = TaskContract.workspace("compile", folder, PythonCompiles())
    refusing = Policy.default().layer("no-commands").deny_exec("*")

    result = await run_suite(
        suite_of(contract, "direct"),
        harness_for=lambda _run: Harness(ScriptedProvider([write()]), store=store, policy=refusing),
    )

    [record] = result.records
    assert (record.outcome, record.error_kind, record.run_id) == ("error", "refused", None)
    assert "the criterion runs" in str(record.error)
    assert result.rows()[0].failures == {"error: refused": 1}


async def test_the_rows_export_as_json_and_csv(tmp_path: Path, store: Store) -> None:
    suite = suite_of(hello_contract(tmp_path / "ws"), "direct", "broken", repeat=2)
    result = await run_suite(suite, harness_for=scripted(store))

    exported = json.loads(result.to_json())
    table = list(csv.DictReader(io.StringIO(result.to_csv())))

    assert exported["suite"] == "hello-suite" and exported["passed"] is False
    assert [(r["provider"], r["passed"], r["pass_rate"]) for r in exported["rows"]] == [
        ("direct", 2, 1.0),
        ("broken", 0, 0.0),
    ]
    assert len(exported["runs"]) == 4
    assert exported["rows"][0]["cost"] is None  # no price table: unpriced, not zero
    assert list(table[0]) == list(CSV_COLUMNS)
    assert [(r["provider"], r["passed"], r["failures"]) for r in table] == [
        ("direct", "2", ""),
        ("broken", "0", "provider_failed: auth=2"),
    ]
    assert table[0]["cost"] == "" and table[0]["currency"] == ""


def test_a_suite_file_names_its_paths_relative_to_itself(tmp_path: Path) -> None:
    (tmp_path / "cases" / "add").mkdir(parents=True)
    (tmp_path / "suite.toml").write_text(
        'name = "mine"\nconcurrency = 2\nprices = "prices.toml"\n'
        '[[case]]\ncontract = "cases/add/contract.toml"\nrepeat = 3\n'
        '[[case]]\ncontract = "other.toml"\n'
        '[[provider]]\nspec = "replay:tapes/{case}.jsonl"\n'
        '[[provider]]\nname = "chain"\nspec = ["openai:gpt-5-mini", "anthropic:claude"]\n'
    )

    suite = Suite.from_toml(tmp_path / "suite.toml")

    assert (suite.name, suite.concurrency, suite.isolate) == ("mine", 2, True)
    assert suite.approve == "deny"
    assert suite.prices == tmp_path / "prices.toml"
    assert [(c.name, c.contract, c.repeat) for c in suite.cases] == [
        ("add", tmp_path / "cases" / "add" / "contract.toml", 3),
        ("other", tmp_path / "other.toml", 1),
    ]
    replayed, chain = suite.providers
    assert replayed.name == "replay:tapes/{case}.jsonl"
    assert replayed.specs_for(suite.cases[0]) == (f"replay:{tmp_path}/tapes/add.jsonl",)
    assert (chain.name, chain.specs) == ("chain", ("openai:gpt-5-mini", "anthropic:claude"))
    assert suite.runs == (3 + 1) * 2
    overridden = suite.with_providers(["replay:a.jsonl", "replay:b.jsonl"])
    assert [p.name for p in overridden.providers] == ["replay:a.jsonl", "replay:b.jsonl"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('nme = "x"\n[[case]]\ncontract = "c.toml"\n', "unknown key 'nme'"),
        ('[[provider]]\nspec = "openai"\n', "no cases"),
        ("[[case]]\nrepeat = 2\n", "case.0: contract: expected the path"),
        ('[[case]]\ncontract = "c.toml"\nrepeat = 0\n', "repeat: Input should be greater"),
        ('[[case]]\ncontract = "c.toml"\ncolour = 1\n', "case.0: unknown key 'colour'"),
        ('[[case]]\ncontract = "a/c.toml"\n[[case]]\ncontract = "b/c.toml"\n', "named 'c'"),
        ('[[case]]\ncontract = "c.toml"\n[[provider]]\nname = "x"\n', "provider.0: spec"),
        ('concurrency = 0\n[[case]]\ncontract = "c.toml"\n', "concurrency"),
        ('approve = "ask"\n[[case]]\ncontract = "c.toml"\n', "approve"),
        ("[[case]\n", "not valid TOML"),
    ],
)
def test_a_bad_suite_file_is_a_config_error_naming_what_is_wrong(
    tmp_path: Path, text: str, said: str
) -> None:
    (tmp_path / "suite.toml").write_text(text)

    with pytest.raises(ConfigError, match=said.replace("(", r"\(")):
        Suite.from_toml(tmp_path / "suite.toml")


async def test_a_contract_that_does_not_load_stops_the_suite_before_any_run(
    tmp_path: Path,
) -> None:
    suite = Suite(
        name="s",
        cases=(SuiteCase(contract=tmp_path / "missing.toml"),),
        providers=(SuiteProvider(name="p", specs=("openai:m",)),),
    )

    with pytest.raises(ConfigError, match=r"missing\.toml"):
        await run_suite(suite)


# -- ioh eval: replayed providers ------------------------------------------------------


class SuiteFiles:
    """A suite file over one case (``hello``), and cassettes of it: one that solves it,
    one that answers nothing (every call a ``bad_request``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        case = folder / "cases" / "hello"
        (case / "ws").mkdir(parents=True)
        (case / "ws" / "seed.txt").write_text("seed\n")
        self.contract = case / "contract.toml"
        self.contract.write_text(
            'goal = "write hello to out.txt"\nroot = "ws"\n'
            '[verify]\nkind = "workspace_file_contains"\nfile = "out.txt"\nneedle = "hello"\n'
            "[budget]\nmax_steps = 3\nmax_retries = 0\n"
        )
        self.suite = folder / "suite.toml"
        self.suite.write_text(
            'name = "hello"\n[[case]]\ncontract = "cases/hello/contract.toml"\nrepeat = 2\n'
            '[[provider]]\nspec = "replay:good.jsonl"\n'
        )
        self.good = folder / "good.jsonl"
        contract = TaskContract.from_toml(self.contract)
        asyncio.run(run(contract, Record(ScriptedProvider([write()]), self.good)))
        (case / "ws" / "out.txt").unlink()
        self.empty = folder / "empty.jsonl"
        self.empty.write_text('{"io_harness_cassette": 1, "provider": "x", "model": "m"}\n')
        self.store = folder / "runs.db"

    def eval(self, *words: str) -> int:
        return main(["eval", str(self.suite), *words, "--store", str(self.store)])


@pytest.fixture
def files(tmp_path: Path) -> SuiteFiles:
    return SuiteFiles(tmp_path)


def test_ioh_eval_prints_a_table_and_exits_0_when_every_run_passed(
    files: SuiteFiles, capsys: pytest.CaptureFixture[str]
) -> None:
    status = files.eval()
    out, err = capsys.readouterr()

    assert status == 0, out + err
    header, _rule, row, *_ = out.splitlines()
    assert header.split()[:5] == ["case", "provider", "runs", "pass", "first"]
    assert row.split()[:6] == ["hello", "replay:good.jsonl", "2", "2/2", "100%", "2/2"]
    assert "runs stored with the label eval=" in out
    assert "eval hello: 2 runs (1 case, 1 provider, repeated), 4 at once" in err
    assert err.count(" pass hello with replay:good.jsonl #") == 2


def test_two_providers_show_side_by_side_and_an_erroring_one_fails_the_eval(
    files: SuiteFiles, capsys: pytest.CaptureFixture[str]
) -> None:
    good, empty = f"replay:{files.good}", f"replay:{files.empty}"

    status = files.eval("--provider", good, "--provider", empty)
    out, err = capsys.readouterr()

    assert status == 1, out + err
    rows = [line.split() for line in out.splitlines() if line.startswith("hello ")]
    assert [(row[1], row[3]) for row in rows] == [(good, "2/2"), (empty, "0/2")]
    assert f"hello with {empty}: provider_failed: bad_request (2)" in out
    assert "holds no answer for model call 1" in err  # each failed run says why


def test_the_csv_and_json_exports_are_all_of_stdout(
    files: SuiteFiles, capsys: pytest.CaptureFixture[str]
) -> None:
    good, empty = f"replay:{files.good}", f"replay:{files.empty}"
    assert files.eval("--provider", good, "--provider", empty, "--csv") == 1
    out, err = capsys.readouterr()
    table = list(csv.DictReader(io.StringIO(out)))
    assert [(r["provider"], r["passed"], r["first_try"], r["failures"]) for r in table] == [
        (good, "2", "2", ""),
        (empty, "0", "0", "provider_failed: bad_request=2"),
    ]
    assert "[4/4]" in err

    assert files.eval("--provider", good, "--json", "--concurrency", "1") == 0
    out, err = capsys.readouterr()
    exported = json.loads(out)
    assert [(r["case"], r["provider"], r["passed"]) for r in exported["rows"]] == [
        ("hello", good, 2)
    ]
    with Store.open(files.store) as store:
        stored = store.runs(labels={"eval": exported["eval_id"]})
    assert sorted(run.labels["repeat"] for run in stored) == ["1", "2"]
    assert {run.labels["suite"] for run in stored} == {"hello"}
    assert {run.outcome for run in stored} == {"success"}


@pytest.mark.parametrize(
    ("approve", "decision", "outcome"),
    [("deny", "denied", "provider_failed"), ("approve-all", "approved", "success")],
)
def test_the_contracts_policy_governs_each_run_and_the_suite_answers_its_asks(
    files: SuiteFiles,
    capsys: pytest.CaptureFixture[str],
    approve: str,
    decision: str,
    outcome: str,
) -> None:
    with files.contract.open("a") as contract:
        contract.write(
            '[policy]\nbase = "default"\n[policy.layers.ours]\nask_write = ["out.txt"]\n'
        )
    files.suite.write_text(f'approve = "{approve}"\n{files.suite.read_text()}')

    files.eval("--json")
    runs = json.loads(capsys.readouterr().out)["runs"]

    # Denied, the model asks again, and the recording holds no answer to that.
    assert [run["outcome"] for run in runs] == [outcome, outcome]
    with Store.open(files.store) as store:
        trace = store.trace(runs[0]["run_id"])
    writes = [(p.decision, p.layer) for p in trace.permissions if p.act == "write"]
    assert writes == [(decision, "ours")]


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["--provider", "nonsense:x"], "unknown provider 'nonsense:x'"),
        (["--concurrency", "0"], "--concurrency is how many runs at once: 1 or more, not 0"),
        (["--provider", "replay:missing.jsonl"], "missing.jsonl"),
        (
            ["--provider", "replay:good.jsonl", "--provider", "replay:good.jsonl"],
            "--provider replay:good.jsonl is given twice",
        ),
    ],
)
def test_a_configuration_mistake_is_one_line_and_status_2_before_any_run(
    files: SuiteFiles, capsys: pytest.CaptureFixture[str], words: list[str], said: str
) -> None:
    status = files.eval(*words)
    out, err = capsys.readouterr()

    assert status == 2
    assert said in err and err.startswith("error: ") and "Traceback" not in err
    assert out == ""
    if files.store.exists():
        with Store.open(files.store) as store:
            assert store.runs() == []


def test_the_example_suite_runs_offline(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(IOH), "eval", str(EXAMPLE), "--json", "--store", str(tmp_path / "runs.db")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )

    assert done.returncode == 1, done.stdout + done.stderr  # hasty never gets greet right
    rows = {(r["case"], r["provider"]): r for r in json.loads(done.stdout)["rows"]}
    assert {key: (r["passed"], r["first_try"]) for key, r in rows.items()} == {
        ("add", "careful"): (2, 2),
        ("add", "hasty"): (2, 0),
        ("greet", "careful"): (2, 2),
        ("greet", "hasty"): (0, 0),
    }
    assert rows["greet", "hasty"]["failures"] == {"step_cap_reached": 2}
    assert rows["greet", "hasty"]["median_steps"] == 4
    assert "[8/8]" in done.stderr


def test_ctrl_c_stops_the_eval_keeping_its_runs_and_removing_their_copies(
    files: SuiteFiles,
) -> None:
    asked = threading.Event()

    def hang(_request: object) -> Reply:
        asked.set()
        return Reply(delay=WAIT * 2)  # the model answers for a long time

    with LoopbackServer(hang) as server:
        process = subprocess.Popen(
            [
                str(IOH), "eval", str(files.suite), "--store", str(files.store),
                "--provider", f"compatible:{server.url}/v1#m",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=files.folder,
            text=True,
        )  # fmt: skip
        try:
            assert asked.wait(WAIT)
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=WAIT)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(WAIT)

    assert process.returncode == 130, out + err
    assert "eval stopped: 0 of 2 runs finished" in err
    assert "Traceback" not in err
    left = list(Path(tempfile.gettempdir()).glob(f"ioh-eval-{process.pid}-*"))
    assert left == []
    with Store.open(files.store) as store:
        assert {(run.status, run.steps) for run in store.runs()} == {("running", 0)}
    assert os.path.exists(files.contract)


def test_a_run_that_could_not_run_leaves_the_rows_currency_and_steps_alone() -> None:
    common = {"case": "c", "provider": "p", "first_try": False, "unpriced_calls": 0}
    ran = RunRecord(
        **common, repeat=1, run_id="r1", outcome="success", steps=2, tokens=50,
        cost_micros=1_500_000, currency="USD", seconds=1.0,
    )  # fmt: skip
    raised = RunRecord(
        **common, repeat=2, run_id=None, outcome="error", steps=0, tokens=0,
        cost_micros=0, currency=None, seconds=0.1, error_kind="refused",
    )  # fmt: skip

    row = ResultRow.of("c", "p", [ran, raised])

    assert (row.runs, row.passed) == (2, 1)
    assert row.currency == "USD" and row.cost == Decimal("1.5")
    assert row.median_steps == 2
    assert row.failures == {"error: refused": 1}
