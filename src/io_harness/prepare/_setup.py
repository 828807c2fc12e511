"""A run's tools: the built-ins its contract asks for, and what its harness supplied.

What a harness supplies that can be stored (its skills folders, whether memory
is on) is stored with the run as a :class:`RunSetup`, and a resume rebuilds
the same tools from it. What cannot be stored — a caller's tool is live code —
is stored as its name and a hash of its spec, and a resume must be given the
same tool again: one that is missing or changed is a :class:`ResumeError`
naming it, never a run that silently lost a tool part-way.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from io_harness._mcp import McpServer, McpSessions, ServerSandbox
from io_harness._mcp._session import StartCheck
from io_harness._validation import loading
from io_harness.contract import TaskContract
from io_harness.errors import ConfigError, ResumeError
from io_harness.loop._sandboxing import RunSandbox
from io_harness.policy._gate import Access, Gate
from io_harness.policy._hosts import join_net_target
from io_harness.policy._rules import Act, Effect
from io_harness.providers import Provider
from io_harness.providers._endpoints import (
    ProviderPlace,
    base_url_variable,
    moved_member,
    provider_places,
    started_base_urls,
)
from io_harness.sandbox import NetCheck
from io_harness.store import Store
from io_harness.store._records import StoredRun
from io_harness.tools import (
    ExecTool,
    HarnessTool,
    RunTools,
    TheFile,
    Workspace,
    single_file_tools,
    workspace_tools,
)
from io_harness.tools._ask import AskUserTool
from io_harness.tools._caller import CallerTool, Toolbox, spec_hash
from io_harness.tools._memory import ForgetTool, RememberTool
from io_harness.tools._read_skill import ReadSkillTool
from io_harness.tools._skills import Skill, discover_skills
from io_harness.tools._text import remove_partial_writes

__all__ = [
    "RunSetup",
    "build_tools",
    "mcp_sessions",
    "memory_scope",
    "run_skills",
    "server_sandbox",
]


class RunSetup(BaseModel):
    """What a run's harness supplied, as the run stores it (the ``setup`` column)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    caller_tools: dict[str, str] = {}
    """Each caller tool's name and the sha256 of its spec, in the order offered."""
    skills: tuple[Path, ...] = ()
    """The skills folders, absolute."""
    catalogue: dict[str, str] = {}
    """Each skill's name and description, as the system prompt lists them."""
    memory: bool = False
    ask: bool = False
    """Whether the harness offered ``ask_user`` (``Harness(ask=True)``)."""
    mcp: tuple[str, ...] = ()
    """The names of the run's MCP servers (their configuration may hold secrets)."""
    provider: tuple[ProviderPlace, ...] = ()
    """Where each member of the run's provider connected when it started (none: stored
    before endpoints were kept)."""

    @classmethod
    def of(
        cls,
        toolbox: Toolbox,
        folders: tuple[Path, ...],
        skills: tuple[Skill, ...],
        memory: bool,
        mcp: Sequence[McpServer],
        provider: Provider,
    ) -> RunSetup:
        """The setup of a new run offering every tool of ``toolbox``, ``skills`` and ``mcp``,
        calling ``provider``."""
        hashes = {spec.name: spec_hash(spec) for spec in toolbox.specs()}
        catalogue = {skill.name: skill.description for skill in skills}
        return cls(
            caller_tools=hashes,
            skills=folders,
            catalogue=catalogue,
            memory=memory,
            mcp=tuple(server.name for server in mcp),
            provider=provider_places(provider),
        )

    @classmethod
    def stored(cls, run: StoredRun) -> RunSetup:
        """The setup a run was stored with (nothing supplied, for a run stored before it)."""
        if run.setup_json is None:
            return cls()
        try:
            with loading():
                return cls.model_validate_json(run.setup_json)
        except ValidationError as exc:
            raise ResumeError(
                f"run {run.id!r} holds a setup this version cannot read: {exc}"
            ) from None

    def caller_tools_from(self, toolbox: Toolbox, run_id: str) -> Toolbox:
        """The run's caller tools, taken from the resuming harness's ``toolbox``.

        Only the tools the run started with are offered; a tool the harness
        lacks, or whose spec has changed, is a :class:`ResumeError`.
        """
        kept = Toolbox()
        for name, digest in self.caller_tools.items():
            tool = toolbox.get(name)
            if tool is None:
                raise ResumeError(
                    f"run {run_id!r} was started with the caller tool {name!r}, which this "
                    "harness does not have; resume with a Harness whose tools include it"
                )
            if spec_hash(toolbox.spec_of(name)) != digest:
                raise ResumeError(
                    f"the caller tool {name!r} has changed since run {run_id!r} started (its "
                    "name, description or parameters differ); resume with the tool as it was"
                )
            kept = kept.with_(tool)
        return kept

    def started_base_urls(self) -> dict[str, str]:
        """The base URL the run started each provider name with, where one is known."""
        return started_base_urls(self.provider)

    def check_provider(self, provider: Provider, run_id: str) -> None:
        """Refuse a resume whose ``provider`` would connect where the run's did not.

        A member named as one the run started with must reach one of the
        endpoints that one reached (its base URL may come from the environment,
        which another shell sets differently); a :class:`ResumeError` says where
        the run started and how to reach it again.
        """
        moved = moved_member(self.provider, provider)
        if moved is not None:
            member, before = moved
            url = self.started_base_urls().get(member.name)
            raise _moved(run_id, member, before, url)

    def mcp_from(self, servers: Sequence[McpServer], run_id: str) -> tuple[McpServer, ...]:
        """The run's MCP servers, taken from the resuming harness's ``servers``.

        A server the run started with and the harness lacks is a
        :class:`ResumeError`; the harness's other servers are not started.
        """
        by_name = {server.name: server for server in servers}
        for name in self.mcp:
            if name not in by_name:
                raise ResumeError(
                    f"run {run_id!r} was started with the MCP server {name!r}, which this "
                    "harness does not have; resume with a Harness whose mcp includes it"
                )
        return tuple(by_name[name] for name in self.mcp)

    def skills_again(self, run_id: str, contract: TaskContract, gate: Gate) -> tuple[Skill, ...]:
        """The run's skills, read again from its folders; they must be the ones it lists.

        The system prompt the run was started with lists each skill's name and
        description: a skill since removed, added, renamed or redescribed is a
        :class:`ResumeError` naming it (an edit of a body is read as it is now).
        """
        if not self.skills:
            return ()
        try:
            skills = run_skills(self.skills, contract, gate)
        except ConfigError as exc:
            raise ResumeError(f"run {run_id!r}: its skills no longer load: {exc}") from None
        now = {skill.name: skill.description for skill in skills}
        for name in sorted(now.keys() | self.catalogue.keys()):
            if now.get(name) != self.catalogue.get(name):
                change = (
                    "is gone"
                    if name not in now
                    else "is new"
                    if name not in self.catalogue
                    else "has a new description"
                )
                raise ResumeError(
                    f"run {run_id!r} lists the skills it started with, and skill {name!r} "
                    f"{change} since; resume with the skills as they were"
                )
        return skills


@contextlib.asynccontextmanager
async def mcp_sessions(
    servers: Sequence[McpServer], may_start: StartCheck, sandbox: ServerSandbox
) -> AsyncIterator[McpSessions | None]:
    """The run's MCP sessions, one per server, closed however the block ends.

    Opened inside the run's network check, so each HTTP server's requests
    are decided by the run's policy; ``may_start`` decides a restart;
    servers with ``sandbox = true`` run in ``sandbox``. ``None`` when the run
    has no server.
    """
    if not servers:
        yield None
        return
    sessions = await McpSessions.open(servers, may_start=may_start, sandbox=sandbox)
    try:
        yield sessions
    finally:
        await sessions.close()


def server_sandbox(contract: TaskContract, gate: Gate, chosen: RunSandbox) -> ServerSandbox:
    """Where the run's servers with ``sandbox = true`` run: its sandbox, over its workspace,
    each connection a ``net`` act of the run's gate (as a command's through the proxy)."""
    return ServerSandbox(chosen.sandbox, contract.root.resolve(), _net_check(gate))


def memory_scope(contract: TaskContract) -> str:
    """Where a run's memory lives: the canonical root of its workspace."""
    return str(contract.root.resolve())


def run_skills(folders: Sequence[Path], contract: TaskContract, gate: Gate) -> tuple[Skill, ...]:
    """The skills a run offers: read from the run's workspace's descriptor where a folder
    lies in it, never through a symlink, and each file only if the run's policy lets the
    agent read it where it is."""
    root = contract.root.resolve()

    def readable(path: Path) -> bool:
        target = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        return gate.readable_quietly(target)

    within = Workspace(root) if contract.mode == "workspace" else None
    return discover_skills(folders, within=within, readable=readable)


def _moved(run_id: str, member: Provider, before: tuple[str, ...], url: str | None) -> ResumeError:
    """The refusal of a resume whose ``member`` would connect elsewhere than ``before``."""
    said = (
        f"run {run_id!r} was started with the provider {member.name!r} connecting to "
        f"{', '.join(before)}, and this resume's would connect to "
        f"{', '.join(member.endpoints())}; a resume must reach the endpoint the run "
        "started with, so nothing was sent"
    )
    variable = base_url_variable(member)
    ways = [f"base_url={url!r}"] if url else []
    if variable is not None:
        ways.append(f"set {variable}")
    shown = f" ({url})" if url else ""
    shell = (
        f"{said}: set {variable} to the base URL the run started with{shown}"
        if variable is not None
        else f"{said}: give --provider the URL the run started with{shown}"
    )
    reach = " or ".join(ways) or "its base URL"
    return ResumeError(f"{said}: resume with the provider at that endpoint ({reach})", shell=shell)


def build_tools(
    contract: TaskContract,
    gate: Gate,
    chosen: RunSandbox,
    started_at: float,
    *,
    caller: Toolbox,
    skills: tuple[Skill, ...],
    memory: Store | None,
    mcp: McpSessions | None = None,
    spawn: HarnessTool[Any] | None = None,
    ask: bool = False,
    sweep: bool = True,
    private: Sequence[Path] = (),
) -> RunTools:
    """The run's tools, after removing what writes cut short by a crash left behind.

    ``memory`` is the store memory lives in, when the run has memory on;
    ``spawn`` is the agent's ``spawn_agent``, when it is an agent of a tree.
    ``sweep=False`` skips the removal: a sub-agent's workspace was swept by its
    root's start (or is a fresh copy). ``private`` are the harness's own files
    (its store's) that the workspace may hold: its tools never reach them.
    """
    tools: list[HarnessTool[Any]]
    if contract.mode == "file":
        assert contract.path is not None
        if sweep:
            TheFile.of(contract.path).remove_partial_writes()
        tools = single_file_tools(contract.path)
    else:
        workspace = Workspace(contract.root, may_read=gate.readable, private=private)
        if sweep:
            remove_partial_writes(workspace)
        wall = contract.budget.max_wall_seconds
        wall_end = started_at + wall if wall is not None else None
        tools = workspace_tools(workspace, wall_end)
        if "exec" in contract.tools:
            tools.append(ExecTool(workspace, chosen.sandbox, wall_end, _net_check(gate)))
    if skills:
        tools.append(ReadSkillTool(skills, contract.root.resolve()))
    if memory is not None:
        scope = memory_scope(contract)
        tools += [RememberTool(memory, scope), ForgetTool(memory, scope)]
    if spawn is not None:
        tools.append(spawn)
    if ask:
        tools.append(AskUserTool())
    tools += [CallerTool(tool, caller.spec_of(tool_name)) for tool_name, tool in caller.items()]
    if mcp is not None:
        tools += mcp.tools()
    return RunTools(tools)


def _net_check(gate: Gate) -> NetCheck:
    """Each connection a command makes through the sandbox's proxy is a ``net`` act.

    A command cannot wait for a person mid-connection, so only an outright
    allow lets it through; the verdict is a trace row of the call.
    """

    async def check(host: str, port: int) -> bool:
        # join_net_target brackets an IPv6 host: "::1:8080" would be one bare address.
        target = join_net_target(host, port)
        return gate.check_outright(Access(Act.NET, target)).effect is Effect.ALLOW

    return check
