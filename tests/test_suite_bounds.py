"""No test of this suite waits without a bound: pytest-timeout ends one that hangs."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_every_test_has_a_bound_from_the_suites_configuration() -> None:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    assert 0 < int(options["ini_options"]["timeout"]) <= 300


def test_a_test_that_hangs_fails_at_the_bound_naming_where_it_waited(tmp_path: Path) -> None:
    (tmp_path / "test_hangs.py").write_text(
        "import socket\n\n"
        "def test_waits_for_a_peer_that_never_comes():\n"
        "    listener = socket.create_server(('127.0.0.1', 0))\n"
        "    listener.accept()\n"
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\ntimeout = 2\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 1, done.stdout[-2000:]
    assert "Timeout" in done.stdout and "listener.accept()" in done.stdout, done.stdout[-2000:]
