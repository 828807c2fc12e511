"""The :class:`Harness`: how runs are executed, for as many runs as the caller starts.

A :class:`~io_harness.TaskContract` says what is to be done and is plain
data; a harness holds the live parts that execute it — the provider, the
store, the policy and approver, the sandbox, prices, the observer, the
caller's tools, skills and memory. The module-level :func:`run` and
:func:`resume` build a harness from the same options and use it once.
"""

from __future__ import annotations

import copy
import shlex
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from io_harness._agents import AgentKit
from io_harness._mcp import McpServer, McpSessions, ServerSandbox, check_servers
from io_harness._mcp._session import check_sandboxes
from io_harness._net import RunNet, checking
from io_harness._preflight import (
    caller_toolbox,
    check_criterion,
    check_endpoints,
    check_mcp_start,
    check_new_run_id,
    check_prices,
    check_provider,
    check_types,
    checked_labels,
    mcp_start_refusal,
    new_run_id,
    sync,
)
from io_harness._queue._database import WAITING_LABEL
from io_harness.compaction._settings import Compaction
from io_harness.contract import TaskContract
from io_harness.errors import ConfigError, StorageError
from io_harness.loop import (
    DEFAULT_SANDBOX,
    RunResult,
    RunSandbox,
    RunSetup,
    SandboxChoice,
    choose_sandbox,
    mcp_sessions,
    run_skills,
    server_sandbox,
)
from io_harness.loop._deferral import Resumption, stored_model
from io_harness.loop._outcome import RunOutcome
from io_harness.loop._resuming import decision_for, stored_contract, stored_gate, stored_prices
from io_harness.loop._sandboxing import check_choice
from io_harness.observe import Observer
from io_harness.policy._approval import Approver, Decision
from io_harness.policy._gate import Gate
from io_harness.policy._policy import Policy
from io_harness.pricing import PriceTable
from io_harness.providers import Provider
from io_harness.roles import Role, Roles
from io_harness.sandbox import SandboxConfig
from io_harness.sandbox._shield import keeping_private
from io_harness.store import Store
from io_harness.store._records import RunSummary, StoredRun, TreePlace
from io_harness.tools._caller import Tool, Toolbox
from io_harness.tools._skills import Skill, discover_skills
from io_harness.trees import Containment, Ledger, Tree

if TYPE_CHECKING:
    from io_harness._queue import Drive, WorkReport

__all__ = ["Harness", "HarnessOptions", "resume", "resume_sync", "run", "run_sync"]


class HarnessOptions(TypedDict, total=False):
    """The keyword options of :class:`Harness`, as :func:`run` and :func:`resume` take them."""

    store: Store | None
    policy: Policy | None
    approver: Approver | None
    sandbox: SandboxChoice
    prices: PriceTable | None
    observer: Observer | None
    tools: Toolbox | Iterable[Tool] | None
    skills: str | Path | None
    memory: bool
    mcp: Sequence[McpServer] | None
    containment: Containment | None
    roles: Roles | str | Path | None
    compaction: Compaction | None


class Harness:
    """How runs are executed: one harness serves many runs, one after another or at once.

    - ``provider``: the model (any :class:`~io_harness.Provider`).
    - ``store``: where runs live; an in-memory store when omitted, kept for
      the harness's life so its runs can be resumed and listed.
    - ``policy``: governs every act of the agent's tools and the criterion,
      and every connection the harness opens; :meth:`Policy.default` when
      omitted: net denied, the rest allowed (the file tools stay in the
      workspace either way, commands in the sandbox unless it is
      :data:`NO_SANDBOX`, and the provider reaches its endpoints through the
      run's ``provider`` layer). It is stored with each run.
    - ``approver``: decides what the policy asks about; without one an ask
      defers the run (``AWAITING_APPROVAL``) until :meth:`resume` is given a
      decision, in any later process.
    - ``sandbox``: where commands run — :data:`DEFAULT_SANDBOX` (the backend
      ``select()`` finds), a :class:`~io_harness.SandboxConfig` to select for,
      a :class:`~io_harness.Sandbox`, or :data:`NO_SANDBOX` (uncontained).
    - ``prices``: a :class:`PriceTable` to count spend (needed by a contract
      with ``budget.max_cost``); stored with each run, so a resume needs none.
    - ``observer``: receives each :data:`~io_harness.RunEvent`.
    - ``tools``: the caller's own tools (:class:`Tool` objects or ``@tool``
      functions, or a :class:`Toolbox`), offered beside the built-ins; each
      call is an ``exec`` act on the tool's name under the policy.
    - ``skills``: a folder of skills (see ``docs/skills.md``), added to any
      folder the contract names.
    - ``memory``: offer ``remember`` and ``forget``; entries live in the store
      per workspace and open later runs on it.
    - ``mcp``: :class:`McpServer` s whose tools are offered as
      ``mcp__<server>__<tool>``; each run starts them (an ``exec`` of the
      program or a ``net`` of the host: allowed, or asked of the approver
      then, since a start cannot defer) and closes them.
    - ``containment``: a :class:`Containment` makes each run the root of a
      tree: every agent is offered ``spawn_agent``, and the whole tree draws
      on one ledger bounded by it (see ``docs/trees.md``). Without it no agent
      can spawn.
    - ``roles``: a roles file (or :class:`Roles`): a contract's ``role = "NAME"``
      runs under that role, its tools composed from the workspace's committed
      descriptions for every call (see ``docs/roles.md``).
    - ``compaction``: a :class:`Compaction` compacts the model's view of a run
      that nears its context window, never losing the task (see
      ``docs/compaction.md``).

    An option of the wrong type, a bad tool or a skills folder that does not
    load is a :class:`ConfigError` raised here; what depends on a contract
    (a criterion the policy refuses, a sandbox no backend gives) is raised
    by :meth:`run` before its first provider call.
    """

    def __init__(
        self,
        provider: Provider,
        *,
        store: Store | None = None,
        policy: Policy | None = None,
        approver: Approver | None = None,
        sandbox: SandboxChoice = DEFAULT_SANDBOX,
        prices: PriceTable | None = None,
        observer: Observer | None = None,
        tools: Toolbox | Iterable[Tool] | None = None,
        skills: str | Path | None = None,
        memory: bool = False,
        mcp: Sequence[McpServer] | None = None,
        containment: Containment | None = None,
        roles: Roles | str | Path | None = None,
        compaction: Compaction | None = None,
    ) -> None:
        check_provider(provider)
        check_types(store=store, policy=policy, approver=approver, prices=prices)
        check_choice(sandbox)
        if observer is not None and not callable(observer):
            raise ConfigError(f"observer must be callable, not {type(observer).__name__}")
        if not isinstance(memory, bool):
            raise ConfigError(f"memory must be True or False, not {memory!r}")
        if skills is not None and not isinstance(skills, str | Path):
            raise ConfigError(f"skills must be a folder's path, not {type(skills).__name__}")
        self.provider = provider
        self.store: Store = store if store is not None else Store.memory()
        self.policy = policy
        self.approver = approver
        self.sandbox = sandbox
        self.prices = prices
        self.observer = observer
        self.tools = caller_toolbox(tools)
        self._first_box: Toolbox | None = self.tools
        """The box built here: the first run uses it rather than ask each spec() again."""
        self.skills = Path(skills).absolute() if skills is not None else None
        if self.skills is not None:
            discover_skills((self.skills,))  # a bad folder is said now; each run reads it again
        self.memory = memory
        if isinstance(mcp, McpServer | str | Mapping):
            raise ConfigError(f"mcp must be a list of McpServer, not {type(mcp).__name__}")
        self.mcp: tuple[McpServer, ...] = tuple(mcp) if mcp is not None else ()
        check_servers(self.mcp)
        if containment is not None and not isinstance(containment, Containment):
            raise ConfigError(
                f"containment must be a Containment, not {type(containment).__name__}"
            )
        self.containment = containment
        if isinstance(roles, str | Path):
            roles = Roles.from_toml(roles)
        elif roles is not None and not isinstance(roles, Roles):
            raise ConfigError(f"roles must be a Roles or a roles file, not {type(roles).__name__}")
        self.roles = roles
        if compaction is not None and not isinstance(compaction, Compaction):
            raise ConfigError(f"compaction must be a Compaction, not {type(compaction).__name__}")
        self.compaction = compaction
        if not isinstance(sandbox, SandboxConfig) and sandbox is not DEFAULT_SANDBOX:
            # NO_SANDBOX, or a Sandbox of the caller's: known now, not only at the run.
            check_sandboxes(self.mcp, ServerSandbox(choose_sandbox(sandbox).sandbox, Path()))

    def __repr__(self) -> str:
        return f"Harness({self.provider.name}:{self.provider.model}, store={self.store!r})"

    def _tools_now(self) -> Toolbox:
        """The caller's tools with their specs as of now: each ``spec()`` is asked once a run.

        The first run uses the answers the harness got when it was built.
        """
        box, self._first_box = self._first_box, None
        return box if box is not None else caller_toolbox(Toolbox(self.tools))

    # -- running -------------------------------------------------------------------

    async def run(
        self,
        contract: TaskContract,
        *,
        run_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> RunResult:
        """Run the agent on ``contract`` until the criterion passes or a budget ends it.

        Every step is committed to the store before the next begins.
        ``run_id`` names the run (an id already in the store is a
        :class:`ConfigError`); by default one is generated. ``labels`` are
        string pairs stored with the run, for the caller's bookkeeping.

        Configuration mistakes raise :class:`ConfigError`; a criterion's
        command or a provider endpoint the policy does not allow outright, or
        an MCP server's start it refuses (or asks about, and no approver
        approves), raises :class:`RefusedError`; an MCP server that
        cannot start, answer or list its tools raises :class:`McpError`; a
        sandbox configuration no backend here can give raises
        :class:`SandboxError` — all before any provider call. Everything after
        is in the returned :class:`RunResult`.
        """
        result = await self._start(contract, run_id, labels, drive=True)
        assert result is not None
        return result

    async def _start(
        self,
        contract: TaskContract,
        run_id: str | None,
        labels: Mapping[str, str] | None,
        *,
        drive: bool,
    ) -> RunResult | None:
        """:meth:`run`'s checks and the run's creation, then its drive when ``drive`` is true
        (:meth:`enqueue` stores the run for a worker to drive instead)."""
        if not isinstance(contract, TaskContract):
            raise ConfigError(f"contract must be a TaskContract, not {type(contract).__name__}")
        if run_id is not None and (not isinstance(run_id, str) or not run_id):
            raise ConfigError(f"run_id must be a non-empty string, not {run_id!r}")
        contract.check()
        if self.containment is not None and contract.mode != "workspace":
            raise ConfigError(
                "a harness with containment spawns sub-agents into a workspace; this contract "
                "is in file mode (use TaskContract.workspace)"
            )
        role = self._role(contract)
        provider = self._provider_for(role)
        check_prices(contract, provider, self.prices)
        labels = checked_labels(labels)
        run_id = run_id or new_run_id()
        policy = self.policy if self.policy is not None else Policy.default()
        gate = Gate(policy, self.approver, goal=contract.goal, run_id=run_id)
        net = RunNet.of(gate, provider)
        check_criterion(contract, gate)
        check_endpoints(provider, net)
        folders = tuple(dict.fromkeys(f for f in (self.skills, contract.skills) if f is not None))
        skills = run_skills(folders, contract, gate)
        store = self.store
        check_new_run_id(store, run_id)  # before an approver is asked about a server
        chosen = choose_sandbox(self.sandbox)
        contained = server_sandbox(contract, gate, chosen)
        check_sandboxes(self.mcp, contained)
        await check_mcp_start(self.mcp, gate)
        caller = self._tools_now()
        setup = RunSetup.of(caller, folders, skills, self.memory, self.mcp)
        with store.lease(run_id), checking(net), keeping_private(store.files()):
            may_start = partial(mcp_start_refusal, gate=gate)
            async with mcp_sessions(self.mcp, may_start, contained) as sessions:
                kit = self._kit(
                    provider, role, chosen, caller, skills, setup, sessions, self.prices
                )
                started_at = time.time()
                node, place = None, None
                if self.containment is not None:
                    tree = self._tree(kit, run_id, self.containment, started_at)
                    node = tree.node(run_id, 0, contract, gate)
                    place = TreePlace(root_id=run_id, tree_json=self.containment.model_dump_json())
                tools = kit.tools(contract, gate, started_at, node)
                store.create_run(
                    kit.new_run(
                        run_id, contract, gate, tools, started_at, labels=labels, tree=place
                    )
                )
                if not drive:
                    return None
                engine = kit.engine(
                    contract, tools, store.load_run(run_id), gate, node, owns_sessions=True
                )
                return await _ended(kit, await engine.drive(resumed=False))

    def _role(self, contract: TaskContract) -> Role | None:
        """The role the contract names, from this harness's roles file."""
        if contract.role is None:
            return None
        if self.roles is None:
            raise ConfigError(
                f"the contract names the role {contract.role!r}, but this harness has no roles "
                "file (Harness(roles=...))"
            )
        return self.roles.get(contract.role)

    def _provider_for(self, role: Role | None) -> Provider:
        """The role's provider when it names one; this harness's otherwise."""
        if role is None or role.provider is None:
            return self.provider
        from io_harness.providers._spec import provider_from_spec

        return provider_from_spec(role.provider)

    def _compaction(self, role: Role | None) -> Compaction | None:
        """The role's compaction setting when it has one; this harness's otherwise."""
        if role is not None and role.compaction is not None:
            return role.compaction
        return self.compaction

    def _window(
        self, role: Role | None, provider: Provider, prices: PriceTable | None
    ) -> int | None:
        """The model's context window, when compaction is on: the role's, the provider's or the
        price table's, in that order; compaction without one is a ConfigError."""
        if self._compaction(role) is None:
            return None
        if role is not None and role.context_window is not None:
            return role.context_window
        said = getattr(provider, "context_window", None)
        if isinstance(said, int) and said > 0:
            return said
        price = prices.price_for(provider.model) if prices is not None else None
        if price is not None and price.context_window is not None:
            return price.context_window
        raise ConfigError(
            f"compaction needs the context window of {provider.model!r}: give it in the roles "
            "file (context_window), on the provider, or in the price table (context_window)"
        )

    def _kit(
        self,
        provider: Provider,
        role: Role | None,
        chosen: RunSandbox,
        caller: Toolbox,
        skills: tuple[Skill, ...],
        setup: RunSetup,
        sessions: McpSessions | None,
        prices: PriceTable | None,
    ) -> AgentKit:
        return AgentKit(
            provider=provider,
            role=role,
            store=self.store,
            observer=self.observer,
            prices=prices,
            approver=self.approver,
            chosen=chosen,
            caller=caller,
            skills=skills,
            memory=setup.memory,
            setup_json=setup.model_dump_json(),
            sessions=sessions,
            compaction=self._compaction(role),
            window=self._window(role, provider, prices),
        )

    def _tree(
        self, kit: AgentKit, root_id: str, containment: Containment, started_at: float
    ) -> Tree:
        """The tree a run roots (or a resume of it rebuilds), with ``kit`` as its driver."""
        nodes = self.store.tree(root_id)
        ledger = (
            Ledger.restored(containment, self.store, root_id)
            if nodes
            else Ledger(containment, started_at)
        )
        currency = kit.prices.currency if kit.prices is not None else ""
        kit.tree = Tree(root_id, containment, ledger, self.store, kit, currency)
        return kit.tree

    async def resume(
        self,
        run_id: str,
        *,
        decision: Decision | None = None,
        replace_policy: bool = False,
    ) -> RunResult:
        """Continue a run from its last committed step, with the same conversation.

        Completed steps are not repeated; tokens and money already spent still
        count; wall time counts from the run's start, downtime included. A
        finished run returns its stored result unchanged; an unknown id is a
        :class:`ResumeError`.

        The run keeps what it was started with: its policy (a harness whose
        ``policy`` differs is a :class:`ConfigError` unless
        ``replace_policy=True`` says the change is meant), its prices (unless
        this harness has its own), its skills and memory setting, and its
        sandbox configuration (unless this harness names a sandbox). Its
        caller tools and MCP servers must be this harness's too: one missing,
        or a caller tool whose spec changed, is a :class:`ResumeError` naming it.

        A run ``AWAITING_APPROVAL`` continues with the deferred act:
        ``decision`` decides it (so does a decision stored earlier with ``ioh
        approve``, or else the approver is asked); it is performed once, and
        the rest of its step and the run follow.
        """
        if not isinstance(run_id, str) or not run_id:
            raise ConfigError(f"run_id must be a non-empty string, not {run_id!r}")
        if decision is not None and not isinstance(decision, Decision):
            raise ConfigError(f"decision must be a Decision, not {type(decision).__name__}")
        store = self.store
        place = store.load_run(run_id).tree
        if place is not None and place.root_id != run_id:
            # A sub-agent goes on as part of its tree: the tree resumes from its root.
            return await self.resume(
                place.root_id, decision=decision, replace_policy=replace_policy
            )
        if place is not None and decision is not None:
            decision = decide_in_tree(store, run_id, decision)
        with store.lease(run_id):
            stored = store.load_run(run_id)
            if WAITING_LABEL in stored.labels and store.restart_clock(run_id, WAITING_LABEL):
                stored = store.load_run(run_id)  # a queued run's first drive: its clock starts
            if stored.status == "finished":
                if decision is not None:
                    raise ConfigError(f"run {run_id!r} has finished; it takes no decision")
                return RunResult.from_stored(stored)
            if stored.status == "awaiting" and stored.pending is None:
                raise StorageError(f"run {run_id!r} is awaiting approval but holds no open request")
            contract = stored_contract(stored)
            contract.check()
            prices = self.prices if self.prices is not None else stored_prices(stored)
            role = self._role(contract)
            provider = self._provider_for(role)
            check_prices(contract, provider, prices)
            gate, replaced = stored_gate(
                stored, contract, self.approver, self.policy, replace_policy
            )
            resumption = Resumption(stored.pending, decision_for(stored, gate, decision), replaced)
            net = RunNet.of(gate, provider)
            check_criterion(contract, gate)
            check_endpoints(provider, net)
            setup = RunSetup.stored(stored)
            caller = setup.caller_tools_from(self._tools_now(), run_id)
            skills = setup.skills_again(run_id, contract, gate)
            servers = setup.mcp_from(self.mcp, run_id)
            chosen = choose_sandbox(self.sandbox, stored.sandbox_json, run_id)
            contained = server_sandbox(contract, gate, chosen)
            check_sandboxes(servers, contained)
            await check_mcp_start(servers, gate)
            with checking(net), keeping_private(self.store.files()):
                may_start = partial(mcp_start_refusal, gate=gate)
                async with mcp_sessions(servers, may_start, contained) as sessions:
                    kit = self._kit(provider, role, chosen, caller, skills, setup, sessions, prices)
                    node = None
                    if stored.tree is not None:
                        containment = stored_containment(stored)
                        tree = self._tree(kit, run_id, containment, stored.started_at)
                        node = tree.node(run_id, 0, contract, gate)
                    tools = kit.tools(contract, gate, stored.started_at, node)
                    engine = kit.engine(contract, tools, stored, gate, node, owns_sessions=True)
                    result = await engine.drive(resumed=True, resumption=resumption)
                    return await _ended(kit, result)

    def run_sync(
        self,
        contract: TaskContract,
        *,
        run_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> RunResult:
        """:meth:`run` for callers without an event loop."""
        return sync(self.run(contract, run_id=run_id, labels=labels))

    def resume_sync(
        self, run_id: str, *, decision: Decision | None = None, replace_policy: bool = False
    ) -> RunResult:
        """:meth:`resume` for callers without an event loop."""
        return sync(self.resume(run_id, decision=decision, replace_policy=replace_policy))

    # -- the queue (a PostgreSQL store) ------------------------------------------------

    async def enqueue(
        self,
        contract: TaskContract,
        *,
        run_id: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> str:
        """Store a run of ``contract`` and queue it for workers (:meth:`work`); its id.

        The run is checked and created as :meth:`run` creates it (every error
        :meth:`run` raises before its first provider call is raised here),
        with this harness's policy, prices and setup, but not driven: a
        worker on any machine drives it from the store. The store must be
        PostgreSQL (``Store.open("postgresql://...")``), or this is a
        :class:`ConfigError`; a database that cannot be reached is a
        :class:`StorageError`. The run is labelled ``ioh.queue``, so a
        decision it awaits later queues it again (:meth:`requeue`, ``ioh
        approve``). Its wall-time budget counts from its first drive, not from
        now: its time in the queue is not its own.
        """
        from io_harness._queue import ENTRYPOINT, QUEUE_LABEL, put, queue_url

        url = queue_url(self.store)
        if run_id is None:
            run_id = new_run_id()
        queued = checked_labels(labels) | {QUEUE_LABEL: ENTRYPOINT, WAITING_LABEL: "1"}
        await self._start(contract, run_id, queued, drive=False)
        try:
            await put(url, [run_id])
        except StorageError as exc:
            unqueued = f"run {run_id!r} is stored but could not be queued ({exc})"
            raise StorageError(
                f"{unqueued}; queue it with requeue() once the database answers",
                shell=f"{unqueued}; ioh resume {shlex.quote(run_id)}{{store}} drives it here",
            ) from None
        return run_id

    async def requeue(self, run_id: str, *, decision: Decision | None = None) -> None:
        """Queue a stored run again for the workers, its tree's root when it is a sub-agent.

        ``decision`` decides the act the run (or an agent of its tree) awaits,
        stored first; without one, a decision stored earlier (``ioh approve
        --no-resume``, :meth:`Store.decide`) is performed, and a run that
        awaits none is simply driven on from its last committed step. A
        queued job is harmless if the run is driven or finished already.
        """
        from io_harness._queue import requeue_run

        if not isinstance(run_id, str) or not run_id:
            raise ConfigError(f"run_id must be a non-empty string, not {run_id!r}")
        await requeue_run(self.store, run_id, decision)

    async def work(
        self,
        *,
        concurrency: int = 4,
        drain: bool = False,
        provider_for: Callable[[RunSummary], Provider] | None = None,
        heartbeat_timeout: float = 30.0,
        fleet_limit: int = 0,
        on_drive: Callable[[Drive], None] | None = None,
    ) -> WorkReport:
        """Drive queued runs with this harness, ``concurrency`` at once, until cancelled.

        Each job is a :meth:`resume` of its run by this harness (with
        ``policy=None`` each run keeps the policy it was queued with), so
        any number of processes on any number of machines can work one queue:
        a run has one driver at a time, and a worker that dies has its runs
        taken over by the others once it has missed ``heartbeat_timeout``
        seconds of heartbeats. ``provider_for`` builds the provider of each
        run (from its labels, say) instead of this harness's. With ``drain``
        the call returns when no job is queued or driven anywhere.
        ``fleet_limit`` (0: none) caps the runs all the queue's workers drive at
        once (give every worker the same). ``on_drive`` hears what became of
        each job (a :class:`Drive`). Cancelling the call
        stops the runs in flight, keeping their committed steps, and hands
        them back to the queue. The store must be PostgreSQL.
        """
        from io_harness._queue import Worker, summary_of

        if provider_for is not None and not callable(provider_for):
            raise ConfigError(f"provider_for must be callable, not {type(provider_for).__name__}")

        async def drive(run_id: str) -> RunResult:
            harness = self
            if provider_for is not None:
                run = summary_of(self.store, run_id)
                harness = self._with_provider(provider_for(run))
            return await harness.resume(run_id)

        worker = Worker(
            self.store,
            drive,
            concurrency=concurrency,
            drain=drain,
            heartbeat_timeout=heartbeat_timeout,
            fleet_limit=fleet_limit,
            on_drive=on_drive,
        )
        return await worker.run()

    def _with_provider(self, provider: Provider) -> Harness:
        """This harness with another provider (the rest shared), for one run of :meth:`work`."""
        check_provider(provider)
        twin = copy.copy(self)
        twin.provider = provider
        twin._first_box = None
        return twin


async def _ended(kit: AgentKit, result: RunResult) -> RunResult:
    """A root's result, after its tree's isolated copies are removed (when it is over)."""
    if kit.tree is not None and result.outcome is not RunOutcome.AWAITING_APPROVAL:
        kit.tree.remove_copies()
    return result


def stored_containment(stored: StoredRun) -> Containment:
    """The containment a tree's root was started with."""
    assert stored.tree is not None
    return stored_model(Containment, stored.tree.tree_json, "a containment", stored.id)


def decide_in_tree(store: Store, root_id: str, decision: Decision) -> Decision | None:
    """Store ``decision`` on the action the tree awaits, when an agent under the root awaits it.

    The root's own awaited action keeps the decision for the resume to use.
    """
    if store.approvals(root_id):
        return decision
    for node in store.tree(root_id):
        waiting = store.approvals(node.run.id)
        if waiting:
            store.decide(
                waiting[0].id,
                decision if decision.by else decision.model_copy(update={"by": "resume()"}),
            )
            return None
    raise ConfigError(f"run {root_id!r} and its sub-agents await no decision; it takes none")


# -- the module-level conveniences -------------------------------------------------


async def run(
    contract: TaskContract,
    provider: Provider,
    *,
    run_id: str | None = None,
    labels: Mapping[str, str] | None = None,
    **options: Unpack[HarnessOptions],
) -> RunResult:
    """``Harness(provider, **options).run(contract, ...)``: one run, every option of both."""
    return await Harness(provider, **options).run(contract, run_id=run_id, labels=labels)


async def resume(
    run_id: str,
    provider: Provider,
    *,
    decision: Decision | None = None,
    replace_policy: bool = False,
    **options: Unpack[HarnessOptions],
) -> RunResult:
    """``Harness(provider, **options).resume(run_id, ...)``; ``store=`` is required here.

    A harness built only to resume needs the store the run is in.
    """
    if options.get("store") is None:
        raise ConfigError("resume needs the store the run is in (store=...)")
    harness = Harness(provider, **options)
    return await harness.resume(run_id, decision=decision, replace_policy=replace_policy)


def run_sync(
    contract: TaskContract,
    provider: Provider,
    *,
    run_id: str | None = None,
    labels: Mapping[str, str] | None = None,
    **options: Unpack[HarnessOptions],
) -> RunResult:
    """:func:`run` for callers without an event loop."""
    return sync(run(contract, provider, run_id=run_id, labels=labels, **options))


def resume_sync(
    run_id: str,
    provider: Provider,
    *,
    decision: Decision | None = None,
    replace_policy: bool = False,
    **options: Unpack[HarnessOptions],
) -> RunResult:
    """:func:`resume` for callers without an event loop."""
    return sync(
        resume(run_id, provider, decision=decision, replace_policy=replace_policy, **options)
    )
