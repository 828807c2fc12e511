"""A harness in a private checkout: what a command needs may live under folders only
their owner may enter (``mktemp -d`` makes them 0700, as a CI workspace often is).

As root the harness runs commands as ``nobody``, who cannot enter such a folder; every
folder on the way to what a command needs (its program, by its name and where a link
leads, the interpreter's prefix, ``PATH``, the workdir, readable paths) must be let
through, wherever it is, and nothing else of it shown.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import tempfile
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from io_harness.sandbox import BubblewrapSandbox, FloorSandbox, LandlockSandbox, NamespacesSandbox

BACKENDS: dict[
    str, type[BubblewrapSandbox | LandlockSandbox | NamespacesSandbox | FloorSandbox]
] = {
    "bubblewrap": BubblewrapSandbox,
    "landlock": LandlockSandbox,
    "namespaces": NamespacesSandbox,
    "floor": FloorSandbox,
}

SRC = Path(__file__).parent.parent / "src"

COMMANDS = """
import asyncio, json, os, sys
from pathlib import Path
from io_harness import sandbox

async def main(name, workdir, tool, readable):
    backend = getattr(sandbox, name)(sandbox.SandboxConfig(accept_floor=True))
    python = sys.executable
    around = str(Path(workdir).parent)
    said = {}
    for label, argv, extra in (
        ("interpreter", [python, "-c", "import sys; print(sys.prefix)"], ()),
        ("linked program", [tool], ()),
        ("program on PATH", ["say-on-path"], ()),
        ("readable", [python, "-c", f"print(open({readable!r}).read())"], [Path(readable).parent]),
        ("workdir", [python, "-c", "open('made', 'w').write('x'); print('made')"], ()),
        ("the rest hidden", [python, "-c", f"import os; print(os.listdir({around!r}))"], ()),
    ):
        outcome = await backend.run(argv, workdir=Path(workdir), readable=extra)
        said[label] = [outcome.exit_code, outcome.stdout.strip(), outcome.stderr.strip()[-300:]]
    print(json.dumps(said))

asyncio.run(main(*sys.argv[1:]))
"""


def _private() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="ioh-private-"))
    assert folder.stat().st_mode & 0o777 == 0o700
    return folder


@pytest.fixture
def checkout() -> Iterator[Path]:
    """A private folder holding a virtualenv whose Python sees this environment's packages."""
    folder = _private()
    try:
        env = folder / "clone" / ".venv"
        venv.EnvBuilder(with_pip=False, symlinks=True).create(env)
        found = subprocess.run(
            [str(env / "bin" / "python"), "-c", "import site; print(site.getsitepackages()[0])"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.strip()
        (Path(found) / "outer.pth").write_text(f"{SRC}\n{site.getsitepackages()[0]}\n")
        yield folder
    finally:
        subprocess.run(["rm", "-rf", str(folder)], check=False, timeout=60)


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_a_harness_in_a_private_folder_runs_what_its_commands_need(
    checkout: Path, name: str
) -> None:
    ok, reason = BACKENDS[name].available()
    if not ok:
        pytest.skip(f"{name} is not available here: {reason}")
    workdir = checkout / "clone" / "work"
    workdir.mkdir()
    (checkout / "secret.txt").write_text("not for commands\n")
    tools = _private()  # a second private folder: a program there, reached through a link
    (tools / "bin").mkdir()
    real = tools / "bin" / "say-hello"
    real.write_text("#!/bin/sh\necho hello\n")
    real.chmod(0o755)
    (checkout / "clone" / "tool").symlink_to(real)
    (tools / "bin" / "say-on-path").symlink_to(real)
    readable = _private() / "notes.txt"
    readable.write_text("readable notes\n")
    python = checkout / "clone" / ".venv" / "bin" / "python"
    env = {**os.environ, "PATH": f"{tools / 'bin'}:{os.environ.get('PATH', os.defpath)}"}
    try:
        done = subprocess.run(
            [
                str(python),
                "-c",
                COMMANDS,
                BACKENDS[name].__name__,
                str(workdir),
                str(checkout / "clone" / "tool"),
                str(readable),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            check=False,
        )
    finally:
        subprocess.run(["rm", "-rf", str(tools), str(readable.parent)], check=False, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    said = json.loads(done.stdout)
    assert said["interpreter"][:2] == [0, str(checkout / "clone" / ".venv")], said
    assert said["linked program"][:2] == [0, "hello"], said
    assert said["program on PATH"][:2] == [0, "hello"], said
    assert said["readable"][:2] == [0, "readable notes"], said
    assert said["workdir"][:2] == [0, "made"], said
    assert (workdir / "made").read_text() == "x"
    if name != "floor" and os.geteuid() == 0:
        # Only the way in is shown: the private folder's other files are not.
        assert said["the rest hidden"][0] == 0, said
        assert "secret.txt" not in said["the rest hidden"][1], said


@pytest.mark.parametrize("name", sorted(BACKENDS))
async def test_a_store_in_a_private_folder_outside_the_workspace_lets_commands_run(
    name: str, tmp_path: Path
) -> None:
    # `.ioh/runs.db` in the folder ioh runs from is 0700: as nobody, bubblewrap could not
    # reach it to cover it, and every command of the run failed to start.
    from io_harness import Store
    from io_harness.sandbox import SandboxConfig
    from io_harness.sandbox._shield import keeping_private

    backend = BACKENDS[name]
    ok, reason = backend.available()
    if not ok:
        pytest.skip(f"{name} is not available here: {reason}")
    private = Path(tempfile.mkdtemp(prefix="ioh-private-", dir="/var/tmp"))
    try:
        store = Store.open(private / ".ioh" / "runs.db")
        with store, keeping_private(store.files()):
            outcome = await backend(SandboxConfig(accept_floor=True)).run(
                ["sh", "-c", "echo ran"], workdir=tmp_path
            )
    finally:
        shutil.rmtree(private, ignore_errors=True)
    assert (outcome.exit_code, outcome.stdout) == (0, "ran\n"), outcome.stderr
