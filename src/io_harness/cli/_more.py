"""``ioh resume``'s arguments that give a stopped run more: steps, tokens, money, time, a turn."""

from __future__ import annotations

import argparse

TYPE_CHECKING = False  # ioh --help loads this module: typing is not imported for it
if TYPE_CHECKING:
    from typing import Any

    from io_harness.contract import Budget

__all__ = ["add_more_arguments", "budget_given", "gives_more"]

_FIELDS = ("max_steps", "max_tokens", "max_cost", "wall")


def add_more_arguments(parser: argparse.ArgumentParser) -> None:
    """``--max-steps N | --add-steps N``, ``--max-tokens N``, ``--max-cost X``, ``--wall S``,
    ``--say TEXT``: what a run that stopped without success goes on with."""
    more = parser.add_argument_group(
        "continuing a run that stopped without success (the new budget replaces the stored one)"
    )
    steps = more.add_mutually_exclusive_group()
    steps.add_argument("--max-steps", type=int, metavar="N", help="the run's step cap, in all")
    steps.add_argument("--add-steps", type=int, metavar="N", help="N steps more than it took")
    more.add_argument("--max-tokens", type=int, metavar="N", help="the run's token budget")
    more.add_argument("--max-cost", metavar="X", help="the run's cost budget, in its currency")
    more.add_argument(
        "--wall", type=float, metavar="SECONDS", help="wall time it may take from now"
    )
    more.add_argument("--say", metavar="TEXT", help="a user turn the model reads next")


def gives_more(args: argparse.Namespace) -> bool:
    """Whether any of those arguments is given."""
    return (
        args.add_steps is not None
        or args.say is not None
        or any(getattr(args, name) is not None for name in _FIELDS)
    )


def budget_given(args: argparse.Namespace, stored: Budget, steps_taken: int) -> Budget | None:
    """The run's stored budget with what the arguments change, or ``None`` when they change
    none; a bad value is a ConfigError."""
    from decimal import Decimal, InvalidOperation

    from io_harness.errors import ConfigError

    changes: dict[str, Any] = {}
    if args.add_steps is not None:
        if args.add_steps < 1:
            raise ConfigError(f"--add-steps must be at least 1, not {args.add_steps}")
        changes["max_steps"] = steps_taken + args.add_steps
    if args.max_steps is not None:
        changes["max_steps"] = args.max_steps
    if args.max_tokens is not None:
        changes["max_tokens"] = args.max_tokens
    if args.max_cost is not None:
        try:
            changes["max_cost"] = Decimal(args.max_cost)
        except InvalidOperation:
            raise ConfigError(f"--max-cost must be a number, not {args.max_cost!r}") from None
    if args.wall is not None:
        changes["max_wall_seconds"] = args.wall
    if not changes:
        return None
    return stored.model_validate({**stored.model_dump(), **changes})
