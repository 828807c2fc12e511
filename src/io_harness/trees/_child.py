"""A child a spawn makes: its contract, its narrowed policy, its place, its private copy."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from io_harness._validation import describe_validation, loading
from io_harness.contract import Budget, TaskContract
from io_harness.errors import HarnessError
from io_harness.policy._gate import canonical_argv
from io_harness.policy._policy import Policy
from io_harness.policy._rules import Effect
from io_harness.store._records import TreeEventRow, TreePlace
from io_harness.tools._base import ToolFailure
from io_harness.trees._isolate import isolate
from io_harness.trees._spawn import SpawnArgs
from io_harness.trees._tree import COPY_PREFIX, ChildSpec

if TYPE_CHECKING:
    from io_harness.trees._node import AgentNode

__all__ = ["child_spec"]


def child_spec(node: AgentNode, call_id: str, args: SpawnArgs) -> ChildSpec:
    """The child's contract, policy and place; a bad argument is a ToolFailure."""
    run_id = f"{node.run_id}.{node.tree.ledger.agents}"  # unique: the count only grows
    narrowing = Policy.permissive().layer(f"spawn {call_id}")
    for method, globs in (
        ("deny_write", args.deny_write),
        ("deny_exec", args.deny_exec),
        ("deny_net", args.deny_net),
    ):
        if globs:
            narrowing = getattr(narrowing, method)(*globs)
    policy = node.gate.policy.contain(narrowing)
    root = node.contract.root
    settings: dict[str, Any] = {"goal": args.goal}
    if args.isolate:
        # A folder of the harness's own (0700, a name no one could take first), so the
        # copy is no more readable than the workspace; a spawn redone after a crash
        # makes another.
        copy = Path(tempfile.mkdtemp(prefix=f"{COPY_PREFIX}{run_id}-")) / "workspace"
        base = isolate(root, copy)
        settings["isolated"] = {"copy": str(copy), "into": str(root), "base": base.to_json()}
        root = copy
    contract = _child_contract(node.contract, args, root)
    _check_criterion(contract, policy)
    place = TreePlace(
        root_id=node.tree.root_id,
        parent_id=node.run_id,
        depth=node.depth + 1,
        spawn_call=call_id,
        tree_json=json.dumps(settings),
    )
    detail = {"call_id": call_id, "child": run_id, "goal": args.goal, "isolate": args.isolate}
    row = TreeEventRow("spawn", json.dumps(detail), time.time())
    return ChildSpec(run_id, contract, policy, place, row)


def _child_contract(parent: TaskContract, args: SpawnArgs, root: Path) -> TaskContract:
    budget = Budget(
        max_steps=args.max_steps or parent.budget.max_steps,
        max_retries=parent.budget.max_retries,
    )
    fields = {
        "goal": args.goal,
        "mode": "workspace",
        "root": root,
        "verify": args.verify,
        "budget": budget,
        "tools": parent.tools,
        "skills": parent.skills,
    }
    try:
        with loading():
            contract = TaskContract.model_validate(fields)
        contract.verify.check_config(contract.mode)
    except ValidationError as exc:
        raise ToolFailure(f"the child's contract: {describe_validation(exc)}") from None
    except HarnessError as exc:
        raise ToolFailure(f"the child's criterion: {exc}") from None
    return contract


def _check_criterion(contract: TaskContract, policy: Policy) -> None:
    from io_harness._preflight import missing_program

    for argv in contract.verify.commands():
        missing = missing_program(argv)
        if missing is not None:
            raise ToolFailure(f"the child's criterion's program {missing}; it could never pass")
        access = canonical_argv(argv)
        verdict = policy.explain(access.act, access.target)
        if verdict.effect is not Effect.ALLOW:
            raise ToolFailure(
                f"the child's criterion runs {argv[0]!r}, but {verdict.describe()}; "
                "a check must be allowed outright"
            )
