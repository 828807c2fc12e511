"""Generated run ids: sorted by start time, and never the same twice in practice.

An id is the start time in UTC to the millisecond, then 80 random bits in
hex: ``20250301-101500-123-3f2a1c9e04b7d2a58c61``. Its parts have fixed
widths, so ids sort as text in the order runs started (to the millisecond
across processes and machines; strictly within one process, below). Eighty
bits make a collision between ids of one millisecond negligible however many
workers start runs at once (a million ids in one millisecond collide with a
chance under one in a billion).
"""

from __future__ import annotations

import secrets
import threading
import time

__all__ = ["RANDOM_BITS", "new_run_id"]

RANDOM_BITS = 80
"""The random part of a generated id, in bits (its hex is a quarter as many characters)."""

_TOP = 1 << RANDOM_BITS
_STEP_BITS = 32
"""A later id of the same millisecond adds up to this many random bits, so ids made
together differ in more than their last digit."""


class _Clock:
    """The millisecond and random part of the last id this process made."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = (0, 0)

    def next(self) -> tuple[int, int]:
        """The next id's millisecond and random part, after the last one's."""
        with self._lock:
            millis, random = time.time_ns() // 1_000_000, secrets.randbits(RANDOM_BITS)
            last_millis, last_random = self._last
            if millis <= last_millis:
                millis, random = last_millis, last_random + 1 + secrets.randbits(_STEP_BITS)
                if random >= _TOP:  # the counter ran over: the next millisecond, afresh
                    millis, random = last_millis + 1, secrets.randbits(RANDOM_BITS)
            self._last = (millis, random)
        return millis, random


_CLOCK = _Clock()


def new_run_id() -> str:
    """A fresh run id: its start time (UTC, to the millisecond), then 80 random bits.

    Within one process ids only grow: one made in the same millisecond as
    the last (or while the clock stepped back) takes the last one's
    millisecond and a random part above the last one's, as UUIDv7's monotonic
    counter does, so even ids made faster than the clock ticks keep their order.
    """
    millis, random = _CLOCK.next()
    seconds, part = divmod(millis, 1000)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(seconds))
    return f"{stamp}-{part:03d}-{random:0{RANDOM_BITS // 4}x}"
