"""io-harness: run an LLM agent from a typed task contract to a verified result.

Everything public is importable from here; other modules are private.

    from io_harness import TaskContract, Command, Store, run, RunOutcome

    contract = TaskContract.workspace(
        "make the test suite pass", root="repo", verify=Command(["python", "-m", "pytest", "-q"])
    )
    result = await run(contract, provider, store=Store.open("runs.db"))
    assert result.outcome is RunOutcome.SUCCESS
"""

from io_harness.contract import Budget, TaskContract
from io_harness.errors import (
    ConfigError,
    HarnessError,
    McpError,
    ProviderError,
    ProviderErrorKind,
    RefusedError,
    ResumeError,
    SandboxError,
    StorageError,
)
from io_harness.loop import RunOutcome, RunResult, resume, resume_sync, run, run_sync
from io_harness.messages import (
    CompletionRequest,
    CompletionResponse,
    ContentBlock,
    FinishReason,
    Message,
    Role,
    StreamDelta,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from io_harness.observe import (
    Observer,
    Retrying,
    RunEvent,
    RunFinished,
    RunStarted,
    StepFinished,
    TokenStreamed,
    ToolCalled,
    Verified,
)
from io_harness.pricing import Price, PriceTable
from io_harness.providers import (
    Anthropic,
    Fallback,
    OpenAI,
    OpenAICompatible,
    OpenRouter,
    Provider,
    Record,
    Replay,
    StreamingProvider,
)
from io_harness.store import RunSummary, Store, Trace
from io_harness.verify import (
    AllOf,
    AnyOf,
    Command,
    Criterion,
    FileContains,
    FileEquals,
    PytestPasses,
    PythonCompiles,
    VerificationResult,
    WorkspaceFileContains,
)

__version__ = "0.1.0"

__all__ = [
    "AllOf",
    "Anthropic",
    "AnyOf",
    "Budget",
    "Command",
    "CompletionRequest",
    "CompletionResponse",
    "ConfigError",
    "ContentBlock",
    "Criterion",
    "Fallback",
    "FileContains",
    "FileEquals",
    "FinishReason",
    "HarnessError",
    "McpError",
    "Message",
    "Observer",
    "OpenAI",
    "OpenAICompatible",
    "OpenRouter",
    "Price",
    "PriceTable",
    "Provider",
    "ProviderError",
    "ProviderErrorKind",
    "PytestPasses",
    "PythonCompiles",
    "Record",
    "RefusedError",
    "Replay",
    "ResumeError",
    "Retrying",
    "Role",
    "RunEvent",
    "RunFinished",
    "RunOutcome",
    "RunResult",
    "RunStarted",
    "RunSummary",
    "SandboxError",
    "StepFinished",
    "StorageError",
    "Store",
    "StreamDelta",
    "StreamingProvider",
    "TaskContract",
    "TextBlock",
    "ThinkingBlock",
    "TokenStreamed",
    "ToolCall",
    "ToolCalled",
    "ToolResult",
    "ToolSpec",
    "Trace",
    "Usage",
    "VerificationResult",
    "Verified",
    "WorkspaceFileContains",
    "__version__",
    "resume",
    "resume_sync",
    "run",
    "run_sync",
]
