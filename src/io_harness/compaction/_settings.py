"""The compaction setting: when a run's view is compacted, and what a pass always keeps.

A leaf module (pydantic only), so a roles file and the harness can both name
it; the passes themselves are ``_pass.py``'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ConfigDict, Field

from io_harness._validation import CheckedModel

__all__ = ["Compaction", "positions_text"]


class Compaction(CheckedModel):
    """When and how a run's conversation is compacted.

    When the next request would pass ``at_share`` of the model's context
    window, a compaction pass runs first. The last ``keep_recent`` messages
    are never deleted. The window comes from the role, the provider
    (``context_window``) or the price table; compaction without a known
    window is a :class:`~io_harness.ConfigError`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    at_share: float = Field(0.8, gt=0, le=1)
    keep_recent: int = Field(8, ge=0)


def positions_text(seqs: Sequence[int]) -> str:
    """Message positions as runs, as a compaction's edits are shown: ``#2-5, #8``."""
    runs: list[list[int]] = []
    for seq in sorted(seqs):
        if runs and seq == runs[-1][-1] + 1:
            runs[-1].append(seq)
        else:
            runs.append([seq])
    return ", ".join(f"#{r[0]}" if len(r) == 1 else f"#{r[0]}-{r[-1]}" for r in runs)
