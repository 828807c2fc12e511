"""Subjects that try to defeat ``PytestPasses``: each must fail the gate; an honest one passes.

Every cheating subject's ``add`` is wrong (or, for the caps, right but the
subject never lets the tests finish), so the criterion tests fail unless the
cheat works. The cheats that do not need the OS sandbox run twice: with no
sandbox, to show the harness's runner holds by itself, and in the sandbox.
The caps (a loop, a fork bomb, a memory hog, a network call, a flood of
output) run in the sandbox only.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import py_compile
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from io_harness import PytestPasses
from io_harness.sandbox import Sandbox, SandboxConfig, SandboxError, SandboxLimits, select
from io_harness.verify import Subject, VerificationResult

CRITERION = textwrap.dedent(
    """
    import calc

    def test_adds():
        assert calc.add(2, 3) == 5

    class TestSigns:
        def test_negative(self):
            assert calc.add(-1, -1) == -2
    """
)
NODEIDS = ["test_criterion.py::test_adds", "test_criterion.py::TestSigns::test_negative"]

RIGHT = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"

LIMITS = SandboxLimits(
    cpu_seconds=5, wall_seconds=20, memory_bytes=256 << 20, processes=64, output_bytes=1 << 20
)

# A plugin that turns every test report into a pass: what each configuration
# file below tries to load into the criterion's pytest session.
EVIL_PLUGIN = """
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    report.outcome = "passed"
    return report
"""

# Code that makes every test "pass" without running it, if it runs before the
# runner looks (as sitecustomize, usercustomize or a .pth file would).
RUNTEST_NOOP = "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n"

FORGED_BODIES = f"""
import json
def bodies(start):
    events = [dict(event="collected", nodeids={NODEIDS!r})]
    for nodeid in {NODEIDS!r}:
        for when in ("setup", "call", "teardown"):
            events.append(dict(event="report", nodeid=nodeid, when=when, outcome="passed"))
    events += [dict(event="finished", exitstatus=0), dict(event="exit", status=0)]
    return [
        json.dumps(dict(e, seq=start + n, pid=os.getpid()), sort_keys=True).encode()
        for n, e in enumerate(events)
    ]
"""

FIND_RECORD = """
import os, sys
def record_files():
    found = {arg for arg in sys.argv if arg.endswith(".jsonl")}
    found.update(v for k, v in os.environ.items() if k.startswith("IOH"))
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.endswith(".jsonl"):
            found.add(target)
    return found
"""

WRITE_THROUGH_THE_SIGNER = f"""
import gc
record = next(o for o in gc.get_objects() if type(o).__name__ == "Record")
record.write("collected", nodeids={NODEIDS!r})
for nodeid in {NODEIDS!r}:
    for when in ("setup", "call", "teardown"):
        record.write("report", nodeid=nodeid, when=when, outcome="passed")
record.write("finished", exitstatus=0)
record.write("exit", status=0)
"""


@dataclass(frozen=True)
class Cheat:
    """A subject: its workspace files, and the words the verdict must hold (if fixed)."""

    files: dict[str, str]
    reason: str = ""
    criterion: str = CRITERION
    extra: dict[str, str] = field(default_factory=dict)


CHEATS: dict[str, Cheat] = {
    "sys.exit(0) at import": Cheat({"calc.py": "import sys\nsys.exit(0)\n" + WRONG}),
    "os._exit(0) at import": Cheat(
        {"calc.py": "import os\nos._exit(0)\n" + WRONG}, reason="ended before it finished"
    ),
    "an atexit handler forcing exit status 0": Cheat(
        {"calc.py": "import atexit, os\natexit.register(lambda: os._exit(0))\n" + WRONG},
        reason="failed in call",
    ),
    "a module-level skip": Cheat(
        {"calc.py": "import pytest\npytest.skip('no', allow_module_level=True)\n" + WRONG},
        reason="test_criterion.py: skipped as it was collected",
    ),
    "SystemExit(0) inside a test": Cheat(
        {"calc.py": "def add(a, b):\n    raise SystemExit(0)\n"}, reason="failed in call"
    ),
    "KeyboardInterrupt inside a test": Cheat(
        {"calc.py": "def add(a, b):\n    raise KeyboardInterrupt\n"}
    ),
    "a conftest.py rewriting reports": Cheat(
        {"calc.py": WRONG, "conftest.py": EVIL_PLUGIN}, reason="failed in call"
    ),
    "a pytest.ini loading a plugin": Cheat(
        {"calc.py": WRONG, "evil.py": EVIL_PLUGIN, "pytest.ini": "[pytest]\naddopts = -p evil\n"},
        reason="failed in call",
    ),
    "a pyproject.toml pytest section loading a plugin": Cheat(
        {
            "calc.py": WRONG,
            "evil.py": EVIL_PLUGIN,
            "pyproject.toml": '[tool.pytest.ini_options]\naddopts = "-p evil"\n',
        },
        reason="failed in call",
    ),
    "a setup.cfg pytest section loading a plugin": Cheat(
        {
            "calc.py": WRONG,
            "evil.py": EVIL_PLUGIN,
            "setup.cfg": "[tool:pytest]\naddopts = -p evil\n",
        },
        reason="failed in call",
    ),
    "a sitecustomize.py": Cheat(
        {"calc.py": WRONG, "sitecustomize.py": RUNTEST_NOOP}, reason="failed in call"
    ),
    "a usercustomize.py": Cheat(
        {"calc.py": WRONG, "usercustomize.py": RUNTEST_NOOP}, reason="failed in call"
    ),
    "a .pth file": Cheat(
        {"calc.py": WRONG, "evil.pth": "import evil_payload\n", "evil_payload.py": RUNTEST_NOOP},
        reason="failed in call",
    ),
    "deleting the criterion file at import": Cheat(
        {
            "calc.py": WRONG
            + "import os, sys\ntry:\n    os.remove(sys.modules['test_criterion'].__file__)\n"
            "except OSError:\n    pass\n"
        }
    ),
    "rewriting the criterion file at import": Cheat(
        {
            "calc.py": WRONG + "import sys\ntry:\n"
            "    with open(sys.modules['test_criterion'].__file__, 'w') as f:\n"
            "        f.write('def test_adds():\\n    pass\\n')\n"
            "except OSError:\n    pass\n"
        }
    ),
    "appending forged lines to the record": Cheat(
        {
            "calc.py": WRONG + FIND_RECORD + FORGED_BODIES + "for path in record_files():\n"
            "    lines = open(path, 'rb').read().splitlines()\n"
            "    mac = lines[0].split(b' ')[0] if lines else b'0' * 64\n"
            "    with open(path, 'ab') as f:\n"
            "        for body in bodies(len(lines)):\n"
            "            f.write(mac + b' ' + body + b'\\n')\n"
            "os._exit(0)\n"
        },
        reason="is not signed with this run's key",
    ),
    "replaying the record's own signed lines": Cheat(
        {
            "calc.py": WRONG + FIND_RECORD + "for path in record_files():\n"
            "    lines = open(path, 'rb').read()\n"
            "    open(path, 'ab').write(lines * 3)\n"
            "os._exit(0)\n"
        },
        reason="a gap or a repeat",
    ),
    "replacing _pytest.runner.pytest_runtest_call": Cheat(
        {"calc.py": WRONG + "import _pytest.runner\n_pytest.runner.pytest_runtest_call = print\n"},
        reason="_pytest.runner.pytest_runtest_call was replaced",
    ),
    "replacing Function.runtest": Cheat(
        {"calc.py": WRONG + RUNTEST_NOOP}, reason="Function.runtest was replaced"
    ),
    "forcing TestReport's outcome": Cheat(
        {
            "calc.py": WRONG + "import _pytest.reports\n"
            "made = _pytest.reports.TestReport.from_item_and_call.__func__\n"
            "def passing(cls, item, call):\n"
            "    report = made(cls, item, call)\n"
            "    report.outcome = 'passed'\n"
            "    return report\n"
            "_pytest.reports.TestReport.from_item_and_call = classmethod(passing)\n"
        },
        reason="TestReport.from_item_and_call was replaced",
    ),
    "swapping the code of pytest_pyfunc_call": Cheat(
        {
            "calc.py": WRONG + "import _pytest.python\n"
            "_pytest.python.pytest_pyfunc_call.__code__ = (lambda pyfuncitem: True).__code__\n"
        },
        reason="_pytest.python.pytest_pyfunc_call was replaced",
    ),
    "registering a plugin from the subject": Cheat(
        {
            "calc.py": WRONG + "import gc, _pytest.config, evil\n"
            "config = next(o for o in gc.get_objects() if isinstance(o, _pytest.config.Config))\n"
            "config.pluginmanager.register(evil)\n",
            "evil.py": EVIL_PLUGIN,
        },
        reason="hook pytest_runtest_makereport was replaced",
    ),
    "replacing the runner's own helpers": Cheat(
        {
            "calc.py": WRONG + RUNTEST_NOOP + "import sys\n"
            "recording, guard = sys.modules['ioh_record'], sys.modules['ioh_guard']\n"
            "guard.Guard.changes = lambda self, item=None: []\n"
            "write = recording.Record.write\n"
            "recording.Record.write = lambda self, event, **f: write(\n"
            "    self, event, **{k: 'passed' if v == 'failed' else v for k, v in f.items()})\n"
        },
        reason="ioh_guard.Guard.changes was replaced",
    ),
    "replacing the criterion's own helper": Cheat(
        {"calc.py": WRONG + "import sys\nsys.modules['test_criterion'].expected = calc_expected\n"},
        criterion=(
            "def expected(a, b):\n    return a + b\n\nimport calc\n\n"
            "def test_adds():\n    assert calc.add(2, 3) == expected(2, 3)\n"
        ),
        reason="the criterion's expected was replaced",
        extra={"prefix": "def calc_expected(a, b):\n    return a - b\n"},
    ),
    "replacing a criterion test class": Cheat(
        {
            "calc.py": WRONG + "import sys\n"
            "class TestSigns:\n    def test_negative(self):\n        pass\n"
            "sys.modules['test_criterion'].TestSigns = TestSigns\n"
        },
        criterion=(
            "class TestSigns:\n    def test_negative(self):\n"
            "        assert calc.add(-1, -1) == -2\n\nimport calc\n"
        ),
        reason="the criterion's TestSigns.test_negative",
    ),
    "standing in for the criterion's module": Cheat(
        {
            "calc.py": WRONG + "import sys, types\n"
            "fake = types.ModuleType('test_criterion')\n"
            "exec('def test_adds():\\n    pass\\nclass TestSigns:\\n"
            "    def test_negative(self):\\n        pass\\n', fake.__dict__)\n"
            "fake.__file__ = sys.modules['test_criterion'].__file__\n"
            "sys.modules['test_criterion'] = fake\n"
        },
        reason="the criterion's test_adds was replaced",
    ),
    "forking so a child reports": Cheat(
        {
            "calc.py": WRONG
            + "import os\npid = os.fork()\nif pid == 0:\n"
            + textwrap.indent(WRITE_THROUGH_THE_SIGNER, "    ")
            + "    os._exit(0)\nos.waitpid(pid, 0)\nos._exit(0)\n"
        },
        reason="written by another process",
    ),
}


def contained() -> Sandbox:
    """The sandbox the caps tests need: these limits, the network denied."""
    try:
        return select(SandboxConfig(limits=LIMITS))
    except SandboxError as exc:
        pytest.skip(f"no sandbox on this machine gives these caps: {exc}")


def make_subject(root: Path, cheat: Cheat) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in cheat.files.items():
        prefix = cheat.extra.get("prefix", "") if name == "calc.py" else ""
        (root / name).write_text(prefix + text)


async def check(
    root: Path, sandbox: Sandbox | None, criterion: str = CRITERION
) -> VerificationResult:
    return await PytestPasses(criterion, timeout=60).check(
        Subject(mode="workspace", root=root, sandbox=sandbox)
    )


@pytest.fixture(params=["no sandbox", "sandbox"])
def isolation(request: pytest.FixtureRequest) -> Sandbox | None:
    return None if request.param == "no sandbox" else contained()


async def test_an_honest_subject_passes(tmp_path: Path, isolation: Sandbox | None) -> None:
    make_subject(tmp_path, Cheat({"calc.py": RIGHT}))

    result = await check(tmp_path, isolation)

    assert result.passed, result.output
    assert result.summary == "all 2 criterion tests passed"


RICH_CRITERION = textwrap.dedent(
    """
    import logging
    import subprocess
    import sys
    import warnings

    import pytest

    import calc

    LIMIT = 10


    def helper(x):
        return calc.add(x, x)


    @pytest.fixture
    def base():
        return 40


    @pytest.mark.parametrize(("a", "b", "total"), [(1, 2, 3), (5, 5, 10)])
    def test_parametrized(a, b, total):
        assert calc.add(a, b) == total


    def test_fixtures(tmp_path, capsys, monkeypatch, caplog, base):
        monkeypatch.setenv("CALC_MODE", "fast")
        monkeypatch.setattr(calc, "add", lambda a, b: a + b + 0)
        (tmp_path / "x.txt").write_text("1")
        print("hello")
        logging.getLogger("calc").warning("careful")
        assert capsys.readouterr().out == "hello\\n"
        assert "careful" in caplog.text
        assert calc.add(base, 2) == 42


    def test_raises_approx_and_warns():
        with pytest.raises(TypeError):
            calc.add(1, None)
        assert calc.add(0.1, 0.2) == pytest.approx(0.3)
        with pytest.warns(UserWarning):
            warnings.warn("w", UserWarning)


    def test_helper_and_a_subprocess():
        assert helper(3) == 6
        out = subprocess.run([sys.executable, "-c", "print(2)"], capture_output=True, text=True)
        assert out.stdout.strip() == "2"


    @pytest.mark.usefixtures("base")
    class TestClass:
        def setup_method(self):
            self.offset = 1

        def test_method(self):
            assert calc.add(self.offset, 1) == 2

        @pytest.mark.skipif(sys.version_info < (3, 8), reason="old")
        def test_marked(self):
            assert calc.add(LIMIT, 0) == LIMIT
    """
)


async def test_the_guard_leaves_a_criterion_using_pytests_features_alone(
    tmp_path: Path, isolation: Sandbox | None
) -> None:
    # Fixtures, monkeypatch, capture, logging, parametrize, marks, approx, raises,
    # warns and subprocesses change nothing the guard watches.
    make_subject(tmp_path, Cheat({"calc.py": RIGHT}))

    result = await check(tmp_path, isolation, RICH_CRITERION)

    assert result.passed, result.output
    assert result.summary == "all 7 criterion tests passed"


async def test_a_wrong_subject_fails_naming_its_tests(
    tmp_path: Path, isolation: Sandbox | None
) -> None:
    make_subject(tmp_path, Cheat({"calc.py": WRONG}))

    result = await check(tmp_path, isolation)

    assert not result.passed
    assert "test_adds: failed in call" in result.output


@pytest.mark.parametrize("name", list(CHEATS))
async def test_a_cheating_subject_fails_the_gate(
    name: str, tmp_path: Path, isolation: Sandbox | None
) -> None:
    cheat = CHEATS[name]
    make_subject(tmp_path, cheat)

    result = await check(tmp_path, isolation, cheat.criterion)

    assert not result.passed, f"{name} passed the gate:\n{result.output}"
    assert cheat.reason in result.output, result.output


@pytest.mark.parametrize(
    "name",
    [
        "a conftest.py rewriting reports",
        "a pytest.ini loading a plugin",
        "a pyproject.toml pytest section loading a plugin",
        "a setup.cfg pytest section loading a plugin",
    ],
)
def test_each_configuration_cheat_would_pass_plain_pytest(name: str, tmp_path: Path) -> None:
    # The files are potent: run as pytest usually runs, they make the failing tests pass.
    make_subject(tmp_path, CHEATS[name])
    (tmp_path / "test_criterion.py").write_text(CRITERION)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_criterion.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.xfail(
    strict=True,
    reason="code in the runner's process can use the runner's own signer "
    "(docs/verification.md: what a pass does not prove)",
)
async def test_in_process_code_that_writes_through_the_runners_signer(tmp_path: Path) -> None:
    make_subject(
        tmp_path, Cheat({"calc.py": WRONG + WRITE_THROUGH_THE_SIGNER + "import os\nos._exit(0)\n"})
    )

    result = await check(tmp_path, contained())

    assert not result.passed, result.output


CAPS = {
    "an infinite loop": ("while True:\n    pass\n", "cpu"),
    "a fork bomb": (
        "import os, time\nwhile True:\n    try:\n        os.fork()\n"
        "    except OSError:\n        time.sleep(0.01)\n",
        "processes",
    ),
    "a memory hog": ("blocks = []\nwhile True:\n    blocks.append(b'x' * (16 << 20))\n", "memory"),
    "flooding output": (
        "import os, stat\n"
        "pipes = [fd for fd in range(1, 64)\n"
        "         if os.path.exists(f'/proc/self/fd/{fd}')\n"
        "         and stat.S_ISFIFO(os.fstat(fd).st_mode)]\n"
        "chunk = b'x' * 65536\n"
        "while True:\n"
        "    for fd in pipes:\n"
        "        try:\n            os.write(fd, chunk)\n"
        "        except OSError:\n            pass\n",
        "output",
    ),
}


@pytest.mark.parametrize("name", list(CAPS))
async def test_a_subject_that_exhausts_a_cap_is_killed_and_fails(name: str, tmp_path: Path) -> None:
    code, cap = CAPS[name]
    make_subject(tmp_path, Cheat({"calc.py": RIGHT + code}))

    result = await check(tmp_path, contained())

    assert not result.passed, result.output
    assert f"killed at the {cap} cap" in result.summary, result.output


NETWORK_SUBJECT = """
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
    reached = True
except OSError:
    reached = False

def add(a, b):
    return a + b if reached else a - b
"""


async def test_a_subject_cannot_reach_a_server_on_the_host(tmp_path: Path) -> None:
    connections: list[str] = []

    async def note(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append("connected")
        writer.close()

    server = await asyncio.start_server(note, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    make_subject(tmp_path / "ws", Cheat({"calc.py": NETWORK_SUBJECT.format(port=port)}))
    try:
        contained_result = await check(tmp_path / "ws", contained())
        reached_in_sandbox = list(connections)
        # Without the sandbox the same subject reaches the server and passes, so the
        # check above would notice a sandbox that let the connection through.
        direct_result = await check(tmp_path / "ws", None)
    finally:
        server.close()
        await server.wait_closed()

    assert not contained_result.passed, contained_result.output
    assert reached_in_sandbox == []
    assert direct_result.passed, direct_result.output
    assert connections == ["connected"]


@pytest.mark.parametrize(
    "invalidation",
    [py_compile.PycInvalidationMode.TIMESTAMP, py_compile.PycInvalidationMode.UNCHECKED_HASH],
)
async def test_bytecode_the_subject_left_in_pycache_is_not_what_is_tested(
    invalidation: py_compile.PycInvalidationMode, tmp_path: Path, isolation: Sandbox | None
) -> None:
    # The right code's bytecode, stamped with the wrong source's time and size (or never
    # checked against its source), would be imported in place of the source on disk.
    source = tmp_path / "calc.py"
    source.write_text(RIGHT)
    stamp = source.stat().st_mtime_ns
    py_compile.compile(
        str(source),
        cfile=importlib.util.cache_from_source(str(source)),
        invalidation_mode=invalidation,
    )
    source.write_text(WRONG)  # the same size as RIGHT
    os.utime(source, ns=(stamp, stamp))

    result = await check(tmp_path, isolation)

    assert not result.passed, result.output
    assert "test_adds: failed in call" in result.output
