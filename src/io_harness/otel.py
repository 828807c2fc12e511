"""OpenTelemetry export of runs: GenAI spans and metrics (the ``otel`` extra).

Install it with ``pip install 'io-harness[otel]'``, then give a harness the
observer::

    from io_harness.otel import OtelObserver

    harness = Harness(provider, observer=OtelObserver())

Spans go to the global TracerProvider unless one is given; see
``docs/observability.md`` for what is exported and how content is opted in.
Importing this module without the extra is a :class:`~io_harness.ConfigError`
that says how to install it.
"""

from __future__ import annotations

from io_harness.errors import ConfigError

try:
    import opentelemetry.sdk  # noqa: F401  (what the extra installs: exporters need it)
    from opentelemetry import metrics, trace  # noqa: F401
except ImportError as missing:
    raise ConfigError(
        f"io_harness.otel needs the OpenTelemetry SDK ({missing.name or 'opentelemetry'} is "
        "not installed): pip install 'io-harness[otel]'"
    ) from None

from io_harness._otel._observer import OtelObserver, instrument

__all__ = ["OtelObserver", "instrument"]
