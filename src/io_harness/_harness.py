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
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from io_harness._mcp import McpServer, ServerSandbox, check_servers
from io_harness._mcp._session import check_sandboxes
from io_harness._preflight import (
    caller_toolbox,
    check_provider,
    check_types,
    checked_labels,
    checked_option,
    new_run_id,
    roles_given,
    sync,
)
from io_harness._queue._database import WAITING_LABEL
from io_harness._retry import DEFAULT_RETRY, RetryPolicy
from io_harness.compaction import Compaction
from io_harness.contract import Budget, TaskContract
from io_harness.errors import ConfigError, StorageError
from io_harness.loop._outcome import RunResult
from io_harness.loop._sandboxing import (
    DEFAULT_SANDBOX,
    SandboxChoice,
    check_choice,
    choose_sandbox,
)
from io_harness.observe import Observer
from io_harness.policy._approval import Approver, Decision
from io_harness.policy._policy import Policy
from io_harness.prepare import decide_in_tree, drive, prepared_new, prepared_stored
from io_harness.prepare._answers import with_answer
from io_harness.prepare._continuing import More, continued
from io_harness.pricing import PriceTable
from io_harness.providers import Provider
from io_harness.roles import Roles
from io_harness.sandbox import SandboxConfig
from io_harness.store import Store
from io_harness.store._records import RunSummary
from io_harness.tools._ask import Answerer, checked_asking
from io_harness.tools._caller import Tool, Toolbox
from io_harness.tools._skills import discover_skills
from io_harness.trees import Containment

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
    retry: RetryPolicy | None
    ask: bool
    answerer: Answerer | None


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
    - ``retry``: a :class:`RetryPolicy`: for how long, and how far apart, a
      model call's transient failures (refused connections, timeouts, 429,
      5xx, overloaded) are tried again; two minutes by default (see
      ``docs/runs.md#retries``).
    - ``ask``: offer ``ask_user``, a question that waits ``AWAITING_ANSWER`` for
      ``resume(answer=)``; an ``answerer`` may answer at once (``docs/asking.md``).

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
        retry: RetryPolicy | None = None,
        ask: bool = False,
        answerer: Answerer | None = None,
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
        self.ask, self.answerer = checked_asking(ask, answerer)
        if isinstance(mcp, McpServer | str | Mapping):
            raise ConfigError(f"mcp must be a list of McpServer, not {type(mcp).__name__}")
        self.mcp: tuple[McpServer, ...] = tuple(mcp) if mcp is not None else ()
        check_servers(self.mcp)
        self.containment = checked_option(containment, Containment, "containment")
        self.roles = roles_given(roles)
        self.compaction = checked_option(compaction, Compaction, "compaction")
        retry = checked_option(retry, RetryPolicy, "retry")
        self.retry = retry if retry is not None else DEFAULT_RETRY
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
        async with prepared_new(self, contract, run_id, labels) as prepared:
            return await drive(prepared)

    async def resume(
        self,
        run_id: str,
        *,
        decision: Decision | None = None,
        replace_policy: bool = False,
        answer: str | None = None,
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
        A run ``AWAITING_ANSWER`` continues with ``answer``, its ``ask_user`` call's
        result (one outside its choices, or to a run awaiting none, is a ConfigError).
        """
        if not isinstance(run_id, str) or not run_id:
            raise ConfigError(f"run_id must be a non-empty string, not {run_id!r}")
        decision = with_answer(decision, answer, "resume()")
        store = self.store
        place = store.load_run(run_id).tree
        if place is not None and place.root_id != run_id:
            # A sub-agent goes on as part of its tree: the tree resumes from its root.
            return await self.resume(
                place.root_id, decision=decision, replace_policy=replace_policy
            )
        if place is not None and decision is not None:
            decision = decide_in_tree(store, run_id, decision)
        async with prepared_stored(self, run_id, decision, replace_policy) as prepared:
            if isinstance(prepared, RunResult):
                return prepared
            return await drive(prepared)

    async def continue_run(
        self, run_id: str, *, budget: Budget | None = None, message: str | None = None
    ) -> RunResult:
        """Give a run that stopped without success more, and let it go on from its last commit.

        ``budget`` replaces the run's (recorded; its wall time counts from now), and must be
        above what the run has spent; without one the run keeps its own, which is a
        :class:`ConfigError` for a run stopped at one of its caps. ``message`` is a user
        turn the model reads before its next step. The conversation, spend, memory, tree
        and effects journal go on; nothing is repeated. A run that succeeded is a
        :class:`ResumeError` (success is final), and so is one that has not stopped
        (:meth:`resume` it); a sub-agent goes on as part of its tree's root.
        """
        return await continued(self, run_id, More(budget, message))

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
        self,
        run_id: str,
        *,
        decision: Decision | None = None,
        replace_policy: bool = False,
        answer: str | None = None,
    ) -> RunResult:
        """:meth:`resume` for callers without an event loop."""
        return sync(
            self.resume(run_id, decision=decision, replace_policy=replace_policy, answer=answer)
        )

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
        async with prepared_new(self, contract, run_id, queued):
            pass  # stored, not driven: a worker drives it from the store
        try:
            await put(url, [run_id])
        except StorageError as exc:
            unqueued = f"run {run_id!r} is stored but could not be queued ({exc})"
            raise StorageError(
                f"{unqueued}; queue it with requeue() once the database answers",
                shell=f"{unqueued}; ioh resume {shlex.quote(run_id)}{{store}} drives it here",
            ) from None
        return run_id

    async def requeue(
        self, run_id: str, *, decision: Decision | None = None, answer: str | None = None
    ) -> None:
        """Queue a stored run again for the workers, its tree's root when it is a sub-agent.

        ``decision`` decides the act the run (or an agent of its tree) awaits (``answer``
        its question), stored first; without one, a decision stored earlier (``ioh approve
        --no-resume``, :meth:`Store.decide`) is performed, and a run that
        awaits none is simply driven on from its last committed step. A
        queued job is harmless if the run is driven or finished already.
        """
        from io_harness._queue import requeue_run

        if not isinstance(run_id, str) or not run_id:
            raise ConfigError(f"run_id must be a non-empty string, not {run_id!r}")
        decision = with_answer(decision, answer, "requeue()")
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
    answer: str | None = None,
    **options: Unpack[HarnessOptions],
) -> RunResult:
    """``Harness(provider, **options).resume(run_id, ...)``; ``store=`` is required here.

    A harness built only to resume needs the store the run is in.
    """
    if options.get("store") is None:
        raise ConfigError("resume needs the store the run is in (store=...)")
    harness = Harness(provider, **options)
    return await harness.resume(
        run_id, decision=decision, replace_policy=replace_policy, answer=answer
    )


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
