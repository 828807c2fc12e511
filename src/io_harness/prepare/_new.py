"""A new run prepared: its contract checked, its run created in the store, ready to drive.

Every check :meth:`~io_harness.Harness.run` makes happens here, in the
order a caller meets them, before any provider call; then the run is
created (under its lease) and the block gets it as a
:class:`~io_harness.prepare.PreparedRun`. :meth:`~io_harness.Harness.enqueue`
leaves the block without driving it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from io_harness._preflight import check_new_run_id, check_prices, checked_labels, new_run_id
from io_harness.contract import TaskContract
from io_harness.errors import ConfigError
from io_harness.loop._sandboxing import choose_sandbox
from io_harness.policy._gate import Gate
from io_harness.policy._policy import Policy
from io_harness.prepare._prepared import PreparedRun
from io_harness.prepare._setup import RunSetup, run_skills
from io_harness.prepare._start import (
    Start,
    checked_access,
    contained,
    opened,
    provider_of,
    role_of,
)
from io_harness.store._records import TreePlace
from io_harness.trees import new_tree

if TYPE_CHECKING:
    from io_harness._harness import Harness

__all__ = ["prepared_new"]


@asynccontextmanager
async def prepared_new(
    harness: Harness,
    contract: TaskContract,
    run_id: str | None,
    labels: Mapping[str, str] | None,
) -> AsyncIterator[PreparedRun]:
    """A new run of ``contract``, checked, created and prepared, for the block's drive."""
    start, run_id, labels = await _checked(harness, contract, run_id, labels)
    store = harness.store
    with store.lease(run_id):
        async with opened(harness, start) as kit:
            started_at = time.time()
            gate, tree, node, place = start.gate, None, None, None
            if harness.containment is not None:
                tree = new_tree(kit, run_id, harness.containment, started_at)
                node = tree.node(run_id, 0, contract, gate)
                place = TreePlace(root_id=run_id, tree_json=harness.containment.model_dump_json())
            tools = kit.tools(contract, gate, started_at, node)
            new = kit.new_run(run_id, contract, gate, tools, started_at, labels=labels, tree=place)
            store.create_run(new)
            yield PreparedRun(
                kit=kit,
                contract=contract,
                stored=store.load_run(run_id),
                gate=gate,
                tools=tools,
                role=kit.run_role(contract, tools, gate),
                node=node,
                tree=tree,
            )


async def _checked(
    harness: Harness,
    contract: TaskContract,
    run_id: str | None,
    labels: Mapping[str, str] | None,
) -> tuple[Start, str, dict[str, str]]:
    """The run's start, every check made; its id and labels."""
    if not isinstance(contract, TaskContract):
        raise ConfigError(f"contract must be a TaskContract, not {type(contract).__name__}")
    if run_id is not None and (not isinstance(run_id, str) or not run_id):
        raise ConfigError(f"run_id must be a non-empty string, not {run_id!r}")
    contract.check()
    if harness.containment is not None and contract.mode != "workspace":
        raise ConfigError(
            "a harness with containment spawns sub-agents into a workspace; this contract "
            "is in file mode (use TaskContract.workspace)"
        )
    role = role_of(harness, contract)
    provider = provider_of(harness, role)
    check_prices(contract, provider, harness.prices)
    checked = checked_labels(labels)
    run_id = run_id or new_run_id()
    policy = harness.policy if harness.policy is not None else Policy.default()
    gate = Gate(policy, harness.approver, goal=contract.goal, run_id=run_id)
    net = checked_access(contract, gate, provider)
    folders = tuple(dict.fromkeys(f for f in (harness.skills, contract.skills) if f is not None))
    skills = run_skills(folders, contract, gate)
    check_new_run_id(harness.store, run_id)  # before an approver is asked about a server
    chosen = choose_sandbox(harness.sandbox)
    servers = harness.mcp
    sandbox = await contained(servers, contract, gate, chosen)
    caller = harness._tools_now()
    setup = RunSetup.of(caller, folders, skills, harness.memory, servers, provider)
    setup = setup.model_copy(update={"ask": harness.ask})
    start = Start(
        contract,
        role,
        provider,
        harness.prices,
        gate,
        net,
        skills,
        servers,
        chosen,
        sandbox,
        caller,
        setup,
    )
    return start, run_id, checked
