"""Model providers: the :class:`Provider` protocol, the vendors, and the offline ones.

Each vendor maps the canonical types to its wire format in its own module:
OpenAI's Chat Completions (:class:`OpenAI`, :class:`OpenRouter`,
:class:`OpenAICompatible`), Anthropic's Messages (:class:`Anthropic`).
"""

from io_harness.providers._anthropic import Anthropic
from io_harness.providers._base import Provider, StreamingProvider
from io_harness.providers._cassette import CASSETTE_VERSION, Record, Replay
from io_harness.providers._fallback import Fallback, members_of
from io_harness.providers._openai import PRESETS, OpenAI, OpenAICompatible, OpenRouter
from io_harness.providers._spec import SPEC_FORMS, provider_from_spec

__all__ = [
    "CASSETTE_VERSION",
    "PRESETS",
    "SPEC_FORMS",
    "Anthropic",
    "Fallback",
    "OpenAI",
    "OpenAICompatible",
    "OpenRouter",
    "Provider",
    "Record",
    "Replay",
    "StreamingProvider",
    "members_of",
    "provider_from_spec",
]
