"""Host Unix sockets: a sandboxed command reaches none outside its folders unless allowed.

A daemon listens on a Unix socket under /var/tmp (outside /run and /tmp, which
bubblewrap makes private anyway); a command in the sandbox tries to connect.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from io_harness.sandbox import (
    BubblewrapSandbox,
    LandlockSandbox,
    NamespacesSandbox,
    SandboxConfig,
)
from io_harness.sandbox._linux import NOBODY

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap is Linux's")

CONNECT = (
    "import socket, sys\n"
    "s = socket.socket(socket.AF_UNIX)\n"
    "try:\n"
    "    s.connect(sys.argv[1])\n"
    "except OSError as exc:\n"
    "    print('refused', exc.errno)\n"
    "else:\n"
    "    print('connected')\n"
)


@pytest.fixture
def daemon() -> Iterator[Path]:
    """A host daemon's socket any user may connect to, so only masking keeps one out."""
    path = Path("/var/tmp") / f"ioh-test-{uuid.uuid4().hex}.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    path.chmod(0o777)
    listener.listen()
    try:
        yield path
    finally:
        listener.close()
        path.unlink(missing_ok=True)


Backend = type[BubblewrapSandbox | NamespacesSandbox | LandlockSandbox]
BACKENDS: dict[str, Backend] = {
    "bubblewrap": BubblewrapSandbox,
    "namespaces": NamespacesSandbox,
    "landlock": LandlockSandbox,
}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> Backend:
    name: str = request.param
    chosen = BACKENDS[name]
    ok, reason = chosen.available()
    if not ok:
        pytest.skip(f"{name} is not available here: {reason}")
    if name != "bubblewrap" and os.geteuid() != 0:
        pytest.skip(
            f"{name} masks the host's sockets only when the harness runs as root (its "
            "launcher makes the mounts before it becomes nobody); as a user, a command "
            "reaches the sockets that user may"
        )
    return chosen


async def _connect(
    tmp_path: Path,
    path: Path,
    config: SandboxConfig,
    backend: Backend = BubblewrapSandbox,
) -> str:
    outcome = await backend(config).run(
        [sys.executable, "-c", CONNECT, str(path)], workdir=tmp_path
    )
    assert outcome.exit_code == 0, outcome.stderr
    return outcome.stdout.strip()


async def test_a_host_daemons_socket_is_hidden_from_a_command(
    tmp_path: Path, daemon: Path, backend: Backend
) -> None:
    said = await _connect(tmp_path, daemon, SandboxConfig(), backend)
    assert said.startswith("refused"), said


async def test_a_socket_the_configuration_allows_is_reached(
    tmp_path: Path, daemon: Path, backend: Backend
) -> None:
    allowed = SandboxConfig(allow_unix_sockets=(str(daemon),))
    assert await _connect(tmp_path, daemon, allowed, backend) == "connected"


async def test_an_open_network_leaves_the_hosts_sockets_as_they_are(
    tmp_path: Path, daemon: Path, backend: Backend
) -> None:
    assert await _connect(tmp_path, daemon, SandboxConfig(network="open"), backend) == ("connected")


@pytest.mark.skipif(os.geteuid() != 0, reason="the harness runs as root only in this case")
async def test_an_allowed_socket_only_root_may_use_is_lent_to_the_command(
    tmp_path: Path, daemon: Path
) -> None:
    daemon.chmod(0o755)  # root's alone: the command, nobody, is lent it
    allowed = SandboxConfig(allow_unix_sockets=(str(daemon),))
    assert await _connect(tmp_path, daemon, allowed) == "connected"
    assert (await _connect(tmp_path, daemon, SandboxConfig(network="open"))).startswith("refused")


@pytest.mark.skipif(os.geteuid() != 0, reason="the harness runs as root only in this case")
async def test_a_root_harness_command_is_not_root_to_a_daemon_that_checks_its_peer(
    tmp_path: Path,
) -> None:
    """A daemon reading the peer's credentials sees nobody, never the host's root."""
    path = tmp_path / "peer.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()
    listener.setblocking(False)
    try:
        connecting = asyncio.create_task(_connect(tmp_path, path, SandboxConfig()))
        accepting = asyncio.create_task(asyncio.get_running_loop().sock_accept(listener))
        # A command that fails never connects: the wait ends with it, or at a bound.
        await asyncio.wait({connecting, accepting}, timeout=60, return_when="FIRST_COMPLETED")
        if not accepting.done():
            accepting.cancel()
            said = connecting.result() if connecting.done() else "nothing within 60 s"
            connecting.cancel()
            pytest.fail(f"the daemon was never connected to: the command said {said!r}")
        accepted, _ = accepting.result()
        credentials = accepted.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
        )
        _, uid, gid = struct.unpack("3i", credentials)
        accepted.close()
        assert await connecting == "connected"
    finally:
        listener.close()
    assert (uid, gid) == (NOBODY, NOBODY)
