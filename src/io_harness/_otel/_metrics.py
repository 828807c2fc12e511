"""The GenAI client metrics: ``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration``.

Both are histograms recorded once per attempt at a model call (the
``chat`` operation), with the bucket boundaries the conventions advise.
Token usage is recorded for an answered attempt only: a failed one
reported no usage, and the conventions say not to invent it.
"""

from __future__ import annotations

from opentelemetry.metrics import Meter

from io_harness._otel._names import (
    CHAT,
    ERROR_TYPE,
    OPERATION,
    PROVIDER,
    REQUEST_MODEL,
    RESPONSE_MODEL,
    TOKEN_TYPE,
)
from io_harness.observe import ProviderCalled

TOKEN_USAGE = "gen_ai.client.token.usage"
OPERATION_DURATION = "gen_ai.client.operation.duration"
TOKEN_BUCKETS = (
    1,
    4,
    16,
    64,
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    1048576,
    4194304,
    16777216,
    67108864,
)
DURATION_BUCKETS = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)


class ClientMetrics:
    """The two instruments, made once per observer from its meter."""

    def __init__(self, meter: Meter) -> None:
        self.tokens = meter.create_histogram(
            TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=[float(b) for b in TOKEN_BUCKETS],
        )
        self.duration = meter.create_histogram(
            OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
        )

    def record(self, called: ProviderCalled) -> None:
        """One attempt: its duration, and its input and output tokens when it was answered."""
        attributes: dict[str, str] = {
            OPERATION: CHAT,
            PROVIDER: called.provider,
            REQUEST_MODEL: called.model,
        }
        if called.served_model:
            attributes[RESPONSE_MODEL] = called.served_model
        if called.error_kind is not None:
            self.duration.record(called.duration, {**attributes, ERROR_TYPE: called.error_kind})
            return
        self.duration.record(called.duration, attributes)
        usage = called.usage
        self.tokens.record(usage.input_tokens, {**attributes, TOKEN_TYPE: "input"})
        self.tokens.record(usage.output_tokens, {**attributes, TOKEN_TYPE: "output"})
