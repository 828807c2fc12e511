"""The MCP servers a harness connects to: :class:`McpServer`, and the checks on their names.

A server is started over stdio (a program the harness runs) or reached over
streamable HTTP (a URL). Each of its tools is offered to the model as
``mcp__<server>__<tool>``. In a contract file each server is one ``[[mcp]]``
table whose keys are :class:`McpServer`'s fields::

    [[mcp]]
    name = "files"
    command = "npx"
    args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
    env = { LOG_LEVEL = "warn" }
    sandbox = true          # run it inside the run's OS sandbox

    [[mcp]]
    name = "search"
    url = "https://mcp.example.com/mcp"
    headers = { Authorization = "Bearer ..." }
    call_timeout = 120
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from io_harness._urls import UNPARSEABLE, without_password
from io_harness._validation import CheckedModel, loading
from io_harness.errors import ConfigError
from io_harness.policy._gate import Access
from io_harness.policy._rules import Act
from io_harness.tools._caller import DEFAULT_TOOL_TIMEOUT, MAX_RESULT_CHARS
from io_harness.tools._names import MCP_PREFIX, TOOL_NAME

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_START_TIMEOUT",
    "MAX_SERVER_NAME",
    "McpServer",
    "check_servers",
    "servers_from_tables",
    "tool_name",
    "tool_name_problem",
]

DEFAULT_CALL_TIMEOUT = DEFAULT_TOOL_TIMEOUT
"""Seconds one tool call may take, as for a caller's tool."""
DEFAULT_START_TIMEOUT = 30.0
"""Seconds a server has to start, answer the handshake and list its tools."""
SEPARATOR = "__"
"""Between the server's name and the tool's in an offered name."""
MAX_SERVER_NAME = 64 - len(MCP_PREFIX) - len(SEPARATOR) - 1
"""The longest server name that leaves room for a one-character tool name in 64."""
_SERVER_NAME = re.compile(r"[a-zA-Z0-9_-]+")
_KEYS = (
    "name", "command", "args", "env", "cwd", "url", "headers",
    "call_timeout", "start_timeout", "max_result_chars", "sandbox",
)  # fmt: skip
_STDIO_ONLY = ("args", "env", "cwd", "sandbox")


def tool_name(server: str, tool: str) -> str:
    """The name the model is offered for ``tool`` of ``server``: ``mcp__<server>__<tool>``."""
    return f"{MCP_PREFIX}{server}{SEPARATOR}{tool}"


def tool_name_problem(server: str, tool: str) -> str | None:
    """Why ``tool`` of ``server`` cannot be offered under its namespaced name, or ``None``."""
    name = tool_name(server, tool)
    if not TOOL_NAME.fullmatch(name):
        if len(name) > 64:
            return (
                f"MCP server {server!r}: its tool {tool!r} would be offered as {name!r}, "
                f"{len(name)} characters, over the 64 the vendors accept; shorten the server's name"
            )
        return (
            f"MCP server {server!r}: its tool {tool!r} would be offered as {name!r}, which is "
            "not 1-64 of a-z, A-Z, 0-9, '_' and '-' (what the vendors accept)"
        )
    return None


def _server_name_problem(name: str) -> str | None:
    if not _SERVER_NAME.fullmatch(name):
        return f"{name!r} is not made of a-z, A-Z, 0-9, '_' and '-' only"
    if SEPARATOR in name or name.endswith("_"):
        return (
            f"{name!r} holds {SEPARATOR!r} or ends with '_': a tool's name "
            f"(mcp__<server>__<tool>) must read back to one server"
        )
    if len(name) > MAX_SERVER_NAME:
        return (
            f"{name!r} is {len(name)} characters; at most {MAX_SERVER_NAME} leave room for "
            f"{MCP_PREFIX!r}, {SEPARATOR!r} and a tool's name within 64"
        )
    return None


class McpServer(CheckedModel):
    """One MCP server of a run: started over stdio, or reached over streamable HTTP.

    Build one with :meth:`stdio` or :meth:`http` (or from a contract's
    ``[[mcp]]`` table, :meth:`from_table`). Exactly one of ``command`` (stdio)
    and ``url`` (HTTP) is set. A stdio server's environment is ``env`` over a
    minimal base (``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``,
    ``USER``): nothing else of the harness's, its API keys included.

    With ``sandbox=True`` a stdio server runs inside the run's OS sandbox:
    it starts in the run's workspace (unless ``cwd`` names another folder,
    which it may then read), may write only the workspace and a scratch folder
    of its own (its ``HOME``), runs under the sandbox's caps, and each
    connection it opens goes through the sandbox's proxy and is decided by
    the run's policy.

    Limits: ``call_timeout`` seconds per call (the call ends as an
    observation); ``start_timeout`` seconds to start, answer the handshake and
    list the tools; ``max_result_chars`` of a call's result shown to the model,
    a longer one cut with a marker that says so. A mistake in any field is a
    :class:`ConfigError` naming it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """The server's name in its tools' names (``mcp__<name>__<tool>``) and in the trace."""
    command: str | None = None
    """The program of a stdio server, found on ``PATH`` (the server's) as a shell would."""
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    """Variables the stdio server gets over the minimal base; values are not shown by ``repr``."""
    cwd: Path | None = None
    """The folder a stdio server starts in (when ``None``: the harness's own, or the run's
    workspace for a sandboxed server)."""
    url: str | None = Field(None, repr=False)
    """The endpoint of a streamable HTTP server (``http://`` or ``https://``); not shown by
    ``repr``, since a query may hold a key (:meth:`target` is its origin and path)."""
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    """Headers sent with every HTTP request (a bearer token); not shown by ``repr``."""
    call_timeout: float = Field(DEFAULT_CALL_TIMEOUT, gt=0, allow_inf_nan=False, strict=True)
    start_timeout: float = Field(DEFAULT_START_TIMEOUT, gt=0, allow_inf_nan=False, strict=True)
    max_result_chars: int = Field(MAX_RESULT_CHARS, gt=0, strict=True)
    sandbox: bool = Field(False, strict=True)
    """Run a stdio server inside the run's OS sandbox (see the class's docstring)."""

    @classmethod
    def stdio(
        cls,
        name: str,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        *,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        max_result_chars: int = MAX_RESULT_CHARS,
        sandbox: bool = False,
    ) -> McpServer:
        """A server the harness starts as ``command args...`` and speaks to over stdio.

        With ``sandbox=True`` it runs inside the run's OS sandbox.
        """
        return cls(
            name=name,
            command=command,
            args=args,
            env=env if env is not None else {},
            cwd=cwd,
            call_timeout=call_timeout,
            start_timeout=start_timeout,
            max_result_chars=max_result_chars,
            sandbox=sandbox,
        )

    @classmethod
    def http(
        cls,
        name: str,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        max_result_chars: int = MAX_RESULT_CHARS,
    ) -> McpServer:
        """A server reached over streamable HTTP at ``url``, sending ``headers`` each request."""
        return cls(
            name=name,
            url=url,
            headers=headers if headers is not None else {},
            call_timeout=call_timeout,
            start_timeout=start_timeout,
            max_result_chars=max_result_chars,
        )

    @classmethod
    def from_table(
        cls, data: Any, where: str, *, key: str = "mcp", folder: Path | None = None
    ) -> McpServer:
        """The server described by one parsed ``[[mcp]]`` table.

        ``where`` (a file name) begins every error message and ``key`` is the
        table's key path, so a mistake reads ``contract.toml: mcp[0].call_timeout: ...``.
        With ``folder`` (the file's folder), a stdio server's relative ``cwd``
        resolves against it, and a stdio server without ``cwd`` starts there
        (a sandboxed one in the run's workspace).
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: {key}: expected a table")
        fields = dict(data)
        if folder is not None and "command" in fields and "url" not in fields:
            cwd = fields.get("cwd")
            if cwd is None and fields.get("sandbox") is not True:  # sandboxed: the workspace
                fields["cwd"] = folder
            elif isinstance(cwd, str):
                fields["cwd"] = folder / cwd
        try:
            with loading():
                return cls.model_validate(fields)
        except ValidationError as exc:
            raise ConfigError(f"{where}: {_described(exc, key)}") from None

    @field_validator("name")
    @classmethod
    def _name_fits(cls, name: str) -> str:
        problem = _server_name_problem(name)
        if problem is not None:
            raise ValueError(problem)
        return name

    @field_validator("command")
    @classmethod
    def _command_given(cls, command: str | None) -> str | None:
        if command is not None and not command.strip():
            raise ValueError("the command is empty")
        return command

    @field_validator("url")
    @classmethod
    def _url_reachable(cls, url: str | None) -> str | None:
        if url is None:
            return None
        shown = without_password(url)
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        except ValueError:  # Python's reason quotes the text it could not read
            raise ValueError(f"{shown!r} is not a URL: its host or port does not parse") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{shown!r} is not an http:// or https:// URL with a host")
        return url

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of 'command' (a stdio server) or 'url' (HTTP)")
        if self.url is not None:
            given = [k for k in _STDIO_ONLY if k in self.model_fields_set and getattr(self, k)]
            if given:
                raise ValueError(f"{given[0]!r} is for a stdio server (with 'command'), not 'url'")
        elif self.headers:
            raise ValueError("'headers' is for an HTTP server (with 'url'), not 'command'")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """How the server is reached: ``stdio`` (a program) or ``http``."""
        return "stdio" if self.command is not None else "http"

    def start_access(self) -> Access:
        """The act to check before the server is started or reached.

        A stdio server is an ``exec`` of its program (with its argv); an HTTP
        server is a ``net`` connection to ``host:port``, the port defaulted
        from the scheme (80, 443) and an IPv6 host in brackets.
        """
        if self.command is not None:
            return Access(Act.EXEC, self.command, (self.command, *self.args))
        assert self.url is not None
        return Access(Act.NET, host_port(self.url))

    def target(self) -> str:
        """What the server is, for the trace and messages: its command line or its URL's origin
        and path (``<unparseable URL>`` where a credential may be mistaken for the path)."""
        if self.command is not None:
            return " ".join([self.command, *self.args])
        assert self.url is not None
        shown = without_password(self.url)
        if shown.endswith(UNPARSEABLE):
            return shown
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{host_port(self.url)}{parts.path}"


def host_port(url: str) -> str:
    """``host:port`` of ``url``: the port defaulted from the scheme, an IPv6 host bracketed."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _described(exc: ValidationError, key: str) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        loc = ".".join(str(part) for part in error["loc"])
        where = f"{key}.{loc}" if loc else key
        if error["type"] == "extra_forbidden":
            problems.append(f"{where}: unknown key; the keys are: {', '.join(_KEYS)}")
        else:
            problems.append(f"{where}: {error['msg'].removeprefix('Value error, ')}")
    return "; ".join(problems)


def check_servers(servers: Sequence[McpServer]) -> None:
    """:class:`ConfigError` for an object that is not an :class:`McpServer`, or two of one name.

    Each server's own name was checked when it was built (``[a-zA-Z0-9_-]``,
    no ``__``, no trailing ``_``, at most :data:`MAX_SERVER_NAME` characters): so
    each offered name reads back to one server, and servers of distinct names
    never offer one name twice.
    """
    seen: set[str] = set()
    problems: list[str] = []
    for server in servers:
        if not isinstance(server, McpServer):
            problems.append(f"{type(server).__name__} object is not an McpServer")
            continue
        if server.name in seen:
            problems.append(f"two MCP servers are named {server.name!r}")
        seen.add(server.name)
    if problems:
        raise ConfigError("; ".join(dict.fromkeys(problems)))


def servers_from_tables(value: Any, where: str, *, folder: Path | None = None) -> list[McpServer]:
    """The servers of a contract's ``[[mcp]]`` tables (``value`` is ``data["mcp"]``), checked."""
    if not isinstance(value, list):
        raise ConfigError(f"{where}: mcp: expected an array of tables ([[mcp]])")
    servers = [
        McpServer.from_table(table, where, key=f"mcp[{index}]", folder=folder)
        for index, table in enumerate(value)
    ]
    try:
        check_servers(servers)
    except ConfigError as exc:
        raise ConfigError(f"{where}: mcp: {exc}") from None
    return servers
