"""Roles: the roles file, and composing a role's toolset by injection, election and closure.

Every workspace is real files in ``tmp_path``: schemas in
``descriptions/tools/<name>.json``, descriptions in the frontmatter of
``descriptions/skills/<name>.md``.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from io_harness.errors import ConfigError
from io_harness.messages import Message, TextBlock, ToolCall, ToolResult, ToolSpec
from io_harness.roles import Role, Roles, compose

READ_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}


def schema(workspace: Path, name: str, body: Any = None, *, text: str | None = None) -> Path:
    """Commit a schema for ``name``: ``body`` as JSON, or ``text`` as it is."""
    path = workspace / "descriptions" / "tools" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text is not None else json.dumps(body or {"type": "object"}))
    return path


def description(workspace: Path, name: str, text: str) -> Path:
    """Commit a description file for ``name`` holding ``text``."""
    path = workspace / "descriptions" / "skills" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def spec(name: str) -> ToolSpec:
    return ToolSpec(name=name, description=f"the {name} tool", parameters={"type": "object"})


def called(*names: str) -> Message:
    """An assistant turn calling each of ``names``."""
    calls = tuple(ToolCall(id=f"c{i}-{n}", name=n, arguments={}) for i, n in enumerate(names))
    return Message(role="assistant", content=(TextBlock(text="calling"), *calls))


def answered(*names: str) -> Message:
    return Message(
        role="tool",
        content=tuple(
            ToolResult(tool_use_id=f"c{i}-{n}", content="ok") for i, n in enumerate(names)
        ),
    )


# Rule 1: injection.


def test_injected_tools_come_first_in_the_order_given_and_win_a_shared_name(
    tmp_path: Path,
) -> None:
    schema(tmp_path, "read_file", READ_SCHEMA)
    schema(tmp_path, "notes")
    injected = [spec("finish"), spec("read_file")]
    composition = compose(["notes", "read_file"], tmp_path, injected, [])
    assert [t.spec.name for t in composition.tools] == ["finish", "read_file", "notes"]
    assert [t.source for t in composition.tools] == ["injected", "injected", "elected"]
    # The injected spec stands: the committed schema does not replace it.
    assert composition.tools[1].spec == spec("read_file")
    assert composition.tools[1].schema_file is None
    assert composition.specs == (spec("finish"), spec("read_file"), composition.tools[2].spec)


def test_a_name_injected_twice_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="two injected tools are named 'finish'"):
        compose([], tmp_path, [spec("finish"), spec("finish")], [])


# Rule 2: election.


def test_elected_tools_keep_the_declared_order_with_the_schema_verbatim(tmp_path: Path) -> None:
    odd = {"type": "object", "x-vendor": [1, {"deep": None}], "additionalProperties": False}
    bodies = {"zeta": odd, "alpha": READ_SCHEMA, "mid": None}
    files = {name: schema(tmp_path, name, body) for name, body in bodies.items()}
    composition = compose(["mid", "zeta", "alpha"], tmp_path, [], [])
    assert [t.spec.name for t in composition.tools] == ["mid", "zeta", "alpha"]
    assert {t.source for t in composition.tools} == {"elected"}
    assert composition.tools[1].spec.parameters == odd
    assert composition.tools[2].spec.parameters == READ_SCHEMA
    assert [t.schema_file for t in composition.tools] == [
        files[n] for n in ("mid", "zeta", "alpha")
    ]


def test_a_declared_name_without_a_schema_file_is_dropped_silently(tmp_path: Path) -> None:
    schema(tmp_path, "read_file")
    description(tmp_path, "run_tests", "---\ndescription: Run the tests.\n---\n")
    composition = compose(["run_tests", "read_file", "ghost"], tmp_path, [], [])
    assert [t.spec.name for t in composition.tools] == ["read_file"]
    # No descriptions folder at all is the same: nothing is elected, nothing fails.
    assert compose(["read_file"], tmp_path / "elsewhere", [], []).tools == ()


def test_the_description_is_the_frontmatter_description(tmp_path: Path) -> None:
    schema(tmp_path, "read_file", READ_SCHEMA)
    path = description(
        tmp_path,
        "read_file",
        "---\nname: read-file\ndescription: |\n  Read a file.\n  Whole.\n---\n# Body\nnot this\n",
    )
    (tool,) = compose(["read_file"], tmp_path, [], []).tools
    assert tool.spec.description == "Read a file.\nWhole."
    assert tool.description_file == path


@pytest.mark.parametrize(
    "text",
    [
        None,  # no description file
        "# Read a file\n\nNo frontmatter at all.\n",
        "---\nname: read-file\n---\nbody\n",  # frontmatter without a description
        "---\n---\nbody\n",  # empty frontmatter
    ],
    ids=["absent", "no-frontmatter", "no-description-key", "empty-frontmatter"],
)
def test_no_description_composes_with_an_empty_one(tmp_path: Path, text: str | None) -> None:
    schema(tmp_path, "read_file", READ_SCHEMA)
    if text is not None:
        description(tmp_path, "read_file", text)
    (tool,) = compose(["read_file"], tmp_path, [], []).tools
    assert tool.spec.description == ""
    assert tool.spec.parameters == READ_SCHEMA
    assert (tool.description_file is None) == (text is None)


# Faults: surfaced, naming the tool and the file.


def test_a_schema_path_that_cannot_be_read_is_a_config_error(tmp_path: Path) -> None:
    # A folder where the file should be cannot be read by any user, root included.
    path = tmp_path / "descriptions" / "tools" / "read_file.json"
    path.mkdir(parents=True)
    with pytest.raises(ConfigError, match="tool 'read_file'") as raised:
        compose(["read_file"], tmp_path, [], [])
    assert str(path) in str(raised.value)


@pytest.mark.parametrize("text", ['{"type": "object",', "", "{'type': 'object'}", '{"x": NaN}'])
def test_a_schema_that_is_not_valid_json_is_a_config_error(tmp_path: Path, text: str) -> None:
    path = schema(tmp_path, "read_file", text=text)
    with pytest.raises(ConfigError, match="not valid JSON") as raised:
        compose(["read_file"], tmp_path, [], [])
    assert "tool 'read_file'" in str(raised.value)
    assert str(path) in str(raised.value)


@pytest.mark.parametrize(
    ("text", "kind"), [("[]", "an array"), ('"object"', "a string"), ("3", "a number")]
)
def test_a_schema_that_is_not_an_object_is_a_config_error(
    tmp_path: Path, text: str, kind: str
) -> None:
    path = schema(tmp_path, "read_file", text=text)
    with pytest.raises(ConfigError, match=f"holds {kind}, not a JSON object") as raised:
        compose(["read_file"], tmp_path, [], [])
    assert str(path) in str(raised.value)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("---\ndescription: [unclosed\n---\n", "not valid YAML"),
        ("---\n- a list\n- of things\n---\n", "not a mapping"),
        ("---\ndescription: never closed\n", "never closed"),
        ("---\ndescription: [1, 2]\n---\n", "not a string"),
    ],
    ids=["bad-yaml", "not-a-mapping", "unterminated", "description-not-a-string"],
)
def test_malformed_frontmatter_is_a_config_error(tmp_path: Path, text: str, problem: str) -> None:
    schema(tmp_path, "read_file")
    path = description(tmp_path, "read_file", text)
    with pytest.raises(ConfigError, match=problem) as raised:
        compose(["read_file"], tmp_path, [], [])
    assert "tool 'read_file'" in str(raised.value)
    assert str(path) in str(raised.value)


def test_a_bad_declared_name_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape("'../x' is not a tool name")):
        compose(["../x"], tmp_path, [], [])
    with pytest.raises(ConfigError, match="'a' is declared twice"):
        compose(["a", "a"], tmp_path, [], [])


# Rule 3: closure.


def test_closure_appends_history_names_with_the_committed_schema_or_the_stand_in(
    tmp_path: Path,
) -> None:
    schema(tmp_path, "grep", READ_SCHEMA)
    description(tmp_path, "grep", "---\ndescription: Search files.\n---\n")
    schema(tmp_path, "read_file")
    history = [
        Message.user("go"),
        called("old_tool", "finish", "read_file"),
        answered("old_tool", "finish", "read_file"),
        called("grep", "old_tool"),
    ]
    composition = compose(["read_file"], tmp_path, [spec("finish")], history)
    assert [(t.spec.name, t.source) for t in composition.tools] == [
        ("finish", "injected"),
        ("read_file", "elected"),
        ("old_tool", "closure"),
        ("grep", "closure"),
    ]
    old, grep = composition.tools[2:]
    assert old.spec == ToolSpec(name="old_tool", description="", parameters={"type": "object"})
    assert old.schema_file is None and old.description_file is None
    assert grep.spec.parameters == READ_SCHEMA
    assert grep.spec.description == "Search files."
    assert grep.schema_file == tmp_path / "descriptions" / "tools" / "grep.json"


def test_closure_reads_only_assistant_turns_and_checks_the_files_it_reads(tmp_path: Path) -> None:
    path = schema(tmp_path, "broken", text="{nope")
    # A user turn cannot call a tool: a ToolCall there is not a name the history calls.
    user_call = Message(role="user", content=(ToolCall(id="u1", name="broken"),))
    assert compose([], tmp_path, [], [user_call]).tools == ()
    with pytest.raises(ConfigError, match="tool 'broken'") as raised:
        compose([], tmp_path, [], [called("broken")])
    assert str(path) in str(raised.value)


def test_a_called_name_no_file_could_bear_gets_the_stand_in(tmp_path: Path) -> None:
    (tmp_path / "descriptions" / "tools").mkdir(parents=True)
    (tmp_path / "descriptions" / "secret.json").write_text('{"type": "object", "x": 1}')
    (tool,) = compose([], tmp_path, [], [called("../secret")]).tools
    assert tool.spec.parameters == {"type": "object"}
    assert tool.source == "closure"


def test_the_history_is_not_modified(tmp_path: Path) -> None:
    schema(tmp_path, "grep")
    history = [Message.user("go"), called("grep", "gone"), answered("grep", "gone")]
    before = copy.deepcopy(history)
    composition = compose(["read_file"], tmp_path, [], history)
    assert history == before
    assert [m.model_dump() for m in history] == [m.model_dump() for m in before]
    assert len(composition.tools) == 2
    # The stand-in is the composition's own: changing it changes no later composition.
    composition.tools[1].spec.parameters["type"] = "changed"
    assert compose([], tmp_path, [], history).tools[1].spec.parameters == {"type": "object"}


# Declaring is not permitting.


def test_permitted_is_the_injected_and_elected_names_never_closure(tmp_path: Path) -> None:
    schema(tmp_path, "read_file")
    schema(tmp_path, "grep")
    history = [called("grep", "legacy")]
    composition = compose(["read_file", "run_tests"], tmp_path, [spec("finish")], history)
    assert composition.permitted == frozenset({"finish", "read_file"})
    assert {t.spec.name for t in composition.tools} == {"finish", "read_file", "grep", "legacy"}


def test_refusal_names_the_role_and_its_permitted_set(tmp_path: Path) -> None:
    schema(tmp_path, "read_file")
    schema(tmp_path, "edit_file")
    composition = compose(["read_file", "edit_file"], tmp_path, [spec("finish")], [called("x")])
    assert composition.refusal("read_file", "coder") is None
    assert composition.refusal("finish", "coder") is None
    assert composition.refusal("x", "coder") == (
        "the role 'coder' may call only: finish, read_file, edit_file; 'x' is not one of them"
    )
    assert compose([], tmp_path, [], []).refusal("exec", "idle") == (
        "the role 'idle' may call no tools; 'exec' is not one of them"
    )


# The roles file.


def roles_file(folder: Path, text: str) -> Path:
    path = folder / "roles.toml"
    path.write_text(text)
    return path


CODER = """
[roles.coder]
provider = "anthropic:claude-sonnet-4-5"
system_prompt = "prompts/coder.md"
tools = ["read_file", "edit_file", "run_tests"]
context_window = 200000

[roles.reviewer]
tools = ["read_file"]
"""


def test_a_roles_file_loads_with_the_prompt_read_relative_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "config"
    (folder / "prompts").mkdir(parents=True)
    (folder / "prompts" / "coder.md").write_text("You write code.\n")
    path = roles_file(folder, CODER)
    monkeypatch.chdir(tmp_path)  # the prompt resolves against the file, not the current folder
    roles = Roles.from_toml(Path("config") / "roles.toml")
    assert roles.names == ("coder", "reviewer")
    assert list(roles) == ["coder", "reviewer"]
    assert len(roles) == 2 and "coder" in roles and "ghost" not in roles
    coder = roles.get("coder")
    assert coder == Role(
        name="coder",
        provider="anthropic:claude-sonnet-4-5",
        system_prompt="You write code.\n",
        tools=("read_file", "edit_file", "run_tests"),
        context_window=200000,
        system_prompt_file=(folder / "prompts" / "coder.md"),
    )
    reviewer = roles.get("reviewer")
    assert (reviewer.provider, reviewer.system_prompt, reviewer.context_window) == (None,) * 3
    assert roles.source == Path("config") / "roles.toml"
    assert Roles.from_toml(path).roles["reviewer"].tools == ("read_file",)


def test_an_unknown_role_names_the_known_ones(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "coder.md").write_text("x")
    path = roles_file(tmp_path, CODER)
    with pytest.raises(ConfigError, match="no role is named 'tester'") as raised:
        Roles.from_toml(path).get("tester")
    assert "the roles are: coder, reviewer" in str(raised.value)
    assert str(path) in str(raised.value)


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ('[roles.coder]\ntoolz = ["a"]\n', "roles.coder.toolz", "unknown key"),
        ('[roles.coder]\ntools = ["a", "b", "a"]\n', "roles.coder.tools", "'a' is declared twice"),
        ('[roles.coder]\ntools = ["read file"]\n', "roles.coder.tools.0", "not a tool name"),
        ('[roles."the coder"]\ntools = []\n', "roles", "'the coder' is not a role name"),
        ('[roles.coder]\nsystem_prompt = "prompts/none.md"\n', "roles.coder.system_prompt",
         "none.md"),
        ("[roles.coder]\ncontext_window = 0\n", "roles.coder.context_window", "greater than 0"),
        ('[roles.coder]\ncontext_window = "big"\n', "roles.coder.context_window", "integer"),
        ('[roles.coder]\ntools = "read_file"\n', "roles.coder.tools", "an array"),
        ('[roles.coder]\nprovider = "gpt:4"\n', "roles.coder.provider", "unknown provider"),
        ("[roles.coder]\nprovider = 4\n", "roles.coder.provider", "string"),
        ("[roles]\ncoder = 1\n", "roles.coder", "expected a table"),
        ('[roles.coder]\n[other]\nx = 1\n', "unknown key 'other'", "the keys are: roles"),
        ("", "roles", "at least one"),
    ],
    ids=[
        "unknown-key", "duplicate-tool", "bad-tool-name", "bad-role-name", "missing-prompt",
        "zero-window", "string-window", "tools-string", "unknown-provider", "provider-number",
        "role-not-table", "unknown-top-key", "no-roles",
    ],
)  # fmt: skip
def test_a_mistake_in_the_roles_file_names_the_file_and_key(
    tmp_path: Path, text: str, where: str, problem: str
) -> None:
    path = roles_file(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        Roles.from_toml(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: ")
    assert where in message
    assert problem in message


def test_a_missing_roles_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the roles file"):
        Roles.from_toml(tmp_path / "roles.toml")


def test_roles_built_in_python_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"Role: tools: .*'a' is declared twice"):
        Role(name="r", tools=("a", "a"))
    with pytest.raises(ConfigError, match="is named 'b'"):
        Roles({"a": Role(name="b")})
    roles = Roles({"a": Role(name="a", system_prompt="Be brief.")})
    assert roles.get("a").system_prompt == "Be brief."
    assert roles.source is None
