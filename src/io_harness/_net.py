"""The one checked entry point for outbound connections: the transport every harness client uses.

Every request a client built here sends (a provider's, an MCP server's over
HTTP, each hop of a redirect the caller chose to follow) passes
:class:`CheckedTransport`, which asks the net check current in the sending
task about ``host:port`` before the request reaches httpx2's connection pool,
so a refused connection never gets a socket. A refusal raises
:class:`~io_harness.errors.RefusedError`; a provider turns it into
``ProviderError("refused")``, which is never retried. The host is taken in
its canonical spelling (:mod:`io_harness.policy._hosts`) and the request is
sent to that spelling, so the address connected to is the one checked.

The check lives in a :mod:`contextvars` variable. A run sets its own around
its steps (:class:`RunNet`), so runs at once in one process each see theirs,
and a task started inside a run inherits it. Outside a run nothing is set and
every connection is let through, unless the caller sets a check: ``with
checking(policy_check(policy)):``.

Nothing here imports httpx2 when this module is imported: the clients are
built by the functions below, on first use.
"""

from __future__ import annotations

import contextlib
import contextvars
import ssl
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Self, TypedDict, Unpack, cast

from io_harness.errors import ConfigError, RefusedError
from io_harness.policy._approval import Decision
from io_harness.policy._gate import Access, Gate
from io_harness.policy._hosts import (
    canonical_host,
    canonical_net_target,
    host_problem,
    join_net_target,
)
from io_harness.policy._policy import PROVIDER_LAYER, Policy
from io_harness.policy._rules import (
    Act,
    Effect,
    Layer,
    Rule,
    Verdict,
    glob_problem,
    normalise_target,
)

if TYPE_CHECKING:
    import httpx2

    from io_harness.providers import Provider

__all__ = [
    "CheckedTransport",
    "ClientOptions",
    "NetCheck",
    "RunNet",
    "checked_async_client",
    "checking",
    "current_check",
    "policy_check",
    "provider_policy",
    "refusal",
    "url_target",
]

NetCheck = Callable[[str, bool], str | None]
"""Decides one connection: ``(host:port, for_provider)`` to ``None`` (let it through) or the
reason it is refused. ``for_provider`` is true for the provider's own clients."""

_current: contextvars.ContextVar[NetCheck | None] = contextvars.ContextVar(
    "io_harness_net_check", default=None
)

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


@contextlib.contextmanager
def checking(check: NetCheck | None) -> Iterator[None]:
    """Decide the connections made in this context (and tasks started in it) with ``check``.

    ``None`` lets every connection through. The previous check is back when the block ends.
    """
    token = _current.set(check)
    try:
        yield
    finally:
        _current.reset(token)


def current_check() -> NetCheck | None:
    """The check deciding connections made here now; ``None``: none is set, all are let through."""
    return _current.get()


def policy_check(policy: Policy) -> NetCheck:
    """Connections decided by ``policy`` alone: an outright allow, or refused. No trace is kept.

    For connections outside a run, such as listing an MCP server's tools.
    """

    def check(target: str, for_provider: bool) -> str | None:
        verdict = policy.explain(Act.NET, target)
        return None if verdict.effect is Effect.ALLOW else refusal(verdict)

    return check


def refusal(verdict: Verdict) -> str:
    """What a refused connection says: the verdict, and for an ask why it is not asked."""
    if verdict.effect is Effect.ASK:
        return (
            f"{verdict.describe()}; a connection cannot wait for approval while it is "
            "being made, so the policy must allow it outright"
        )
    return f"refused by the policy: {verdict.describe()}"


def provider_policy(policy: Policy, endpoints: Iterable[str]) -> Policy:
    """``policy`` with a last layer ``provider`` allowing each endpoint, in it and every bound.

    The layer decides only the provider's own connections (see :class:`RunNet`).
    Each bound (``within``) gets it too: a bound's default deny must not cut a
    run off from its model, while a deny rule anywhere still wins, as deny
    rules do. A policy that already has a layer named ``provider`` is a
    :class:`ConfigError` (the builder and the TOML loader refuse the name).
    """
    rules: list[Rule] = []
    for endpoint in dict.fromkeys(endpoints):
        problem = (
            "not a string"
            if not isinstance(endpoint, str)
            else "a glob, not one host"
            if "*" in endpoint or "?" in endpoint
            else glob_problem(endpoint)
        )
        if problem is not None:
            raise ConfigError(f"the provider's endpoint {endpoint!r} is {problem}: give host:port")
        rules.append(
            Rule(act=Act.NET, glob=normalise_target(Act.NET, endpoint), effect=Effect.ALLOW)
        )
    return _with_layer(policy, Layer(name=PROVIDER_LAYER, rules=tuple(rules)))


def _with_layer(policy: Policy, layer: Layer) -> Policy:
    if any(own.name == layer.name for own in policy.layers):
        raise ConfigError(
            f"the policy has a layer named {layer.name!r}, the name of the layer a run adds "
            "for its provider's endpoints; rename yours"
        )
    within = _with_layer(policy.within, layer) if policy.within is not None else None
    return Policy(layers=(*policy.layers, layer), defaults=policy.defaults, within=within)


@dataclass(frozen=True, slots=True)
class RunNet:
    """A run's decisions on connections, each a permission row of its trace.

    The provider's own connections are decided by ``provider_policy`` (the
    run's policy with the ``provider`` layer), recorded as the harness's acts
    (call ``""``). Every other connection is decided by the gate, the run's
    policy and remembered rules without that layer, and recorded under the
    tool call in progress. A connection in flight cannot wait for a person:
    an ask lets it through only when the call making it was approved for that
    host before it ran (a tool that declares the ``net`` act); else it is
    refused.
    """

    gate: Gate
    provider_policy: Policy

    @classmethod
    def of(cls, gate: Gate, provider: Provider) -> RunNet:
        """The run's check for ``gate``, with ``provider``'s endpoints in the ``provider`` layer."""
        return cls(gate, provider_policy(gate.policy, provider.endpoints()))

    def provider_verdict(self, target: str) -> Verdict:
        """The verdict on one of the provider's connections, recorded as the harness's act."""
        verdict = self.provider_policy.explain(Act.NET, target)
        decision = "allowed" if verdict.effect is Effect.ALLOW else "refused"
        with self.gate.calling(""):  # the harness's own connection, not a call's
            self.gate.record(Access(Act.NET, target), verdict, decision, "policy")
        return verdict

    def __call__(self, target: str, for_provider: bool) -> str | None:
        """The :data:`NetCheck` of the run."""
        if for_provider:
            verdict = self.provider_verdict(target)
            return None if verdict.effect is Effect.ALLOW else refusal(verdict)
        gate = self.gate
        key = (gate.call_id, Act.NET, normalise_target(Act.NET, target))
        settled = gate.scope.settled.get(key)
        if isinstance(settled, Decision) and settled.kind == "approve":
            return None  # approved for this call before it ran; that decision is its row
        verdict = gate.check_outright(Access(Act.NET, target))
        return None if verdict.effect is Effect.ALLOW else refusal(verdict)


def url_target(url: httpx2.URL) -> str:
    """``host:port`` of a URL in the canonical form net rules match: the port defaulted from
    the scheme, a name as httpx2 sends it (IDNA-encoded), an address in its one spelling."""
    port = url.port or _DEFAULT_PORTS.get(url.scheme)
    return canonical_net_target(join_net_target(_raw_host(url), port))


def _raw_host(url: httpx2.URL) -> str:
    return url.raw_host.decode("ascii", "replace")


class CheckedTransport:
    """An httpx2 async transport that asks the current net check before every request.

    It wraps ``inner`` (an ``httpx2.AsyncHTTPTransport``) and has httpx2's
    transport interface without subclassing it, so this module loads without
    httpx2. ``for_provider`` marks the provider's own clients. A check that
    raises refuses the connection: a broken check never lets one through. A
    checked request goes to its host's canonical spelling (its ``Host``
    header unchanged), and a host that is neither an address nor a name
    (``127%2e0.0.1``) is refused before the check is asked.
    """

    def __init__(self, inner: httpx2.AsyncBaseTransport, *, for_provider: bool = False) -> None:
        self._inner = inner
        self.for_provider = for_provider

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Check ``request``'s ``host:port``, then send it through the inner transport."""
        check = _current.get()
        if check is not None:
            target = url_target(request.url)
            host = _raw_host(request.url)
            refused = host_problem(host)
            if refused is None:
                try:
                    refused = check(target, self.for_provider)
                except Exception as exc:
                    refused = f"the network check failed: {type(exc).__name__}: {exc}"
            if refused is not None:
                raise RefusedError(f"connecting to {target}: {refused}")
            canonical = canonical_host(host)
            if canonical != host:
                # The resolver must not read the checked spelling its own way: send the one checked.
                request.url = request.url.copy_with(host=canonical)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        """Close the inner transport and its connections."""
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        await self._inner.__aexit__(exc_type, exc_value, traceback)


class ClientOptions(TypedDict, total=False):
    """The options of :func:`checked_async_client`, as ``httpx2.AsyncClient`` takes them."""

    headers: Mapping[str, str] | None
    timeout: httpx2.Timeout | float | None
    """Omitted: httpx2's default; ``None``: no timeout."""
    auth: httpx2.Auth | None
    base_url: str
    verify: ssl.SSLContext | str | bool
    limits: httpx2.Limits


def checked_async_client(
    *, for_provider: bool = False, **options: Unpack[ClientOptions]
) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` whose every request passes :class:`CheckedTransport`.

    Redirects are not followed unless a request asks to (each hop is then
    checked too), and nothing is read from the environment: no proxy (a
    proxy would make the socket's host another than the one checked), no
    ``.netrc``, no CA bundle variables. ``for_provider`` marks the
    provider's own client.
    """
    import httpx2

    verify = options.pop("verify", True)
    limits = options.pop("limits", None)
    inner = (
        httpx2.AsyncHTTPTransport(verify=verify, trust_env=False)
        if limits is None
        else httpx2.AsyncHTTPTransport(verify=verify, trust_env=False, limits=limits)
    )
    checked = CheckedTransport(inner, for_provider=for_provider)
    return httpx2.AsyncClient(
        # A transport by its interface: httpx2 only calls these methods on it.
        transport=cast("httpx2.AsyncBaseTransport", checked),
        follow_redirects=False,
        trust_env=False,
        **options,
    )
