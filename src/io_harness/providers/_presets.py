"""The local servers a spec can name, and the forms a spec takes: plain data, cheap to import."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["PRESETS", "SPEC_FORMS"]

PRESETS: Mapping[str, str] = MappingProxyType(
    {
        "ollama": "http://localhost:11434/v1",
        "vllm": "http://localhost:8000/v1",
        "llamacpp": "http://localhost:8080/v1",
        "lmstudio": "http://localhost:1234/v1",
    }
)
"""Local OpenAI-compatible servers by name, each with its usual base URL."""

SPEC_FORMS = (
    "openai[:MODEL]",
    "anthropic[:MODEL]",
    "openrouter[:MODEL]",
    *(f"{preset}:MODEL" for preset in PRESETS),
    "compatible:URL#MODEL",
    "replay:CASSETTE.jsonl",
)
"""The forms a provider spec may take, as shown in help and errors."""
