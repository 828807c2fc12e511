"""``ioh tree``: the sub-agent tree a run belongs to, drawn from its root.

Every agent of a tree is a run in the store; ``ioh tree`` draws them all,
whichever agent it is given, and says what the tree awaits. (``ioh approve``,
``deny`` and ``resume`` of any agent go on from the root: ``Store.root_of``.)
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.text import Text

from io_harness.cli import _commands
from io_harness.cli._render import spend
from io_harness.cli._text import escape, shown
from io_harness.policy import ApprovalRequest
from io_harness.store._records import ApprovalRow, TreeNode

__all__ = ["TreeListing", "cmd_tree", "render_tree"]

EXIT_NO_TREE = 1
_GOAL = 60
"""How much of a goal a line shows, at most."""
_GOAL_MIN = 16
"""Below this many columns left for the goal, it gets a line of its own."""
_HEADER = ("agent", "outcome", "steps", "tokens", "spend")
_RIGHT_ALIGNED = frozenset({2, 3})
_MARK = " *"


def cmd_tree(args: argparse.Namespace, console: Console) -> int:
    """``ioh tree RUN_ID``: the tree RUN_ID belongs to, drawn from its root, RUN_ID marked."""
    with _commands._existing_store(args.store) as store:
        place = store.load_run(args.run_id).tree  # an unknown id: the error ioh show gives
        if place is None:
            console.print(
                f"run {escape(args.run_id)} is in no sub-agent tree "
                f"(ioh show {escape(args.run_id)} shows its trace)",
                soft_wrap=True,
            )
            return EXIT_NO_TREE
        root = place.root_id
        nodes = store.tree(root)
        awaited = [row for node in nodes for row in store.approvals(node.run.id)]
        listing = render_tree(
            nodes,
            args.run_id,
            drawn=store.tree_drawn(root),
            priced=store.load_run(root).prices_json is not None,
            awaited=awaited,
            hint=_commands._store_hint(args),
        )
    console.print(listing, soft_wrap=True)
    return 0


def render_tree(
    nodes: Sequence[TreeNode],
    marked: str,
    *,
    drawn: tuple[int, int],
    priced: bool,
    awaited: Sequence[ApprovalRow] = (),
    hint: str = "",
) -> RenderableType:
    """What ``ioh tree`` prints: one line an agent, the tree's totals, what it awaits.

    ``drawn`` is the tree's ledger (tokens, cost), counting every call the
    tree paid for, a step still in flight's too; ``priced`` says whether the
    tree has a price table (without one, its spend is ``unpriced``).
    ``hint`` is appended to the commands it suggests (``--store PATH``).
    """
    root = nodes[0].run.id
    tokens, cost = drawn
    unpriced = sum(node.run.unpriced_calls for node in nodes)
    total = spend(cost, unpriced) if priced else "unpriced"
    count = f"{len(nodes)} agent{'s' if len(nodes) != 1 else ''}"
    lines = [
        Text(f"total: {count}, {tokens:,} tokens, {total}  ({_MARK.strip()} marks {shown(marked)})")
    ]
    for row in awaited:
        request = ApprovalRequest.model_validate_json(row.request_json)
        said = {
            "decided": f"{row.run_id}: {request.describe()} is decided; "
            f"ioh resume {root}{hint} performs it",
            "performing": f"{row.run_id}: {request.describe()} was being performed when the "
            f"tree stopped; ioh resume {root}{hint} reports it",
        }.get(row.status, f"{row.run_id} awaits {_awaits(request)}: {request.describe()}")
        lines.append(Text(shown(said, one_line=True), style="yellow"))
    if any(_asks(row) for row in awaited):
        lines.append(Text(f"answer: ioh answer {shown(root)} TEXT{shown(hint)}"))
    if any(row.status == "pending" and not _asks(row) for row in awaited):
        target = shown(root + hint)
        lines.append(
            Text(
                f"decide: ioh approve {target} [--remember] | ioh deny {target} --reason TEXT "
                "(ioh pending shows the diff)"
            )
        )
    return Group(TreeListing(nodes, marked, priced), *lines)


@dataclass(frozen=True, slots=True)
class _Row:
    """One agent's line: its guides, its cells, its goal and the guides of lines below it."""

    guide: str
    cells: tuple[str, ...]
    goal: str
    below: str


class TreeListing:
    """The agents of a tree, one line each, under their parents; the goal last.

    At a terminal each line fits its width: the goal is cut, or goes on a
    line of its own when too little room is left. Elsewhere (a pipe, a file)
    lines are whole; the console prints them unwrapped.
    """

    def __init__(self, nodes: Sequence[TreeNode], marked: str, priced: bool) -> None:
        self.rows: list[_Row] = []
        children: dict[str | None, list[TreeNode]] = {}
        ids = {node.run.id for node in nodes}
        for node in nodes:
            # A node whose parent is not listed is drawn as a root rather than lost.
            parent = node.parent_id if node.parent_id in ids else None
            children.setdefault(parent, []).append(node)
        for top in children.get(None, []):
            self._add(top, "", "", children, marked, priced)

    def _add(
        self,
        node: TreeNode,
        guide: str,
        indent: str,
        children: dict[str | None, list[TreeNode]],
        marked: str,
        priced: bool,
    ) -> None:
        run = node.run
        below = children.get(run.id, [])
        self.rows.append(
            _Row(
                guide=guide,
                cells=(
                    shown(run.id) + (_MARK if run.id == marked else ""),
                    run.outcome or run.status,
                    str(run.steps),
                    f"{run.tokens:,}",
                    spend(run.cost_micros, run.unpriced_calls) if priced else "unpriced",
                ),
                goal=_cut(" ".join(shown(run.goal).split()), _GOAL),
                below=indent + ("│  " if below else "   "),
            )
        )
        for index, child in enumerate(below):
            last = index == len(below) - 1
            self._add(
                child,
                indent + ("└─ " if last else "├─ "),
                indent + ("   " if last else "│  "),
                children,
                marked,
                priced,
            )

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = [len(title) for title in _HEADER]
        for row in self.rows:
            for index, cell in enumerate(row.cells):
                extra = len(row.guide) if index == 0 else 0
                widths[index] = max(widths[index], extra + len(cell))
        room = options.max_width - sum(widths) - 2 * len(widths)
        fit = console.is_terminal
        inline = room >= _GOAL_MIN or not fit
        header = self._line(("", *_HEADER), widths, style="bold")
        if inline:
            header.append("goal", style="bold")
        header.rstrip()
        yield header
        for row in self.rows:
            line = self._line((row.guide, *row.cells), widths)
            if inline:
                line.append(_cut(row.goal, room) if fit else row.goal)
                line.rstrip()
                yield line
            else:
                line.rstrip()
                yield line
                indent = f"{row.below}  "
                yield Text(indent + _cut(row.goal, options.max_width - len(indent)), style="dim")

    @staticmethod
    def _line(cells: Sequence[str], widths: list[int], style: str = "") -> Text:
        """``cells``: the first agent cell's guide, then the cells; padded to ``widths``."""
        guide, *rest = cells
        line = Text()
        line.append(guide, style="dim")
        for index, (cell, width) in enumerate(zip(rest, widths, strict=True)):
            room = width - (len(guide) if index == 0 else 0)
            padded = cell.rjust(room) if index in _RIGHT_ALIGNED else cell.ljust(room)
            line.append(padded, style=style or _style(index, cell))
            line.append("  ")
        return line


def _style(index: int, cell: str) -> str:
    if index == 0 and cell.endswith(_MARK):
        return "bold"
    if index != 1:
        return ""
    return {"success": "green", "running": "yellow", "awaiting": "yellow"}.get(cell, "red")


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)].rstrip() + "…"


def _awaits(request: ApprovalRequest) -> str:
    return "an answer" if request.question is not None else "approval"


def _asks(row: ApprovalRow) -> bool:
    """Whether ``row`` is a question nobody has answered yet."""
    request = ApprovalRequest.model_validate_json(row.request_json)
    return row.status == "pending" and request.question is not None
