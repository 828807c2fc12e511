"""Attribute names: the OpenTelemetry GenAI conventions' where one applies, ``io_harness.*``
where none does; and the low-cardinality ``error.type`` values the export reports.

The GenAI names are the registry's of the ``semantic-conventions-genai`` repository
(``gen_ai.provider.name`` replaced ``gen_ai.system``; the cache and reasoning counts are
``gen_ai.usage.cache_read.input_tokens``, ``gen_ai.usage.cache_creation.input_tokens``
and ``gen_ai.usage.reasoning.output_tokens``, each a part of the input or output count,
as :class:`~io_harness.Usage` counts them).
"""

from __future__ import annotations

from io_harness.messages import Usage

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_WRITE_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
AGENT_ID = "gen_ai.agent.id"
CONVERSATION_ID = "gen_ai.conversation.id"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOKEN_TYPE = "gen_ai.token.type"
ERROR_TYPE = "error.type"

# Content: exported only when the observer is told to (capture_content=True).
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
GOAL = "io_harness.goal"
CRITERION = "io_harness.verify.criterion"
SUMMARY = "io_harness.verify.summary"
CHECK_OUTPUT = "io_harness.verify.output"
CHANGED = "io_harness.tool.changed"
TARGET = "io_harness.approval.target"

RUN_ID = "io_harness.run_id"
PARENT_RUN_ID = "io_harness.parent_run_id"
STEP = "io_harness.step"
STEPS = "io_harness.steps"
RESUMED = "io_harness.resumed"
OUTCOME = "io_harness.outcome"
VERDICT = "io_harness.verdict"
COST_MICROS = "io_harness.cost_micros"
UNPRICED_CALLS = "io_harness.unpriced_calls"
ATTEMPT = "io_harness.attempt"
PURPOSE = "io_harness.call.purpose"
TIME_TO_FIRST_TOKEN = "io_harness.time_to_first_token"
TOOL_KIND = "io_harness.tool.kind"
INTERRUPTED = "io_harness.interrupted"
TRIGGER = "io_harness.verify.trigger"

CHAT = "chat"
INVOKE_AGENT = "invoke_agent"
EXECUTE_TOOL = "execute_tool"
TOOL_ERROR = "tool_error"
"""``error.type`` of a tool call whose observation is an error and nothing raised (a refusal,
bad arguments, a tool's own ToolFailure)."""


def usage_attributes(usage: Usage) -> dict[str, int]:
    """The token counts of ``usage``; the cache and reasoning counts only when there are any."""
    counts = {INPUT_TOKENS: usage.input_tokens, OUTPUT_TOKENS: usage.output_tokens}
    for name, value in (
        (CACHE_READ_TOKENS, usage.cache_read_tokens),
        (CACHE_WRITE_TOKENS, usage.cache_write_tokens),
        (REASONING_TOKENS, usage.reasoning_tokens),
    ):
        if value:
            counts[name] = value
    return counts


def tool_error_type(error: str | None) -> str:
    """The ``error.type`` of a failed tool call from what failed inside it.

    ``timeout`` for a call ended by its timeout, the exception's class name
    for one that raised (``ValueError: ...``), else :data:`TOOL_ERROR`.
    """
    if not error:
        return TOOL_ERROR
    if error.startswith("timeout"):
        return "timeout"
    name, colon, _ = error.partition(":")
    return name if colon and name.isidentifier() else TOOL_ERROR


def exception_type(error: str | None) -> str:
    """The ``error.type`` of a drive an exception ended (``RunStopped.error`` is ``Name: text``)."""
    name = (error or "").partition(":")[0]
    return name if name.isidentifier() else "_OTHER"
