"""Model providers: the :class:`Provider` protocol, the vendors, and the offline ones.

Each vendor maps the canonical types to its wire format in its own module:
OpenAI's Chat Completions (:class:`OpenAI`, :class:`OpenRouter`,
:class:`OpenAICompatible`), Anthropic's Messages (:class:`Anthropic`). Names
load on first use, and the vendors' SDKs only when a client is built.
"""

from __future__ import annotations

from io_harness._lazy import lazy_exports

# typing costs milliseconds to import, and `ioh --help` none of it: type checkers take
# this name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from io_harness.providers._anthropic import Anthropic
    from io_harness.providers._base import Provider, StreamingProvider
    from io_harness.providers._cassette import CASSETTE_VERSION, Record, Replay
    from io_harness.providers._fallback import Fallback, members_of
    from io_harness.providers._openai import OpenAI, OpenAICompatible, OpenRouter
    from io_harness.providers._presets import PRESETS, SPEC_FORMS
    from io_harness.providers._spec import provider_from_spec

_EXPORTS = {
    "io_harness.providers._anthropic": ("Anthropic",),
    "io_harness.providers._base": ("Provider", "StreamingProvider"),
    "io_harness.providers._cassette": ("CASSETTE_VERSION", "Record", "Replay"),
    "io_harness.providers._fallback": ("Fallback", "members_of"),
    "io_harness.providers._openai": ("OpenAI", "OpenAICompatible", "OpenRouter"),
    "io_harness.providers._presets": ("PRESETS", "SPEC_FORMS"),
    "io_harness.providers._spec": ("provider_from_spec",),
}

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

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
