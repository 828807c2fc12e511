"""The caller's own tools: ``@tool`` schemas, the ``Toolbox`` checks, and calls through the box.

Calls go through ``RunTools.dispatch`` with each tool adapted as a
``CallerTool``, the way a run offers them. Nothing here waits on a clock:
a tool that must outlive its timeout awaits an event that never fires.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import threading
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from io_harness.errors import ConfigError
from io_harness.messages import ToolCall, ToolSpec
from io_harness.policy import Policy
from io_harness.policy._gate import Gate
from io_harness.tools import RunTools, ToolFailure, ToolOutcome
from io_harness.tools._caller import (
    DEFAULT_TOOL_TIMEOUT,
    MAX_RESULT_CHARS,
    CallerTool,
    Tool,
    Toolbox,
    spec_hash,
)
from io_harness.tools._function import FunctionTool, ToolArgumentsError, tool
from io_harness.tools._gated import Deferral
from support import call_tool as call

# --- helpers -----------------------------------------------------------------------------


class Address(BaseModel):
    """Where a parcel goes."""

    street: str
    city: str = "Paris"


@dataclasses.dataclass
class Hit:
    path: str
    line: int


class Echo:
    """A protocol tool written by hand: it answers with what ``reply`` gives it."""

    def __init__(
        self,
        name: str = "echo",
        reply: Any = None,
        *,
        timeout: object = None,
        max_result_chars: object = None,
        parameters: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.reply = reply
        self.timeout = timeout
        self.max_result_chars = max_result_chars
        self.parameters = parameters or {"type": "object", "properties": {}}
        self.received: list[dict[str, Any]] = []
        self.spec_calls = 0

    def spec(self) -> ToolSpec:
        self.spec_calls += 1
        return ToolSpec(name=self.name, description="Echo.", parameters=self.parameters)

    async def invoke(self, arguments: dict[str, Any]) -> str:
        self.received.append(arguments)
        if callable(self.reply):
            result: str = self.reply(arguments)
            return result
        return self.reply if self.reply is not None else json.dumps(arguments)


def run_tools(*tools: Tool) -> RunTools:
    box = Toolbox(tools)
    box.validate()
    return RunTools(CallerTool(t, box.spec_of(name)) for name, t in box.items())


def seen(done: object) -> tuple[str, bool, str | None]:
    """What the model reads and the trace's error: an outcome's content, is_error and error."""
    assert isinstance(done, ToolOutcome)
    return done.content, done.is_error, done.error


def problem_of(*tools: object) -> str:
    with pytest.raises(ConfigError) as raised:
        Toolbox(tools).validate()  # type: ignore[arg-type]
    return str(raised.value)


# --- @tool: the spec ---------------------------------------------------------------------


def test_required_and_optional_parameters_become_the_schema_with_google_docstring_docs() -> None:
    @tool
    def search(query: str, limit: int = 10, tags: list[str] | None = None) -> str:
        """Search the notes.

        Every note is searched, newest first.

        Args:
            query: Words to look for.
            limit: At most this many hits.
        """
        return query

    assert search.spec() == ToolSpec(
        name="search",
        description="Search the notes.\n\nEvery note is searched, newest first.",
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to look for."},
                "limit": {
                    "type": "integer",
                    "default": 10,
                    "description": "At most this many hits.",
                },
                "tags": {
                    "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                    "default": None,
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    )


def test_rest_docstring_parameters_are_described() -> None:
    @tool
    def rename(old: str, new: str) -> str:
        """Rename a label.

        :param old: The label's current name.
        :param new: The name it takes.
        """
        return new

    properties = rename.spec().parameters["properties"]

    assert rename.spec().description == "Rename a label."
    assert properties["old"]["description"] == "The label's current name."
    assert properties["new"]["description"] == "The name it takes."


def test_a_nested_model_and_a_literal_are_in_the_schema_without_titles() -> None:
    @tool
    def ship(to: Address, speed: Literal["slow", "fast"] = "slow") -> str:
        """Ship a parcel."""
        return to.city

    parameters = ship.spec().parameters

    assert parameters["properties"]["speed"] == {
        "enum": ["slow", "fast"],
        "type": "string",
        "default": "slow",
    }
    assert parameters["properties"]["to"] == {"$ref": "#/$defs/Address"}
    assert parameters["$defs"]["Address"] == {
        "description": "Where a parcel goes.",
        "type": "object",
        "properties": {
            "street": {"type": "string"},
            "city": {"type": "string", "default": "Paris"},
        },
        "required": ["street"],
    }
    assert parameters["required"] == ["to"]
    assert "title" not in json.dumps(parameters)


def test_a_parameter_named_title_or_json_is_kept_in_the_schema() -> None:
    @tool
    def publish(title: str, json: int = 0) -> str:
        """Publish a post."""
        return title

    assert set(publish.spec().parameters["properties"]) == {"title", "json"}
    assert publish.spec().parameters["required"] == ["title"]


def test_a_function_without_parameters_takes_an_empty_object() -> None:
    @tool
    def now() -> str:
        """The time."""
        return "noon"

    assert now.spec().parameters == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def test_a_field_default_keeps_its_own_constraints_and_description() -> None:
    @tool
    def page(size: int = Field(20, ge=1, description="Rows per page.")) -> str:
        """A page of rows."""
        return str(size)

    assert page.spec().parameters["properties"]["size"] == {
        "type": "integer",
        "minimum": 1,
        "default": 20,
        "description": "Rows per page.",
    }


def test_name_description_and_limits_can_be_given_to_the_decorator() -> None:
    @tool(name="lookup-v2", description="Look a word up.", timeout=5, max_result_chars=100)
    def lookup(word: str) -> str:
        """Ignored."""
        return word

    assert lookup.spec().name == "lookup-v2"
    assert lookup.spec().description == "Look a word up."
    assert (lookup.timeout, lookup.max_result_chars) == (5, 100)


def test_the_decorated_function_is_still_the_function() -> None:
    def double(n: int) -> int:
        """Double a number."""
        return 2 * n

    decorated = tool(double)

    assert isinstance(decorated, FunctionTool) and isinstance(decorated, Tool)
    assert decorated(4) == 8
    assert decorated.__wrapped__ is double
    assert decorated.__name__ == "double" and decorated.__doc__ == "Double a number."
    assert (decorated.timeout, decorated.max_result_chars) == (None, None)


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("def f(*items: int) -> str: ...", "parameter 'items': *items cannot be"),
        ("def f(**options: int) -> str: ...", "parameter 'options': **options cannot be"),
        ("def f(a: int, b) -> str: ...", "parameter 'b' has no type annotation"),
    ],
)
def test_a_parameter_the_model_cannot_fill_is_refused_at_decoration(
    source: str, problem: str
) -> None:
    scope: dict[str, Any] = {}
    exec(source, scope)

    with pytest.raises(ConfigError, match=r"@tool f: ") as raised:
        tool(scope["f"])

    assert problem in str(raised.value)


def test_a_parameter_of_a_type_pydantic_cannot_check_is_refused_at_decoration() -> None:
    def f(lock: threading.Lock) -> str:
        return ""

    with pytest.raises(ConfigError, match=r"parameter 'lock': its type cannot be checked"):
        tool(f)


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"name": "read_file"}, "built-in tool"),
        ({"name": "has space"}, "is not 1-64 of"),
        ({"timeout": 0}, "timeout 0 is not a positive number"),
        ({"max_result_chars": 0}, "max_result_chars 0 is not a positive int"),
    ],
)
def test_a_bad_name_or_limit_is_refused_at_decoration(
    options: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigError, match=r"@tool .*f") as raised:

        @tool(**options)
        def f() -> str:
            return ""

    assert problem in str(raised.value)


# --- @tool: calls ------------------------------------------------------------------------


async def test_a_sync_and_an_async_function_answer_the_model() -> None:
    @tool
    def add(a: int, b: int = 1) -> str:
        """Add."""
        return str(a + b)

    @tool
    async def greet(who: str) -> str:
        """Greet."""
        return f"hello {who}"

    box = run_tools(add, greet)

    assert seen(await call(box, "add", a=2, b=3)) == ("5", False, None)
    assert seen(await call(box, "add", a="2")) == (
        "3",
        False,
        None,
    )  # lax: JSON-ish text is coerced
    assert seen(await call(box, "greet", who="Ada")) == ("hello Ada", False, None)


async def test_nested_models_and_positional_only_parameters_reach_the_function() -> None:
    @tool
    def label(to: Address, /, copies: int = 1) -> str:
        """Print a label."""
        assert isinstance(to, Address)
        return f"{to.street}, {to.city} x{copies}"

    box = run_tools(label)

    done = await call(box, "label", to={"street": "1 rue"}, copies=2)

    assert seen(done) == ("1 rue, Paris x2", False, None)


async def test_bad_arguments_reach_the_model_as_an_observation_naming_each_field() -> None:
    @tool
    def search(query: str, limit: int = 10) -> str:
        """Search."""
        return query

    done = await call(run_tools(search), "search", limit="many", extra=1)

    assert done.is_error and done.error is None
    assert done.content.startswith("search: invalid arguments: ")
    assert "query: Field required" in done.content
    assert "limit: Input should be a valid integer" in done.content
    assert "extra: Extra inputs are not permitted" in done.content


async def test_invoke_raises_a_tool_arguments_error_naming_the_fields() -> None:
    @tool
    def search(query: str) -> str:
        """Search."""
        return query

    with pytest.raises(ToolArgumentsError, match="invalid arguments: query: Field required"):
        await search.invoke({})


async def test_a_result_that_is_not_a_string_is_sent_as_json() -> None:
    @tool
    def hits() -> list[Hit]:
        """Hits."""
        return [Hit("a.py", 3)]

    @tool
    async def shipped() -> dict[str, Any]:
        """When and where."""
        return {"on": datetime.date(2024, 5, 1), "to": Address(street="1 rue")}

    @tool
    def nothing() -> None:
        """Nothing."""

    box = run_tools(hits, shipped, nothing)

    assert json.loads((await call(box, "hits")).content) == [{"path": "a.py", "line": 3}]
    assert json.loads((await call(box, "shipped")).content) == {
        "on": "2024-05-01",
        "to": {"street": "1 rue", "city": "Paris"},
    }
    assert (await call(box, "nothing")).content == "null"


async def test_a_sync_tool_runs_in_a_thread_while_the_event_loop_goes_on() -> None:
    started, release = threading.Event(), threading.Event()

    @tool
    def hold() -> str:
        """Hold a thread until released."""
        started.set()
        release.wait(timeout=30)
        return "released"

    other_finished = asyncio.Event()

    async def other() -> None:
        await asyncio.sleep(0)
        other_finished.set()

    held = asyncio.create_task(call(run_tools(hold), "hold"))
    await asyncio.to_thread(started.wait, 30)
    await other()

    assert other_finished.is_set()
    assert not held.done()
    release.set()
    assert seen(await held) == ("released", False, None)


async def test_a_function_tool_s_own_timeout_ends_its_call() -> None:
    never = asyncio.Event()

    @tool(timeout=0.05)
    async def wait_forever() -> str:
        """Wait."""
        await never.wait()
        return "never"

    done = await call(run_tools(wait_forever), "wait_forever")

    assert done.is_error and done.error == "timeout after 0.05 s"


# --- Toolbox.validate --------------------------------------------------------------------


class NoInvoke:
    def spec(self) -> ToolSpec:
        return ToolSpec(name="half", description="", parameters={"type": "object"})


class SyncInvoke(NoInvoke):
    def invoke(self, arguments: dict[str, Any]) -> str:
        return ""


class SpecRaises(Echo):
    def spec(self) -> ToolSpec:
        raise RuntimeError("no config file")


class SpecIsADict(Echo):
    def spec(self) -> Any:
        return {"name": "dicty"}


@pytest.mark.parametrize(
    ("tools", "named", "reason"),
    [
        ([SpecRaises()], "SpecRaises object", "its spec() raised RuntimeError: no config file"),
        ([SpecIsADict()], "SpecIsADict object", "its spec() returned dict, not a ToolSpec"),
        ([NoInvoke()], "NoInvoke object", "it is not a Tool: it has no invoke() method"),
        ([object()], "object object", "it is not a Tool: it has no spec() method"),
        ([SyncInvoke()], "SyncInvoke object", "its invoke() is not async"),
        ([Echo("")], "Echo object", "the name is empty or blank"),
        ([Echo("   ")], "   ", "the name is empty or blank"),
        ([Echo("read_file")], "read_file", "'read_file' is the name of a built-in tool"),
        ([Echo("mcp__db__query")], "mcp__db__query", "the prefix 'mcp__' is kept"),
        ([Echo("a.b")], "a.b", "'a.b' is not 1-64 of a-z"),
        ([Echo("x" * 65)], "x" * 65, "is not 1-64 of a-z"),
        ([Echo("twin"), Echo("twin")], "twin", "two tools are named 'twin'"),
        ([Echo(timeout=0)], "echo", "its timeout 0 is not a positive number of seconds"),
        ([Echo(timeout=-1.5)], "echo", "its timeout -1.5 is not a positive number"),
        ([Echo(timeout="5")], "echo", "its timeout '5' is not a positive number"),
        ([Echo(timeout=True)], "echo", "its timeout True is not a positive number"),
        ([Echo(timeout=float("nan"))], "echo", "its timeout nan is not a positive number"),
        ([Echo(max_result_chars=0)], "echo", "its max_result_chars 0 is not a positive int"),
        ([Echo(max_result_chars=1.5)], "echo", "its max_result_chars 1.5 is not a positive"),
        ([Echo(max_result_chars=True)], "echo", "its max_result_chars True is not a positive"),
        ([Echo(parameters={"type": "string"})], "echo", "its parameters are not a JSON-schema"),
        ([Echo(parameters={"type": "object", "properties": []})], "echo", "parameters are not"),
    ],
)
def test_validate_names_each_bad_tool_and_the_reason(
    tools: list[object], named: str, reason: str
) -> None:
    problem = problem_of(*tools)

    assert f"caller tool {named!r}: " in problem
    assert reason in problem


def test_validate_names_every_bad_tool_at_once() -> None:
    problem = problem_of(Echo("exec"), Echo("fine"), SpecRaises())

    assert "caller tool 'exec': 'exec' is the name of a built-in tool" in problem
    assert "caller tool 'SpecRaises object': its spec() raised" in problem
    assert "'fine'" not in problem


def test_a_good_box_validates_and_a_bare_box_is_empty() -> None:
    Toolbox([Echo("a"), Echo("b", timeout=2, max_result_chars=10)]).validate()
    Toolbox().validate()

    assert len(Toolbox()) == 0 and Toolbox().names() == ()


# --- Toolbox -----------------------------------------------------------------------------


def test_a_toolbox_lists_finds_and_grows_into_a_new_box() -> None:
    first, second = Echo("first"), Echo("second")
    box = Toolbox([first])
    grown = box.with_(second)

    assert box.names() == ("first",) and len(box) == 1
    assert grown.names() == ("first", "second") and len(grown) == 2
    assert list(grown) == [first, second]
    assert grown.specs() == (first.spec(), second.spec())
    assert grown.items() == (("first", first), ("second", second))
    assert grown.owns("second") and not grown.owns("third") and not box.owns("second")
    assert grown.get("second") is second and grown.get("third") is None
    assert grown.spec_of("first").name == "first"
    with pytest.raises(KeyError):
        grown.spec_of("third")
    assert repr(grown) == "Toolbox(['first', 'second'])"


def test_a_tool_s_spec_is_asked_for_once_when_it_joins_a_box() -> None:
    echo = Echo()
    box = Toolbox([echo]).with_(Echo("other"))
    box.validate()
    box.names(), box.specs(), box.spec_of("echo"), box.items()

    assert echo.spec_calls == 1


def test_spec_hash_is_stable_and_changes_with_the_spec() -> None:
    spec = ToolSpec(name="a", description="A.", parameters={"type": "object", "properties": {}})
    same = ToolSpec(name="a", description="A.", parameters={"properties": {}, "type": "object"})

    assert spec_hash(spec) == spec_hash(same)
    assert len(spec_hash(spec)) == 64 and int(spec_hash(spec), 16) >= 0
    assert spec_hash(spec) != spec_hash(spec.model_copy(update={"description": "B."}))
    assert spec_hash(spec) != spec_hash(spec.model_copy(update={"name": "b"}))
    assert spec_hash(spec) != spec_hash(
        spec.model_copy(update={"parameters": {"type": "object", "properties": {"x": {}}}})
    )


# --- CallerTool through RunTools ---------------------------------------------------------


async def test_a_protocol_tool_gets_the_model_s_arguments_and_its_spec_verbatim() -> None:
    parameters = {"type": "object", "properties": {"n": {"type": "integer", "title": "N"}}}
    echo = Echo(parameters=parameters)
    box = run_tools(echo)

    done = await call(box, "echo", n=1, nested={"k": [1, 2]})

    assert seen(done) == ('{"n": 1, "nested": {"k": [1, 2]}}', False, None)
    assert echo.received == [{"n": 1, "nested": {"k": [1, 2]}}]
    assert box.specs == (ToolSpec(name="echo", description="Echo.", parameters=parameters),)
    assert box["echo"].kind == "caller"


async def test_a_caller_tool_s_limits_default_when_it_names_none() -> None:
    adapted = CallerTool(Echo(), Echo().spec())
    own = CallerTool(Echo(timeout=2, max_result_chars=9), Echo().spec())

    assert (adapted.timeout, adapted.max_result_chars) == (DEFAULT_TOOL_TIMEOUT, MAX_RESULT_CHARS)
    assert (own.timeout, own.max_result_chars) == (2, 9)
    with pytest.raises(AttributeError):
        adapted.name = "other"


async def test_an_exception_in_a_tool_is_an_observation_with_its_type_and_text() -> None:
    def explode(arguments: dict[str, Any]) -> str:
        raise LookupError("no such ticket")

    done = await call(run_tools(Echo(reply=explode)), "echo")

    assert seen(done) == (
        "echo failed: LookupError: no such ticket",
        True,
        "LookupError: no such ticket",
    )


async def test_a_tool_failure_answers_with_its_message() -> None:
    def refuse(arguments: dict[str, Any]) -> str:
        raise ToolFailure("the ticket is closed")

    done = await call(run_tools(Echo(reply=refuse)), "echo")

    assert seen(done) == ("echo: the ticket is closed", True, None)


async def test_a_call_past_its_timeout_is_ended_and_said() -> None:
    never = asyncio.Event()

    class Stuck(Echo):
        async def invoke(self, arguments: dict[str, Any]) -> str:
            await never.wait()
            return "never"

    done = await call(run_tools(Stuck("stuck", timeout=0.05)), "stuck")

    assert seen(done) == (
        "stuck: the call was ended after 0.05 s (its timeout)",
        True,
        "timeout after 0.05 s",
    )


async def test_a_timeout_error_the_tool_raises_itself_is_not_its_timeout() -> None:
    def slow_backend(arguments: dict[str, Any]) -> str:
        raise TimeoutError("the backend did not answer")

    done = await call(run_tools(Echo(reply=slow_backend)), "echo")

    assert done.error == "TimeoutError: the backend did not answer"


async def test_a_result_over_the_cap_is_cut_with_a_marker_saying_how_much() -> None:
    box = run_tools(Echo(reply="x" * 25, max_result_chars=10), Echo("fits", reply="y" * 10))

    cut = await call(box, "echo")
    whole = await call(box, "fits")

    assert seen(cut) == (
        "x" * 10 + "\n[... 15 characters cut: the result was 25 characters, over this "
        "tool's cap of 10 ...]",
        False,
        None,
    )
    assert seen(whole) == ("y" * 10, False, None)


async def test_a_result_that_is_not_a_string_from_a_protocol_tool_is_an_error() -> None:
    done = await call(run_tools(Echo(reply=lambda arguments: {"n": 1})), "echo")

    assert done.is_error and done.error == "returned dict, not str"
    assert done.content == (
        "echo failed: the tool returned dict, not str (a Tool's invoke() must return text)"
    )


async def test_a_caller_tool_call_is_an_exec_of_its_name_for_the_policy() -> None:
    echo = Echo(reply="ran")
    box = run_tools(echo)
    stamped = ToolCall(id="1", name="echo", arguments={"label": "a"})

    refused = await box.dispatch(
        stamped, gate=Gate(Policy.guarded().layer("app").deny_exec("echo"))
    )
    deferred = await box.dispatch(stamped, gate=Gate(Policy.guarded()))
    allowed = await box.dispatch(
        stamped, gate=Gate(Policy.guarded().layer("app").allow_exec("echo"))
    )

    assert isinstance(refused, ToolOutcome) and refused.is_error
    assert "exec echo: deny" in refused.content
    assert isinstance(deferred, Deferral)
    assert deferred.request.target == "echo" and deferred.request.arguments == {"label": "a"}
    assert seen(allowed) == ("ran", False, None)
    assert echo.received == [{"label": "a"}]


async def test_arguments_that_are_not_an_object_never_reach_the_tool() -> None:
    echo = Echo()
    done = await run_tools(echo).dispatch(ToolCall(id="1", name="echo", arguments="[1, 2]"))

    assert isinstance(done, ToolOutcome) and done.is_error
    assert "not a JSON object" in done.content
    assert echo.received == []
