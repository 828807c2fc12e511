"""The retry policy: how long one model call's transient failures are tried again, and how.

A leaf module (pydantic only), so the harness, the run's kit and the loop can
all name it; the retries themselves are ``loop/_calls.py``'s.
"""

from __future__ import annotations

import random

from pydantic import ConfigDict, Field

from io_harness._validation import CheckedModel

__all__ = ["DEFAULT_RETRY", "RetryPolicy"]


class RetryPolicy(CheckedModel):
    """How a transient provider failure is retried (``Harness(retry=RetryPolicy(...))``).

    A failure that another attempt may mend (a refused connection, a
    timeout, 429, 5xx, 529 overloaded, a stream cut off) is tried again
    after an exponential backoff with jitter: the n-th retry waits a random
    time between half and all of ``min(cap_seconds, base_seconds * 2 **
    (n - 1))``. A wait the provider asks for (``Retry-After``) is honoured
    instead. Retrying goes on for up to ``total_seconds`` from the call's
    first attempt: no retry starts later, a backoff is shortened to end by
    then, and a ``Retry-After`` reaching past it ends the retries at once with
    the error, which says so. ``total_seconds=0`` retries nothing.

    The run's wall-time budget still bounds everything, and a contract's
    ``Budget.max_retries``, when set, caps the number of retries too. Each
    member of a :class:`~io_harness.Fallback` gets its own ``total_seconds``
    before the next is asked.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    total_seconds: float = Field(120.0, ge=0)
    """How long one model call is retried, from its first attempt's start."""
    base_seconds: float = Field(1.0, gt=0)
    """The first retry's backoff (before jitter); each later one doubles it."""
    cap_seconds: float = Field(30.0, gt=0)
    """The longest backoff (before jitter)."""

    def backoff(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first), jitter included."""
        exponent = min(max(retry - 1, 0), 64)  # 2**64 seconds is past any cap
        ceiling = min(self.cap_seconds, self.base_seconds * 2.0**exponent)
        return ceiling * random.uniform(0.5, 1.0)


DEFAULT_RETRY = RetryPolicy()
"""The policy of a harness given none: retries for up to two minutes, 1 s to 30 s apart."""
