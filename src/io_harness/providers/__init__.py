"""Model providers: the :class:`Provider` protocol and the offline ones.

Real vendors (OpenAI, Anthropic, OpenRouter, OpenAI-compatible servers) map
the canonical types to their wire formats in their own modules.
"""

from io_harness.providers._base import Provider
from io_harness.providers._cassette import CASSETTE_VERSION, Record, Replay
from io_harness.providers._spec import SPEC_FORMS, provider_from_spec

__all__ = ["CASSETTE_VERSION", "SPEC_FORMS", "Provider", "Record", "Replay", "provider_from_spec"]
