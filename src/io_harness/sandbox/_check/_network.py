"""Cases of the network: under ``deny`` nothing is reached; under ``allow_list``, what is let."""

from __future__ import annotations

import asyncio
import socket
import textwrap
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from io_harness.sandbox._check._trial import CaseSkipped, Trial, expect, named
from io_harness.sandbox._types import SandboxConfig

_DENIES = "does not deny the network"


@asynccontextmanager
async def _loopback_server() -> AsyncIterator[tuple[int, list[str]]]:
    """A TCP server on the host's loopback that records each connection it accepts."""
    seen: list[str] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append("connected")
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], seen
    finally:
        server.close()
        await server.wait_closed()


async def a_loopback_server_on_the_host_is_unreachable(trial: Trial) -> None:
    trial.needs(trial.promises.denies_network, _DENIES)
    async with _loopback_server() as (port, seen):
        outcome = await trial.python_run(
            f"""
            import socket
            socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
            print("reached")
            """
        )
    expect(outcome.exit_code != 0, "the host's loopback server was reached", outcome)
    expect("reached" not in outcome.stdout and seen == [], "a connection reached the host")


async def dns_fails(trial: Trial) -> None:
    trial.needs(trial.promises.denies_network, _DENIES)
    outcome = await trial.python_run(
        """
        import socket
        socket.getaddrinfo("pypi.org", 443)
        print("resolved")
        """
    )
    expect(outcome.exit_code != 0, "a name was resolved under network='deny'", outcome)
    expect("resolved" not in outcome.stdout, "a name was resolved under network='deny'")


async def an_abstract_unix_socket_on_the_host_is_unreachable(trial: Trial) -> None:
    # A sandbox sharing the host's network namespace still must keep the command out of
    # the abstract sockets daemons listen on.
    trial.needs(trial.promises.denies_network, _DENIES)
    if not hasattr(socket, "AF_UNIX"):
        raise CaseSkipped("this platform has no Unix sockets")
    name = f"ioh-abstract-{uuid.uuid4().hex}"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind("\0" + name)
    except OSError as exc:
        server.close()
        raise CaseSkipped(f"this platform has no abstract sockets ({exc})") from None
    server.listen()
    try:
        outcome = await trial.python_run(
            f"""
            import socket
            client = socket.socket(socket.AF_UNIX)
            try:
                client.connect("\\0{name}")
            except OSError as exc:
                print("refused", exc.errno)
            else:
                print("reached")
            """
        )
    finally:
        server.close()
    expect(outcome.exit_code == 0, "the probe did not run", outcome)
    expect(outcome.stdout.startswith("refused"), "an abstract socket was reached", outcome)


_THROUGH_THE_PROXY = """
    import os, socket
    def connect(target):
        client = socket.socket(socket.AF_UNIX)
        client.connect(os.environ["IOH_PROXY_SOCKET"])
        client.sendall(f"CONNECT {{target}} HTTP/1.1\\r\\n\\r\\n".encode())
        answer = client.recv(200).decode().splitlines()[0]
        client.close()
        return answer
    print(connect("127.0.0.1:{port}"))
    print(connect("127.0.0.1:{other}"))
    print(connect("pypi.org:443"))
    """


async def the_allow_list_proxy_lets_through_only_what_is_allowed(trial: Trial) -> None:
    # The command reaches the proxy through the Unix socket IOH_PROXY_SOCKET names,
    # with HTTP CONNECT; each target is asked of net_check.
    trial.needs(trial.promises.allow_list, "has no allow-list proxy")
    asked: list[str] = []
    async with _loopback_server() as (port, seen):

        async def net_check(host: str, wanted: int) -> bool:
            asked.append(f"{host}:{wanted}")
            return wanted == port

        other = port + 1 if port < 65535 else port - 1
        code = textwrap.dedent(_THROUGH_THE_PROXY.format(port=port, other=other))
        sandbox = trial.factory(SandboxConfig(network="allow_list", allow_hosts=("127.0.0.1",)))
        argv = [trial.python, "-c", code]
        outcome = await sandbox.run(argv, workdir=trial.workspace, net_check=net_check)
    expect(outcome.exit_code == 0, "the proxy could not be used", outcome)
    answers = outcome.stdout.splitlines()
    expect(len(answers) == 3, "the proxy did not answer three times", outcome)
    allowed, other_port, other_host = answers
    expect(" 200 " in allowed, f"the allowed target was answered {allowed!r}")
    expect(" 403 " in other_port, f"a port net_check refused was answered {other_port!r}")
    expect(" 403 " in other_host, f"a host off the list was answered {other_host!r}")
    expect(seen == ["connected"], f"the loopback server saw {seen}")
    nets = [event.detail.get("allowed") for event in outcome.events if event.kind == "net"]
    expect(nets == [True, False, False], f"the net events' decisions are {nets}")


CASES = named(
    a_loopback_server_on_the_host_is_unreachable,
    dns_fails,
    an_abstract_unix_socket_on_the_host_is_unreachable,
    the_allow_list_proxy_lets_through_only_what_is_allowed,
)
