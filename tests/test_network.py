"""The network gate: every connection the harness opens is decided by the run's policy.

Real providers and clients against loopback servers (``loopback.py``); no
network, no mocks, no durations asserted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import support
from io_harness import (
    Anthropic,
    CompletionRequest,
    Decision,
    Fallback,
    Harness,
    McpServer,
    Message,
    OpenAICompatible,
    Policy,
    Provider,
    ProviderError,
    RefusedError,
    RunOutcome,
    Store,
    resume,
    run,
    tool,
)
from io_harness._net import RunNet, checked_async_client, checking, current_check, policy_check
from io_harness.cli import main
from io_harness.policy import Act, ApprovalRequest, Verdict
from io_harness.policy._gate import Access, Cleared, Gate
from io_harness.sandbox import SandboxConfig
from io_harness.store._trace import PermissionTrace
from io_harness.testing import ScriptedProvider, call, reply
from loopback import CapturedRequest, LoopbackServer, Reply
from support import Listener
from wire_anthropic import messages_stream
from wire_openai import chat_stream, usage

PY = sys.executable


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


contract = partial(support.contract, goal="say hello", needle="yes", max_steps=1, max_retries=3)
"""The task of the runs here: done when done.txt holds ``yes``."""


def hello(_request: CapturedRequest) -> Reply:
    return chat_stream("hello", usage=usage(5, 1))


def model(server: LoopbackServer) -> OpenAICompatible:
    return OpenAICompatible("m", base_url=f"{server.url}/v1")


class Misdeclared(OpenAICompatible):
    """A provider whose endpoints are not where it connects: the check at the transport holds."""

    def endpoints(self) -> tuple[str, ...]:
        return ("127.0.0.1:9",)


def nets(store: Store, run_id: str) -> list[PermissionTrace]:
    return [p for p in store.trace(run_id).permissions if p.act == "net"]


# -- the provider's endpoints and the provider layer ------------------------------------


async def test_a_provider_endpoint_a_deny_rule_names_is_refused_before_any_request(
    root: Path, store: Store
) -> None:
    with LoopbackServer(hello) as server:
        policy = Policy.default().layer("app").deny_net(server.host)

        with pytest.raises(RefusedError) as refused:
            await run(contract(root), model(server), store=store, policy=policy)

    message = str(refused.value)
    assert f"compatible connects to {server.host}, but net {server.host}: deny" in message
    assert f"(rule 'deny net {server.host}' in layer 'app')" in message
    assert server.requests == []
    assert store.runs() == []


async def test_an_ask_on_the_models_endpoint_is_refused_before_any_request(
    root: Path, store: Store
) -> None:
    with LoopbackServer(hello) as server:
        policy = Policy.default().layer("app").ask_net("127.0.0.1:*")

        with pytest.raises(RefusedError, match="an ask cannot be answered for the model's own"):
            await run(contract(root), model(server), store=store, policy=policy)

    assert server.requests == []


async def test_a_deny_all_policy_still_reaches_its_model_through_the_provider_layer(
    root: Path, store: Store
) -> None:
    deny_all = Policy.default().with_defaults(read="deny", write="deny", exec="deny")
    with LoopbackServer(hello) as server:
        result = await run(contract(root), model(server), store=store, policy=deny_all)

    assert result.outcome is RunOutcome.STEP_CAP_REACHED
    assert len(server.requests) == 1
    rows = nets(store, result.run_id)
    # One row when the run starts (the endpoint checked outright), one for the request.
    assert [(p.target, p.decision, p.layer, p.rule, p.call_id) for p in rows] == [
        (server.host, "allowed", "provider", f"allow net {server.host}", ""),
    ] * 2


def test_ioh_policy_explain_names_the_provider_layer_and_what_others_get(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(
        "[policy]\nbase = 'default'\n[policy.defaults]\nread = 'deny'\nwrite = 'deny'\n"
    )
    spec = "compatible:http://127.0.0.1:8123/v1#m"

    assert main(["policy", "explain", str(path), "net", "127.0.0.1:8123", "--provider", spec]) == 0
    out = capsys.readouterr().out
    assert (
        "the provider's own connections: net 127.0.0.1:8123: allow "
        "(rule 'allow net 127.0.0.1:8123' in layer 'provider')"
    ) in out
    assert (
        "any other connection (tools, commands, MCP servers): net 127.0.0.1:8123: deny "
        "(the default for net)"
    ) in out

    assert main(["policy", "explain", str(path), "net", "pypi.org", "--provider", spec]) == 0
    assert capsys.readouterr().out.strip() == "net pypi.org: deny (the default for net)"

    assert main(["policy", "show", str(path), "--provider", spec]) == 0
    shown = capsys.readouterr().out
    assert "layer provider:\n  allow net 127.0.0.1:8123" in shown


def test_ioh_policy_explain_needs_no_key_for_a_vendors_endpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("ANTHROPIC_API_KEY", "ANTHROPIC_MODEL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)
    path = tmp_path / "policy.toml"
    path.write_text("[policy]\nbase = 'default'\n")
    argv = ["policy", "explain", str(path), "net", "api.anthropic.com:443"]

    assert main([*argv, "--provider", "anthropic"]) == 0
    assert "in layer 'provider'" in capsys.readouterr().out


async def test_every_member_of_a_fallback_is_checked_before_the_first_call(
    root: Path, store: Store
) -> None:
    with LoopbackServer(hello) as first, LoopbackServer(hello) as second:
        policy = Policy.default().layer("app").deny_net(second.host)

        with pytest.raises(RefusedError, match=re.escape(f"connects to {second.host}, but")):
            await run(
                contract(root), Fallback(model(first), model(second)), store=store, policy=policy
            )

    assert first.requests == [] and second.requests == []


async def test_a_bounds_default_deny_does_not_cut_the_run_off_but_its_deny_rule_does(
    root: Path, store: Store
) -> None:
    with LoopbackServer(hello) as server:
        bounded = Policy.default().merge(Policy.guarded())
        result = await run(contract(root), model(server), store=store, policy=bounded)
        assert len(server.requests) == 1
        assert result.outcome is RunOutcome.STEP_CAP_REACHED

        org = Policy.permissive().layer("org").deny_net(server.host)
        within_org = Policy.default().merge(org)
        with pytest.raises(RefusedError, match="in layer 'org'"):
            await run(contract(root), model(server), store=store, policy=within_org)

    assert len(server.requests) == 1


async def test_a_resumed_run_checks_its_new_providers_endpoints_before_any_request(
    root: Path, store: Store
) -> None:
    @tool
    async def ping() -> str:
        """Say pong."""
        return "pong"

    with LoopbackServer(hello) as server:
        policy = Policy.default().layer("app").ask_exec("ping").deny_net(server.host)
        waiting = await run(
            contract(root, max_steps=2),
            ScriptedProvider([reply(calls=[call("ping")])]),
            store=store,
            policy=policy,
            tools=[ping],
        )
        assert waiting.outcome is RunOutcome.AWAITING_APPROVAL

        with pytest.raises(RefusedError, match=re.escape(f"deny net {server.host}")):
            await resume(
                waiting.run_id,
                model(server),
                store=store,
                tools=[ping],
                decision=Decision.approve(),
            )

    assert server.requests == []


# -- a connection refused mid-run ---------------------------------------------------------


async def test_a_provider_connection_the_policy_refuses_is_not_retried_and_the_trace_says_why(
    root: Path, store: Store
) -> None:
    with LoopbackServer(hello) as server:
        provider = Misdeclared("m", base_url=f"{server.url}/v1")
        policy = Policy.default().layer("app").deny_net(server.host)

        result = await run(contract(root), provider, store=store, policy=policy)

    assert server.requests == []
    assert result.outcome is RunOutcome.PROVIDER_FAILED
    assert result.error is not None and result.error.kind == "refused"
    assert not result.error.transient
    assert f"rule 'deny net {server.host}' in layer 'app'" in result.error.message
    (attempt,) = store.trace(result.run_id).provider_calls
    assert attempt.error_kind == "refused"
    refused = [p for p in nets(store, result.run_id) if p.decision == "refused"]
    assert [(p.target, p.rule, p.layer, p.call_id) for p in refused] == [
        (server.host, f"deny net {server.host}", "app", "")
    ]


async def test_a_provider_redirect_is_not_followed_nor_retried(root: Path, store: Store) -> None:
    with LoopbackServer(hello) as other:
        location = f"{other.url}/v1/chat/completions"
        redirect = Reply(status=307, headers={"Location": location}, body="")
        with LoopbackServer(lambda _request: redirect) as first:
            result = await run(contract(root), model(first), store=store)

    assert len(first.requests) == 1
    assert other.requests == []
    assert result.outcome is RunOutcome.PROVIDER_FAILED
    assert result.error is not None and result.error.kind == "bad_request"
    assert f"the server redirects to '{location}'" in result.error.message
    assert len(store.trace(result.run_id).provider_calls) == 1


async def test_a_redirect_a_client_follows_is_checked_at_each_hop() -> None:
    with LoopbackServer(lambda _request: Reply(body={"ok": True})) as other:
        redirect = Reply(status=307, headers={"Location": f"{other.url}/x"}, body="")
        with LoopbackServer(lambda _request: redirect) as first:
            policy = Policy.default().layer("first").allow_net(first.host)
            async with checked_async_client() as client:
                with checking(policy_check(policy)), pytest.raises(RefusedError) as refused:
                    await client.get(first.url, follow_redirects=True)

    assert f"connecting to {other.host}: refused by the policy: net {other.host}: deny" in str(
        refused.value
    )
    assert len(first.requests) == 1
    assert other.requests == []


# -- the agent's connections ---------------------------------------------------------------


async def test_a_tools_connection_is_decided_by_the_runs_policy_under_its_call(
    root: Path, store: Store
) -> None:
    @tool
    async def fetch(url: str) -> str:
        """Fetch a URL."""
        async with checked_async_client() as client:
            return (await client.get(url)).text

    with LoopbackServer(lambda _request: Reply(body={"ok": True})) as site:
        provider = ScriptedProvider([reply(calls=[call("fetch", url=site.url)]), reply("done")])
        result = await run(contract(root, max_steps=2), provider, store=store, tools=[fetch])
        assert site.requests == []

        allowing = Policy.default().layer("site").allow_net(site.host)
        again = ScriptedProvider([reply(calls=[call("fetch", url=site.url)]), reply("done")])
        await run(contract(root, max_steps=2), again, store=store, tools=[fetch], policy=allowing)
        assert len(site.requests) == 1

    (row,) = store.trace(result.run_id).tool_calls
    assert f"refused by the policy: net {site.host}: deny (the default for net)" in row.result
    assert [(p.target, p.decision, p.call_id) for p in nets(store, result.run_id)] == [
        (site.host, "refused", row.call_id)
    ]


async def test_a_commands_connection_to_the_models_host_is_not_opened_by_the_provider_layer(
    root: Path, store: Store
) -> None:
    code = (
        "import os, socket, sys\n"
        "c = socket.socket(socket.AF_UNIX); c.connect(os.environ['IOH_PROXY_SOCKET'])\n"
        "c.sendall(f'CONNECT {sys.argv[1]} HTTP/1.1\\r\\n\\r\\n'.encode())\n"
        "print(sys.argv[1], c.recv(200).decode().splitlines()[0])\n"
    )
    turns: list[Reply] = []

    def script(request: CapturedRequest) -> Reply:
        return turns[len(server.requests) - 1]

    with LoopbackServer(script) as server:
        argv = [PY, "-c", code, server.host]
        exec_call = ("call_a", "exec", json.dumps({"argv": argv}))
        turns += [chat_stream(tool_calls=[exec_call]), chat_stream("done")]
        config = SandboxConfig(network="allow_list", allow_hosts=("127.0.0.1",))

        result = await run(
            contract(root, max_steps=2, tools=("exec",)), model(server), store=store, sandbox=config
        )

    assert len(server.requests) == 2
    assert f"{server.host} HTTP/1.1 403" in server.requests[1].body.decode()
    rows = nets(store, result.run_id)
    assert [(p.decision, p.layer, p.call_id) for p in rows if p.call_id == "call_a"] == [
        ("refused", None, "call_a")
    ]
    assert {(p.decision, p.layer) for p in rows if p.call_id == ""} == {("allowed", "provider")}


# -- an address has one spelling ---------------------------------------------------------------

LOOPBACK_SPELLINGS = [
    "0x7f.1",
    "127.1",
    "2130706433",
    "0x7f000001",
    "127.0.0.1.",
    "0.0.0.0",  # a connection to the unspecified address reaches this machine
    "[::ffff:127.0.0.1]",
    "[::FFFF:7f00:1]",
    "[::ffff:0.0.0.0]",
    "[::127.0.0.1]",
    "[64:ff9b::7f00:1]",
]


@pytest.mark.parametrize("spelling", LOOPBACK_SPELLINGS)
async def test_no_spelling_of_a_denied_address_gets_through_the_checked_transport(
    spelling: str,
) -> None:
    with LoopbackServer(lambda _request: Reply(body={"ok": True})) as server:
        port = server.host.rpartition(":")[2]
        policy = Policy.permissive().layer("lockdown").deny_net("127.*")
        async with checked_async_client() as client:
            with checking(policy_check(policy)), pytest.raises(RefusedError) as refused:
                await client.get(f"http://{spelling}:{port}/")

    assert str(refused.value) == (
        f"connecting to 127.0.0.1:{port}: refused by the policy: net 127.0.0.1:{port}: "
        "deny (rule 'deny net 127.*' in layer 'lockdown')"
    )
    assert server.requests == []


@pytest.mark.parametrize("spelling", ["0x7f.1", "2130706433", "[::ffff:127.0.0.1]", "127.0.0.1."])
async def test_an_allowed_spelling_is_sent_to_the_address_that_was_checked(spelling: str) -> None:
    with LoopbackServer(lambda _request: Reply(body={"ok": True})) as server:
        port = server.host.rpartition(":")[2]
        policy = Policy.default().layer("here").allow_net(server.host)
        async with checked_async_client() as client:
            with checking(policy_check(policy)):
                answer = await client.get(f"http://{spelling}:{port}/")

    # The server listens on IPv4 alone: a mapped address reaches it only as 127.0.0.1.
    assert answer.status_code == 200
    [request] = server.requests
    assert request.headers["host"] == f"{spelling}:{port}"  # the Host header as written


@pytest.mark.parametrize(
    ("host", "problem"),
    [
        ("127%2e0.0.1", "is neither an IP address nor a host name"),
        ("1.2.3.4.5", "is spelled like an IPv4 address but is not one"),
    ],
)
async def test_a_host_that_is_neither_an_address_nor_a_name_is_refused_before_any_lookup(
    host: str, problem: str
) -> None:
    async with checked_async_client() as client:
        with checking(policy_check(Policy.permissive())), pytest.raises(RefusedError) as refused:
            await client.get(f"http://{host}:9/")

    assert str(refused.value) == f"connecting to {host}:9: the host {host!r} {problem}"


@pytest.mark.parametrize(
    "url", ["http://[::ffff:127.0.0.1]:8080/mcp", "http://0x7f.1:8080/mcp", "http://127.1:8080/"]
)
def test_an_mcp_servers_host_is_decided_in_its_one_spelling(url: str) -> None:
    server = McpServer(name="tickets", url=url)
    policy = Policy.permissive().layer("lockdown").deny_net("127.*")
    assert policy.explain(Act.NET, server.start_access().target).describe() == (
        "net 127.0.0.1:8080: deny (rule 'deny net 127.*' in layer 'lockdown')"
    )


async def test_a_command_reaches_no_spelling_of_a_denied_address_and_the_trace_names_the_rule(
    root: Path, store: Store
) -> None:
    code = (
        "import os, socket, sys\n"
        "for target in sys.argv[1:]:\n"
        "    c = socket.socket(socket.AF_UNIX); c.connect(os.environ['IOH_PROXY_SOCKET'])\n"
        "    c.sendall(f'CONNECT {target} HTTP/1.1\\r\\n\\r\\n'.encode())\n"
        "    print(target, c.recv(200).decode().splitlines()[0])\n"
        "    c.close()\n"
    )
    listener = Listener()
    servers = [await asyncio.start_server(listener.accept, "127.0.0.1", 0)]
    port = listener.port = servers[0].sockets[0].getsockname()[1]
    with contextlib.suppress(OSError):  # no IPv6 loopback here: the IPv4 listener is the target
        servers.append(await asyncio.start_server(listener.accept, "::1", port))
    spellings = ["0x7f.1", "2130706433", "[::ffff:127.0.0.1]", "0.0.0.0", "[0:0::1]", "[::]"]
    argv = [PY, "-c", code, *(f"{spelling}:{port}" for spelling in spellings)]
    provider = ScriptedProvider([reply(calls=[call("exec", argv=argv)]), reply("done")])
    policy = Policy.permissive().layer("lockdown").deny_net("127.*", "127.0.0.1", "::1")
    config = SandboxConfig(network="allow_list", allow_hosts=("*",))
    try:
        result = await run(
            contract(root, max_steps=2, tools=("exec",)),
            provider,
            store=store,
            policy=policy,
            sandbox=config,
        )
    finally:
        for server in servers:
            server.close()
            await server.wait_closed()

    assert listener.accepted == 0
    (row,) = store.trace(result.run_id).tool_calls
    for spelling in spellings:
        assert f"{spelling}:{port} HTTP/1.1 403 Forbidden" in row.result
    ipv4, ipv6 = f"127.0.0.1:{port}", f"[::1]:{port}"
    assert [(p.target, p.decision, p.rule, p.layer) for p in nets(store, result.run_id)] == [
        (target, "refused", f"deny net {glob}", "lockdown")
        for target, glob in [(ipv4, "127.*")] * 4 + [(ipv6, "::1")] * 2
    ]


# -- one check per run, and none outside -----------------------------------------------------


async def test_concurrent_runs_in_one_process_each_see_their_own_policy(
    root: Path, store: Store
) -> None:
    def slow_hello(_request: CapturedRequest) -> Reply:
        return chat_stream("hello", usage=usage(5, 1), delay=0.2)

    with LoopbackServer(slow_hello) as server:
        shared = Misdeclared("m", base_url=f"{server.url}/v1")  # one client for both runs
        opened = Harness(
            shared, store=store, policy=Policy.default().layer("a").allow_net(server.host)
        )
        closed = Harness(shared, store=store, policy=Policy.default())

        allowed, refused = await asyncio.gather(
            opened.run(contract(root)), closed.run(contract(root))
        )

    assert allowed.outcome is RunOutcome.STEP_CAP_REACHED
    assert refused.outcome is RunOutcome.PROVIDER_FAILED
    assert refused.error is not None and refused.error.kind == "refused"
    assert len(server.requests) == 1
    mine = [(p.decision, p.layer) for p in nets(store, allowed.run_id) if p.target == server.host]
    theirs = [(p.decision, p.layer) for p in nets(store, refused.run_id) if p.target == server.host]
    assert mine == [("allowed", "a")]
    assert theirs == [("refused", None)]


async def test_a_run_sets_its_check_only_while_it_drives(root: Path, store: Store) -> None:
    seen: list[Any] = []

    @tool
    async def look() -> str:
        """Look at the current check."""
        seen.append(current_check())
        return "looked"

    assert current_check() is None
    provider = ScriptedProvider([reply(calls=[call("look")]), reply("done")])
    await run(contract(root, max_steps=2), provider, store=store, tools=[look])

    assert isinstance(seen[0], RunNet)
    assert current_check() is None


async def test_outside_a_run_connections_go_through_unless_the_caller_sets_a_check() -> None:
    with LoopbackServer(lambda _request: Reply(body={"ok": True})) as server:
        async with checked_async_client(headers={"x-test": "1"}, timeout=30) as client:
            assert (await client.get(server.url)).status_code == 200

            refusing = checking(policy_check(Policy.default()))
            with refusing, pytest.raises(RefusedError, match=re.escape(f"net {server.host}: deny")):
                await client.get(server.url)
            assert current_check() is None

            allowing = Policy.default().layer("here").allow_net(server.host)
            with checking(policy_check(allowing)):
                assert (await client.get(server.url)).status_code == 200

    assert len(server.requests) == 2
    assert server.requests[0].headers["x-test"] == "1"


def openai_at(url: str) -> Provider:
    return OpenAICompatible("m", base_url=f"{url}/v1")


def anthropic_at(url: str) -> Provider:
    return Anthropic("m", api_key="k-anthropic-test", base_url=url)


@pytest.mark.parametrize(
    ("make", "answer"),
    [(openai_at, chat_stream("hello")), (anthropic_at, messages_stream("hello"))],
    ids=["openai", "anthropic"],
)
async def test_a_provider_called_outside_a_run_is_refused_by_a_check_its_caller_sets(
    make: Callable[[str], Provider], answer: Reply
) -> None:
    request = CompletionRequest(model="m", system="", messages=(Message.user("hi"),))
    with LoopbackServer(lambda _request: answer) as server:
        provider = make(server.url)
        try:
            with checking(policy_check(Policy.default())), pytest.raises(ProviderError) as failed:
                await provider.complete(request)
            done = await provider.complete(request)
        finally:
            await provider.aclose()  # type: ignore[attr-defined]

    assert failed.value.kind == "refused"
    assert not failed.value.transient
    assert done.text == "hello"
    assert len(server.requests) == 1


async def test_an_asked_connection_goes_through_only_for_the_call_approved_before_it_ran() -> None:
    with LoopbackServer(lambda _request: Reply(body={"ok": True})) as server:
        policy = Policy.default().layer("app").ask_net(server.host)
        gate = Gate(policy, None, goal="g", run_id="r")
        net = RunNet.of(gate, ScriptedProvider([]))
        access = Access(Act.NET, server.host)

        def asked(verdict: Verdict) -> ApprovalRequest:
            return ApprovalRequest(
                id="q1",
                run_id="r",
                step=1,
                call_id="call_1",
                tool="fetch",
                arguments={},
                act=Act.NET,
                target=server.host,
                verdict=verdict,
            )

        with gate.stepping(1) as step:
            with gate.calling("call_1"):
                cleared = await gate.authorize(access, asked, Decision.approve())
            async with checked_async_client() as client:
                with checking(net):
                    with gate.calling("call_1") as call_1:
                        assert (await client.get(server.url)).status_code == 200
                    with (
                        gate.calling("call_2") as call_2,
                        pytest.raises(  # nobody approved its connection
                            RefusedError, match="cannot wait for approval"
                        ),
                    ):
                        await client.get(server.url)

    assert isinstance(cleared, Cleared)
    assert len(server.requests) == 1
    assert call_1.rows == []  # approved before the call ran: that decision is its row
    assert [(r.call_id, r.decision) for r in call_2.rows] == [("call_2", "refused")]
    assert [(r.call_id, r.decision) for r in step.rows] == [
        ("call_1", "approved"),
        ("call_2", "refused"),
    ]
