"""A tool call's result as the text the model reads.

Text blocks are joined, one per line. Images and audio are summarised with
their type and size (``[image/png, 12 KB]``): the harness's observations are
text. A resource link gives its uri, type and size; an embedded resource the
same, followed by its text when it is text. Structured content is sent as
JSON when no text block already carries it: the MCP spec asks a server that
returns structured content to also return it as text, and sending both would
show the model the same data twice (a one-member object, ``{"result": ...}``,
counts as carried by a block holding its value).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.types import CallToolResult, ContentBlock

__all__ = ["NO_CONTENT", "base64_size", "block_text", "result_text", "size_text"]

NO_CONTENT = "(the tool returned no content)"


def result_text(result: CallToolResult) -> str:
    """The text of a result's blocks, with its structured content where no block carries it."""
    parts = [block_text(block) for block in result.content]
    structured = result.structured_content
    if structured is not None and not _carried(structured, result.content):
        shown = json.dumps(structured, ensure_ascii=False, default=str)
        parts.append(f"[structured content]\n{shown}" if parts else shown)
    return "\n".join(parts) if parts else NO_CONTENT


def _carried(structured: Any, blocks: list[ContentBlock]) -> bool:
    """Whether a text block already says ``structured``.

    It does when the block is ``structured`` as JSON, or, for an object of
    one member (``{"result": ...}``, how SDK servers wrap a plain return
    value), the member's value as text or JSON.
    """
    said: list[Any] = [structured]
    if isinstance(structured, dict) and len(structured) == 1:
        said.append(next(iter(structured.values())))
    for block in blocks:
        if block.type != "text":
            continue
        if block.text in said:
            return True
        try:
            if json.loads(block.text) in said:
                return True
        except ValueError:
            continue
    return False


def block_text(block: ContentBlock) -> str:
    """One content block as text: text as it is, anything else summarised in brackets."""
    from mcp.types import (
        AudioContent,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent | AudioContent):
        kind = block.type
        mime = block.mime_type or "unknown type"
        label = mime if mime.startswith(f"{kind}/") else f"{kind} {mime}"
        return f"[{label}, {size_text(base64_size(block.data))}]"
    if isinstance(block, ResourceLink):
        size = size_text(block.size) if block.size is not None else None
        head = f"[resource link {block.uri}{_joined(block.mime_type, size)}]"
        return head + "".join(f" {part}" for part in (block.name, block.description) if part)
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if isinstance(resource, TextResourceContents):
            details = _joined(resource.mime_type, f"{len(resource.text)} characters")
            return f"[resource {resource.uri}{details}]\n{resource.text}"
        details = _joined(resource.mime_type, size_text(base64_size(resource.blob)))
        return f"[resource {resource.uri}{details}]"
    return f"[{getattr(block, 'type', None) or 'unknown'} content]"


def _joined(*details: str | None) -> str:
    shown = [detail for detail in details if detail]
    return f" ({', '.join(shown)})" if shown else ""


def base64_size(data: str) -> int:
    """The number of bytes base64 ``data`` decodes to."""
    data = "".join(data.split())
    return max(0, len(data) * 3 // 4 - data[-2:].count("="))


def size_text(size: int) -> str:
    """``size`` bytes for a person: ``812 bytes``, ``12 KB``, ``3.4 MB``."""
    if size < 1024:
        return f"{size} byte{'' if size == 1 else 's'}"
    if size < 1024 * 1024:
        return f"{round(size / 1024)} KB"
    return f"{size / (1024 * 1024):.1f} MB"
