"""Content as the GenAI conventions write it: messages as JSON parts, recorded as JSON text.

Only an observer told ``capture_content=True`` calls these. Span attributes
hold the JSON as a string, which the conventions allow where a structured
value is not supported, and which every exporter carries.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from io_harness.messages import (
    CompletionRequest,
    CompletionResponse,
    ContentBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResult,
)


def system_instructions(request: CompletionRequest) -> str:
    """The request's system prompt, as ``gen_ai.system_instructions``."""
    return json.dumps([{"type": "text", "content": request.system}])


def input_messages(request: CompletionRequest) -> str:
    """The conversation the model was sent, as ``gen_ai.input.messages``."""
    return json.dumps([_message(m) for m in request.messages])


def output_messages(response: CompletionResponse) -> str:
    """The model's answer, as ``gen_ai.output.messages``."""
    answer = {
        "role": "assistant",
        "parts": _parts(response.content),
        "finish_reason": response.finish_reason,
    }
    return json.dumps([answer])


def arguments_text(arguments: dict[str, Any] | str) -> str:
    """A tool call's arguments as JSON text (a string the model sent that is not JSON, as is)."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _message(message: Message) -> dict[str, Any]:
    return {"role": message.role, "parts": _parts(message.content)}


def _parts(content: Sequence[ContentBlock]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "content": block.text})
        elif isinstance(block, ThinkingBlock):
            parts.append({"type": "reasoning", "content": block.text})
        elif isinstance(block, ToolCall):
            parts.append(
                {
                    "type": "tool_call",
                    "id": block.id,
                    "name": block.name,
                    "arguments": block.arguments,
                }
            )
        elif isinstance(block, ToolResult):
            parts.append(
                {"type": "tool_call_response", "id": block.tool_use_id, "response": block.content}
            )
    return parts
