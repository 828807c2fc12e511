"""The network allow-list proxy: CONNECT over a Unix socket to a loopback echo server."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import stat
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from io_harness.errors import ConfigError
from io_harness.policy import Act, Effect, Policy, Verdict
from io_harness.sandbox._proxy import NetProxy, ProxyDecision, net_target
from support import Listener


class Echo:
    """A TCP echo server on 127.0.0.1 that counts the connections it has seen end."""

    def __init__(self) -> None:
        self.port = 0
        self.ended = 0
        self.changed = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()

    def accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.get_running_loop().create_task(self.serve(reader, writer))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            self.ended += 1
            self.changed.set()


@pytest.fixture
async def echo() -> AsyncIterator[Echo]:
    server = Echo()
    listener = await asyncio.start_server(server.accept, "127.0.0.1", 0)
    server.port = listener.sockets[0].getsockname()[1]
    yield server
    listener.close()
    tasks = list(server.tasks)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await listener.wait_closed()


@pytest.fixture
def sock_path() -> Iterator[Path]:
    # A short folder of its own: a Unix socket path must fit in about 100 bytes.
    folder = Path(tempfile.mkdtemp(prefix="ioh-proxy-"))
    yield folder / "proxy.sock"
    shutil.rmtree(folder, ignore_errors=True)


def connect_line(target: str) -> bytes:
    return f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode()


async def exchange(path: Path, data: bytes, *, eof: bool = True) -> bytes:
    """Send ``data`` to the proxy and read until it closes."""
    reader, writer = await asyncio.open_unix_connection(path)
    try:
        writer.write(data)
        await writer.drain()
        if eof:
            writer.write_eof()
        return await reader.read()
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


def status(response: bytes) -> int:
    return int(response.split(b"\r\n", 1)[0].split(b" ")[1])


def body(response: bytes) -> str:
    return response.partition(b"\r\n\r\n")[2].decode()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_allowed_host_relays_both_ways(sock_path: Path, echo: Echo) -> None:
    asked: list[tuple[str, int]] = []

    async def check(host: str, port: int) -> bool:
        asked.append((host, port))
        return True

    async with NetProxy(sock_path, allow_hosts=("127.0.0.1",), net_check=check) as proxy:
        reader, writer = await asyncio.open_unix_connection(sock_path)
        # Bytes sent right after the request, before the answer, are relayed too.
        writer.write(connect_line(f"127.0.0.1:{echo.port}") + b"early ")
        head = await reader.readuntil(b"\r\n\r\n")
        assert head == b"HTTP/1.1 200 Connection established\r\n\r\n"
        writer.write(b"late")
        writer.write_eof()  # passed on as a half-close: the echo still answers, then ends
        assert await reader.read() == b"early late"
        writer.close()
        await writer.wait_closed()

    assert asked == [("127.0.0.1", echo.port)]
    [decision] = proxy.decisions
    assert (decision.host, decision.port, decision.allowed) == ("127.0.0.1", echo.port, True)
    assert "allow list" in decision.reason


async def test_a_host_not_on_the_list_is_refused(sock_path: Path, echo: Echo) -> None:
    asked: list[tuple[str, int]] = []

    async def check(host: str, port: int) -> bool:
        asked.append((host, port))
        return True

    async with NetProxy(
        sock_path, allow_hosts=("127.0.0.1:1", "*.example.com"), net_check=check
    ) as proxy:
        response = await exchange(sock_path, connect_line(f"127.0.0.1:{echo.port}"))
        assert status(response) == 403
        assert body(response) == f"127.0.0.1:{echo.port} is not on the allow list\n"
        # A subdomain glob does not match the bare domain.
        assert status(await exchange(sock_path, connect_line("example.com:443"))) == 403

    assert asked == []  # the check is only asked about what the list allows
    assert [d.allowed for d in proxy.decisions] == [False, False]


async def test_globs_match_subdomains_and_ports_in_any_case(sock_path: Path) -> None:
    asked: list[tuple[str, int]] = []

    async def check(host: str, port: int) -> bool:
        asked.append((host, port))
        return False  # refuse, so nothing leaves the machine

    hosts = ("*.example.com", "pypi.org:443", "::1")
    async with NetProxy(sock_path, allow_hosts=hosts, net_check=check) as proxy:
        for target in ("API.Example.COM:443", "pypi.org:443", "pypi.org:80", "[0:0::1]:8080"):
            assert status(await exchange(sock_path, connect_line(target))) == 403

    assert asked == [("api.example.com", 443), ("pypi.org", 443), ("::1", 8080)]
    assert [d.target for d in proxy.decisions] == [
        "api.example.com:443",
        "pypi.org:443",
        "pypi.org:80",
        "[::1]:8080",
    ]
    assert "not on the allow list" in proxy.decisions[2].reason


async def test_a_refusing_check_refuses(sock_path: Path, echo: Echo) -> None:
    async def check(host: str, port: int) -> bool:
        return False

    async with NetProxy(sock_path, allow_hosts=("127.0.0.1",), net_check=check) as proxy:
        response = await exchange(sock_path, connect_line(f"127.0.0.1:{echo.port}"))

    assert status(response) == 403
    assert body(response) == f"the network check refused 127.0.0.1:{echo.port}\n"
    assert [d.allowed for d in proxy.decisions] == [False]
    assert echo.ended == 0  # nothing reached the server


async def test_a_raising_check_refuses_and_the_proxy_carries_on(
    sock_path: Path, echo: Echo
) -> None:
    calls = 0

    async def check(host: str, port: int) -> bool:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("approver\nunavailable")
        return True

    async with NetProxy(sock_path, allow_hosts=("127.0.0.1",), net_check=check) as proxy:
        response = await exchange(sock_path, connect_line(f"127.0.0.1:{echo.port}"))
        assert status(response) == 403
        assert "RuntimeError: approver unavailable" in body(response)
        second = await exchange(sock_path, connect_line(f"127.0.0.1:{echo.port}") + b"hi")
        assert second.endswith(b"\r\n\r\nhi")

    assert [d.allowed for d in proxy.decisions] == [False, True]
    assert proxy.decisions[0].reason.endswith("failed: RuntimeError: approver unavailable")


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"garbage\r\n\r\n",
        b"CONNECT example.com HTTP/1.1\r\n\r\n",
        b"CONNECT example.com:0 HTTP/1.1\r\n\r\n",
        b"CONNECT example.com:65536 HTTP/1.1\r\n\r\n",
        b"CONNECT example.com:https HTTP/1.1\r\n\r\n",
        b"CONNECT  example.com:443 HTTP/1.1\r\n\r\n",
        b"CONNECT example.com:443 HTTP/2\r\n\r\n",
        b"CONNECT user@example.com:443 HTTP/1.1\r\n\r\n",
        b"CONNECT example.com:443 HTTP/1.1\r\nno colon here\r\n\r\n",
        b"CONNECT example.com:443 HTTP/1.1\r\n folded: header\r\n\r\n",
        b"CONNECT example.com:443 HTTP/1.1\r\nX-Bad: a\nb\r\n\r\n",
        "CONNECT exämple.com:443 HTTP/1.1\r\n\r\n".encode(),
        b"CONNECT [not-v6]:443 HTTP/1.1\r\n\r\n",
        b"CONNECT [127.0.0.1]:80 HTTP/1.1\r\n\r\n",
        b"CONNECT [::ffff:0x7f.1]:80 HTTP/1.1\r\n\r\n",
        b"CONNECT 127%2e0.0.1:80 HTTP/1.1\r\n\r\n",
        b"CONNECT %31%32%37.0.0.1:80 HTTP/1.1\r\n\r\n",
        b"CONNECT 09.0.0.1:80 HTTP/1.1\r\n\r\n",
        b"CONNECT 1.2.3.4.5:80 HTTP/1.1\r\n\r\n",
        b"CONNECT 4294967296:80 HTTP/1.1\r\n\r\n",
        b"CONNECT ::1:80 HTTP/1.1\r\n\r\n",
        b"CONNECT example.com:443 HTTP/1.1\n\n",  # bare line feeds: never a complete head
        b"CONNECT example.com:443 HTTP/1.1\r\n",  # the client stops half-way
    ],
)
async def test_a_malformed_request_gets_400(sock_path: Path, request_bytes: bytes) -> None:
    async with NetProxy(sock_path, allow_hosts=("*",)) as proxy:
        response = await exchange(sock_path, request_bytes)

    assert status(response) == 400
    assert b"Connection: close" in response
    assert proxy.decisions == ()


# -- an address has one spelling -------------------------------------------------------------


@pytest.fixture
async def listener() -> AsyncIterator[Listener]:
    server = Listener()
    servers = [await asyncio.start_server(server.accept, "127.0.0.1", 0)]
    server.port = servers[0].sockets[0].getsockname()[1]
    with contextlib.suppress(OSError):  # no IPv6 loopback here: the IPv4 listener is the target
        servers.append(await asyncio.start_server(server.accept, "::1", server.port))
    yield server
    for each in servers:
        each.close()
        await each.wait_closed()


LOCKDOWN = Policy.permissive().layer("lockdown").deny_net("127.*", "127.0.0.1", "::1", "localhost")

# Each spelling, the one form the proxy decides and connects to, and the rule that refuses it.
SPELLINGS = [
    *(
        (spelling, "127.0.0.1", "127.*")
        for spelling in (
            "127.0.0.1",
            "127.1",
            "127.0.1",
            "0177.0.0.1",
            "0177.1",
            "0x7f.0.0.1",
            "0X7F.1",
            "0x7f000001",
            "2130706433",
            "017700000001",
            "127.000.000.001",
            "0x000000007f.0.0.0x01",
            "127.0.0.1.",
            "127.0.0.1..",
            "0.0.0.0",  # a connection to the unspecified address reaches this machine
            "0",
            "0x0",
            "[::ffff:127.0.0.1]",
            "[::FFFF:7F00:1]",
            "[0:0:0:0:0:ffff:7f00:1]",
            "[::ffff:127.0.0.1%lo]",
            "[::ffff:0.0.0.0]",
            "[::127.0.0.1]",
            "[64:ff9b::127.0.0.1]",
        )
    ),
    ("127.2.3.4", "127.2.3.4", "127.*"),
    *(
        (spelling, "::1", "::1")
        for spelling in (
            "[::1]",
            "[0:0:0:0:0:0:0:1]",
            "[::0:1]",
            "[0000::0001]",
            "[::1%lo]",
            "[::]",
        )
    ),
    *(
        (spelling, "localhost", "localhost")
        for spelling in ("LOCALHOST", "localhost.", "LocalHost..")
    ),
]


@pytest.mark.parametrize(("spelling", "canonical", "glob"), SPELLINGS)
async def test_no_spelling_of_a_denied_address_reaches_it_through_the_proxy(
    sock_path: Path, listener: Listener, spelling: str, canonical: str, glob: str
) -> None:
    verdicts: list[Verdict] = []

    async def check(host: str, port: int) -> bool:
        verdict = LOCKDOWN.explain(Act.NET, net_target(host, port))
        verdicts.append(verdict)
        return verdict.effect is Effect.ALLOW

    asked = f"{spelling}:{listener.port}"
    async with NetProxy(sock_path, allow_hosts=("*",), net_check=check) as proxy:
        response = await exchange(sock_path, connect_line(asked))

    target = net_target(canonical, listener.port)
    assert status(response) == 403, response
    assert body(response).startswith(f"the network check refused {target}")
    [verdict] = verdicts
    assert (verdict.target, verdict.layer, str(verdict.rule)) == (
        target,
        "lockdown",
        f"deny net {glob}",
    )
    [decision] = proxy.decisions
    assert (decision.target, decision.allowed) == (target, False)
    if asked.lower() != target:
        assert decision.reason.endswith(f"(asked for {asked})")
    assert listener.accepted == 0


@pytest.mark.parametrize("spelling", ["0x7f.1", "2130706433", "[::ffff:127.0.0.1]", "127.0.0.1."])
async def test_an_allowed_spelling_is_connected_to_as_the_address_that_was_checked(
    sock_path: Path, echo: Echo, spelling: str
) -> None:
    asked: list[tuple[str, int]] = []

    async def check(host: str, port: int) -> bool:
        asked.append((host, port))
        return True

    # The echo listens on IPv4 only: a mapped address gets through only as 127.0.0.1.
    async with NetProxy(sock_path, allow_hosts=("127.0.0.1",), net_check=check) as proxy:
        answer = await exchange(sock_path, connect_line(f"{spelling}:{echo.port}") + b"ping")

    assert answer.endswith(b"\r\n\r\nping")
    assert asked == [("127.0.0.1", echo.port)]
    assert [(d.host, d.allowed) for d in proxy.decisions] == [("127.0.0.1", True)]


async def test_other_methods_get_405(sock_path: Path) -> None:
    async with NetProxy(sock_path, allow_hosts=("*",)) as proxy:
        response = await exchange(sock_path, b"GET http://example.com/ HTTP/1.1\r\n\r\n")

    assert status(response) == 405
    assert b"Allow: CONNECT\r\n" in response
    assert body(response) == "only CONNECT is supported, not GET\n"
    assert proxy.decisions == ()


async def test_an_unreachable_port_gets_502(sock_path: Path) -> None:
    port = closed_port()
    async with NetProxy(sock_path, allow_hosts=("127.0.0.1",)) as proxy:
        response = await exchange(sock_path, connect_line(f"127.0.0.1:{port}"))

    assert status(response) == 502
    assert body(response).startswith(f"could not connect to 127.0.0.1:{port}: ")
    assert [d.allowed for d in proxy.decisions] == [True]


async def test_an_oversized_head_gets_431(sock_path: Path) -> None:
    pad = b"X-Pad: " + b"a" * 9000 + b"\r\n"
    async with NetProxy(sock_path, allow_hosts=("*",)) as proxy:
        response = await exchange(
            sock_path, b"CONNECT example.com:443 HTTP/1.1\r\n" + pad + b"\r\n", eof=False
        )

    assert status(response) == 431
    assert proxy.decisions == ()


async def test_a_silent_client_gets_408(sock_path: Path) -> None:
    async with NetProxy(sock_path, allow_hosts=("*",), header_timeout=0.01):
        response = await exchange(sock_path, b"CONNECT exa", eof=False)

    assert status(response) == 408


async def test_connections_past_the_bound_get_503(sock_path: Path) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def check(host: str, port: int) -> bool:
        entered.set()
        await release.wait()
        return False

    async with NetProxy(sock_path, allow_hosts=("*",), net_check=check, max_connections=1) as proxy:
        first = asyncio.create_task(exchange(sock_path, connect_line("example.com:443")))
        await entered.wait()
        # Turned away at once; sending nothing first keeps the answer from being lost to a reset.
        assert status(await exchange(sock_path, b"", eof=False)) == 503
        release.set()
        assert status(await first) == 403

    assert len(proxy.decisions) == 1


async def test_leaving_the_context_closes_live_relays(sock_path: Path, echo: Echo) -> None:
    async with NetProxy(sock_path, allow_hosts=("127.0.0.1",)) as proxy:
        assert stat.S_IMODE(sock_path.stat().st_mode) == 0o666
        reader, writer = await asyncio.open_unix_connection(sock_path)
        writer.write(connect_line(f"127.0.0.1:{echo.port}"))
        assert status(await reader.readuntil(b"\r\n\r\n")) == 200
        writer.write(b"ping")
        assert await reader.readexactly(4) == b"ping"

    assert not sock_path.exists()
    with contextlib.suppress(ConnectionResetError):
        assert await reader.read() == b""
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    while echo.ended < 1:  # the upstream side was closed too
        echo.changed.clear()
        await echo.changed.wait()
    assert [d.allowed for d in proxy.decisions] == [True]
    with pytest.raises(RuntimeError):
        await proxy.start()


async def test_leaving_does_not_wait_for_a_client_that_stops_reading(
    sock_path: Path, echo: Echo
) -> None:
    async with NetProxy(sock_path, allow_hosts=("127.0.0.1",)):
        reader, writer = await asyncio.open_unix_connection(sock_path)
        writer.write(connect_line(f"127.0.0.1:{echo.port}"))
        assert status(await reader.readuntil(b"\r\n\r\n")) == 200
        writer.write(b"x" * (8 << 20))  # echoed back, never read: every buffer on the way fills
        await asyncio.sleep(0.05)

    writer.transport.abort()
    while echo.ended < 1:
        echo.changed.clear()
        await echo.changed.wait()


async def test_a_plain_socket_client_in_a_thread(sock_path: Path, echo: Echo) -> None:
    def client() -> bytes:
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(30)  # a hung proxy fails the test instead of hanging it
            conn.connect(str(sock_path))
            conn.sendall(connect_line(f"127.0.0.1:{echo.port}"))
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                head += conn.recv(1)
            conn.sendall(b"over a plain socket")
            conn.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := conn.recv(4096):
                chunks.append(chunk)
            return head + b"".join(chunks)

    async with NetProxy(sock_path, allow_hosts=("127.0.0.1",)):
        response = await asyncio.to_thread(client)

    assert status(response) == 200
    assert body(response) == "over a plain socket"


async def test_decisions_are_recorded_in_order(sock_path: Path, echo: Echo) -> None:
    refused_port = closed_port()
    async with NetProxy(sock_path, allow_hosts=("127.0.0.1", "localhost:1")) as proxy:
        await exchange(sock_path, connect_line(f"127.0.0.1:{echo.port}"))
        await exchange(sock_path, connect_line("example.org:443"))
        await exchange(sock_path, connect_line("LOCALHOST:2"))
        await exchange(sock_path, connect_line(f"127.0.0.1:{refused_port}"))

    assert [(d.host, d.port, d.allowed) for d in proxy.decisions] == [
        ("127.0.0.1", echo.port, True),
        ("example.org", 443, False),
        ("localhost", 2, False),
        ("127.0.0.1", refused_port, True),
    ]


def test_decision_records_and_targets() -> None:
    decision = ProxyDecision("::1", 443, False, "not on the allow list")
    assert decision.record() == {
        "host": "::1",
        "port": 443,
        "allowed": False,
        "reason": "not on the allow list",
        "target": "[::1]:443",
    }
    assert net_target("example.com", 80) == "example.com:80"


@pytest.mark.parametrize("glob", ["", "a\0b"])
def test_an_unusable_glob_is_a_config_error(sock_path: Path, glob: str) -> None:
    with pytest.raises(ConfigError, match="allow_hosts"):
        NetProxy(sock_path, allow_hosts=(glob,))
