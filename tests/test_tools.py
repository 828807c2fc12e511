"""The built-in file tools from the user's side: reading, writing, searching, confinement.

Every test drives the tools through ``RunTools.dispatch`` (or the whole loop
with a scripted provider) on real files under ``tmp_path``. The ``project``
fixture is a workspace at ``tmp_path/project``; ``outside`` is a sibling
folder the agent must never read or change.
"""

from __future__ import annotations

import asyncio
import os
import stat
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from io_harness import (
    Act,
    ConfigError,
    Policy,
    RunOutcome,
    TaskContract,
    ToolCall,
    ToolResult,
    WorkspaceFileContains,
    run,
)
from io_harness.policy._gate import Gate
from io_harness.testing import ScriptedProvider, call, reply
from io_harness.tools import (
    SKIPPED_DIRS,
    Args,
    HarnessTool,
    PathRefused,
    RunTools,
    ToolContext,
    ToolOutcome,
    Workspace,
    single_file_tools,
    workspace_tools,
)
from io_harness.tools._files import FIND_MAX_RESULTS, GREP_MAX_MATCHES, LINE_SHOWN_CHARS
from io_harness.tools._gated import Deferral
from io_harness.tools._text import READ_CEILING_BYTES

SECRET = "top secret\n"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
ELF = b"\x7fELF\x02\x01\x01" + b"\x00" * 32


# --- helpers -----------------------------------------------------------------------------


def toolbox_for(root: Path) -> RunTools:
    return RunTools(workspace_tools(Workspace(root)))


async def dispatch(toolbox: RunTools, tool_call: ToolCall) -> ToolOutcome:
    """An ungated call: no approver can defer it, so it always ends in an outcome."""
    done = await toolbox.dispatch(tool_call)
    assert isinstance(done, ToolOutcome)
    return done


async def use(toolbox: RunTools, name: str, /, **arguments: Any) -> ToolOutcome:
    return await dispatch(toolbox, ToolCall(id="1", name=name, arguments=arguments))


def snapshot(folder: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every entry under ``folder`` (symlinks not followed): its mode and, for files, bytes."""
    seen: dict[str, tuple[int, bytes | None]] = {}
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        for name in sorted(dirnames + filenames):
            entry = Path(dirpath) / name
            info = entry.lstat()
            data = entry.read_bytes() if stat.S_ISREG(info.st_mode) else None
            seen[entry.relative_to(folder).as_posix()] = (info.st_mode, data)
    return seen


@pytest.fixture
def box(project: Path) -> RunTools:
    return toolbox_for(project)


@pytest.fixture
def outside(tmp_path: Path, project: Path) -> Path:
    """A folder next to the workspace, with a secret, and two symlinks to it from inside."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET)
    (project / "link_out").symlink_to(folder, target_is_directory=True)
    (project / "secret_link.txt").symlink_to(folder / "secret.txt")
    return folder


# --- read_file ---------------------------------------------------------------------------


async def test_read_file_numbers_every_line_from_one(box: RunTools) -> None:
    done = await use(box, "read_file", path="data/notes.txt")

    assert not done.is_error
    assert done.content == "     1\talpha\n     2\tbeta\n     3\tgamma\n"
    assert done.changed == ()


async def test_read_file_shows_a_last_line_without_a_newline_as_it_is(project: Path) -> None:
    (project / "tail.txt").write_text("one\ntwo")

    done = await use(toolbox_for(project), "read_file", path="tail.txt")

    assert done.content == "     1\tone\n     2\ttwo"


async def test_read_file_with_offset_and_limit_shows_that_window_and_the_total(
    box: RunTools,
) -> None:
    done = await use(box, "read_file", path="data/notes.txt", offset=2, limit=1)

    assert not done.is_error
    assert done.content == "[data/notes.txt: lines 2-2 of 3]\n     2\tbeta\n"


async def test_read_file_with_only_a_limit_starts_at_the_first_line(box: RunTools) -> None:
    done = await use(box, "read_file", path="data/notes.txt", limit=2)

    assert done.content == "[data/notes.txt: lines 1-2 of 3]\n     1\talpha\n     2\tbeta\n"


async def test_read_file_with_only_an_offset_reads_to_the_end(box: RunTools) -> None:
    done = await use(box, "read_file", path="data/notes.txt", offset=2)

    assert done.content == "[data/notes.txt: lines 2-3 of 3]\n     2\tbeta\n     3\tgamma\n"


async def test_a_limit_past_the_end_shows_what_there_is(box: RunTools) -> None:
    done = await use(box, "read_file", path="data/notes.txt", offset=3, limit=50)

    assert done.content == "[data/notes.txt: lines 3-3 of 3]\n     3\tgamma\n"


async def test_an_offset_past_the_end_is_an_error_naming_the_line_count(box: RunTools) -> None:
    done = await use(box, "read_file", path="data/notes.txt", offset=4)

    assert done.is_error
    assert "offset 4 is past the end of data/notes.txt (3 lines)" in done.content


@pytest.mark.parametrize("field", ["offset", "limit"])
async def test_an_offset_or_limit_below_one_is_an_invalid_argument(
    box: RunTools, field: str
) -> None:
    done = await use(box, "read_file", path="data/notes.txt", **{field: 0})

    assert done.is_error
    assert f"{field}: Input should be greater than or equal to 1" in done.content


async def test_an_empty_file_is_reported_as_empty(box: RunTools) -> None:
    done = await use(box, "read_file", path="pkg/__init__.py")

    assert not done.is_error
    assert done.content == "pkg/__init__.py is empty"


async def test_a_missing_file_and_a_folder_are_errors_that_say_so(box: RunTools) -> None:
    missing = await use(box, "read_file", path="pkg/nope.py")
    folder = await use(box, "read_file", path="pkg")

    assert missing.is_error and "pkg/nope.py does not exist" in missing.content
    assert folder.is_error and "pkg is a directory; use list_dir" in folder.content


async def test_a_file_exactly_at_the_ceiling_is_read_whole(project: Path) -> None:
    line = "x" * 1023 + "\n"
    (project / "edge.txt").write_text(line * (READ_CEILING_BYTES // len(line)))
    assert (project / "edge.txt").stat().st_size == READ_CEILING_BYTES

    done = await use(toolbox_for(project), "read_file", path="edge.txt")

    assert not done.is_error
    assert done.content.count("\n") == READ_CEILING_BYTES // len(line)


async def test_a_file_over_the_ceiling_is_refused_with_its_size_never_truncated(
    project: Path,
) -> None:
    size = READ_CEILING_BYTES + 1
    (project / "big.txt").write_text("y" * (size - 1) + "\n")

    done = await use(toolbox_for(project), "read_file", path="big.txt")

    assert done.is_error
    assert f"big.txt is {size} bytes" in done.content
    assert f"read ceiling of {READ_CEILING_BYTES} bytes" in done.content
    assert "offset and limit" in done.content
    assert "yyyy" not in done.content


async def test_a_file_over_the_ceiling_can_still_be_read_in_parts(project: Path) -> None:
    lines = [f"line {n:06d} " + "z" * 100 + "\n" for n in range(1, 3001)]
    (project / "log.txt").write_text("".join(lines))
    assert (project / "log.txt").stat().st_size > READ_CEILING_BYTES
    box = toolbox_for(project)

    head = await use(box, "read_file", path="log.txt", limit=2)
    middle = await use(box, "read_file", path="log.txt", offset=1500, limit=1)
    tail = await use(box, "read_file", path="log.txt", offset=3000)

    assert head.content.splitlines()[:2] == [
        "[log.txt: lines 1-2 of 3000]",
        "     1\t" + lines[0][:-1],
    ]
    assert middle.content == f"[log.txt: lines 1500-1500 of 3000]\n  1500\t{lines[1499]}"
    assert tail.content == f"[log.txt: lines 3000-3000 of 3000]\n  3000\t{lines[2999]}"


async def test_a_window_bigger_than_the_ceiling_is_refused_asking_for_fewer_lines(
    project: Path,
) -> None:
    (project / "log.txt").write_text(("w" * 99 + "\n") * 3000)

    done = await use(toolbox_for(project), "read_file", path="log.txt", offset=1)

    assert done.is_error
    assert f"exceed the read ceiling of {READ_CEILING_BYTES} bytes" in done.content
    assert "ask for fewer lines" in done.content


async def test_a_window_of_a_file_that_is_one_huge_line_reads_in_bounded_memory(
    project: Path,
) -> None:
    with (project / "blob.txt").open("w") as handle:
        for _ in range(64):  # one line of 32 MiB, then a short one
            handle.write("x" * (512 * 1024))
        handle.write("\nend\n")
    box = toolbox_for(project)

    tracemalloc.start()
    try:
        first = await use(box, "read_file", path="blob.txt", offset=1, limit=1)
        second = await use(box, "read_file", path="blob.txt", offset=2, limit=1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert first.is_error and "exceed the read ceiling" in first.content
    assert second.content == "[blob.txt: lines 2-2 of 2]\n     2\tend\n"
    assert peak < 4 * READ_CEILING_BYTES, f"{peak} bytes held to read a window"


async def test_a_window_is_measured_in_bytes_so_multibyte_text_cannot_pass_the_ceiling(
    project: Path,
) -> None:
    # 1000 lines of 99 euro signs: 298,000 bytes on disk but only 100,000 characters.
    (project / "euros.txt").write_text(("\u20ac" * 99 + "\n") * 1000, encoding="utf-8")
    assert (project / "euros.txt").stat().st_size > READ_CEILING_BYTES
    box = toolbox_for(project)

    whole = await use(box, "read_file", path="euros.txt")
    window = await use(box, "read_file", path="euros.txt", offset=1)

    assert whole.is_error
    assert window.is_error, f"{len(window.content.encode())} bytes came back in one window"
    assert "read ceiling" in window.content


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (PNG, "a PNG image"),
        (ELF, "an ELF executable"),
        (b"\xff\xd8\xff\xe0" + b"\x00" * 16, "a JPEG image"),
        (b"%PDF-1.7\n", "a PDF document"),
        (b"text then a \x00 byte\n", "binary data"),
    ],
)
async def test_a_binary_file_is_refused_naming_its_kind_and_size(
    project: Path, data: bytes, kind: str
) -> None:
    (project / "blob").write_bytes(data)

    done = await use(toolbox_for(project), "read_file", path="blob")

    assert done.is_error
    assert f"blob is {kind} ({len(data)} bytes), not text" in done.content


async def test_a_binary_file_is_refused_even_when_read_in_parts(project: Path) -> None:
    (project / "image.png").write_bytes(PNG)

    done = await use(toolbox_for(project), "read_file", path="image.png", offset=1, limit=1)

    assert done.is_error
    assert "a PNG image" in done.content


async def test_a_file_that_is_not_utf8_is_refused_naming_the_bad_byte(project: Path) -> None:
    (project / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))

    done = await use(toolbox_for(project), "read_file", path="latin1.txt")

    assert done.is_error
    assert "latin1.txt is not UTF-8 text (bad byte at offset 3)" in done.content


async def test_a_file_that_is_not_utf8_is_refused_when_read_in_parts_too(
    project: Path,
) -> None:
    (project / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))

    done = await use(toolbox_for(project), "read_file", path="latin1.txt", offset=1, limit=1)

    assert "\ufffd" not in done.content
    assert done.is_error
    assert "not UTF-8" in done.content


async def test_windows_line_endings_are_kept_and_numbered_once(project: Path) -> None:
    (project / "dos.txt").write_bytes(b"one\r\ntwo\r\n")
    box = toolbox_for(project)

    whole = await use(box, "read_file", path="dos.txt")
    part = await use(box, "read_file", path="dos.txt", offset=2, limit=1)

    assert whole.content == "     1\tone\r\n     2\ttwo\r\n"
    assert part.content == "[dos.txt: lines 2-2 of 2]\n     2\ttwo\r\n"


@pytest.mark.parametrize("separator", ["\x0c", "\u2028"])
async def test_line_numbers_count_newlines_the_same_way_in_every_tool(
    project: Path, separator: str
) -> None:
    (project / "page.py").write_text(f"a = 1\n{separator}b = 2\nc = 3\n")
    box = toolbox_for(project)

    whole = await use(box, "read_file", path="page.py")
    found = await use(box, "grep", pattern="c = 3")
    part = await use(box, "read_file", path="page.py", offset=3, limit=1)
    edited = await use(box, "edit_file", path="page.py", search="c = 3", replace="c = 4")

    assert part.content == "[page.py: lines 3-3 of 3]\n     3\tc = 3\n"
    assert edited.content == "page.py edited at line 3"
    assert found.content == "page.py:3: c = 3"
    assert whole.content == f"     1\ta = 1\n     2\t{separator}b = 2\n     3\tc = 3\n"


# --- write_file --------------------------------------------------------------------------


async def test_write_file_creates_the_file_and_its_parent_folders(project: Path) -> None:
    done = await use(
        toolbox_for(project), "write_file", path="docs/guide/intro.md", content="# Caf\u00e9\n"
    )

    assert not done.is_error
    assert done.content == "docs/guide/intro.md created (8 bytes)"
    assert done.changed == ("docs/guide/intro.md",)
    assert (project / "docs" / "guide" / "intro.md").read_bytes() == "# Caf\u00e9\n".encode()


async def test_write_file_says_whether_it_changed_the_file(project: Path) -> None:
    box = toolbox_for(project)

    changed = await use(box, "write_file", path="data/notes.txt", content="delta\n")
    unchanged = await use(box, "write_file", path="data/notes.txt", content="delta\n")

    assert changed.content == "data/notes.txt changed (6 bytes)"
    assert changed.changed == ("data/notes.txt",)
    assert unchanged.content == "data/notes.txt unchanged (6 bytes)"
    assert unchanged.changed == ()
    assert (project / "data" / "notes.txt").read_text() == "delta\n"


async def test_write_file_can_empty_a_file(project: Path) -> None:
    done = await use(toolbox_for(project), "write_file", path="pkg/calc.py", content="")

    assert done.content == "pkg/calc.py changed (0 bytes)"
    assert (project / "pkg" / "calc.py").read_bytes() == b""


@pytest.mark.parametrize("mode", [0o755, 0o600, 0o640])
async def test_write_file_keeps_the_mode_of_an_existing_file(project: Path, mode: int) -> None:
    script = project / "run.sh"
    script.write_text("#!/bin/sh\necho old\n")
    script.chmod(mode)

    done = await use(toolbox_for(project), "write_file", path="run.sh", content="echo new\n")

    assert done.content.startswith("run.sh changed")
    assert stat.S_IMODE(script.stat().st_mode) == mode
    assert script.read_text() == "echo new\n"


async def test_write_file_replaces_the_file_whole_and_leaves_no_temporary_file(
    project: Path,
) -> None:
    target = project / "data" / "notes.txt"
    before = sorted(p.name for p in target.parent.iterdir())
    with target.open("rb") as reader_of_the_old_file:
        done = await use(
            toolbox_for(project), "write_file", path="data/notes.txt", content="new\n" * 1000
        )
        # The old file was swapped out, not rewritten in place: an open reader sees it whole.
        assert reader_of_the_old_file.read() == b"alpha\nbeta\ngamma\n"

    assert not done.is_error
    assert target.read_text() == "new\n" * 1000
    assert sorted(p.name for p in target.parent.iterdir()) == before


async def test_write_file_onto_a_folder_is_an_error_and_the_folder_stays(project: Path) -> None:
    before = snapshot(project)

    done = await use(toolbox_for(project), "write_file", path="pkg", content="x")

    assert done.is_error
    assert "pkg is a directory" in done.content
    assert snapshot(project) == before


async def test_write_file_under_a_path_that_is_a_file_is_an_error(project: Path) -> None:
    done = await use(toolbox_for(project), "write_file", path="pkg/calc.py/inner", content="x")

    assert done.is_error
    assert (project / "pkg" / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"


# --- edit_file ---------------------------------------------------------------------------


async def test_edit_file_replaces_the_one_occurrence_and_reports_its_line(project: Path) -> None:
    done = await use(
        toolbox_for(project), "edit_file", path="pkg/calc.py", search="a - b", replace="a + b"
    )

    assert not done.is_error
    assert done.content == "pkg/calc.py edited at line 2"
    assert done.changed == ("pkg/calc.py",)
    assert (project / "pkg" / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"


async def test_edit_file_can_replace_across_lines_and_delete_text(project: Path) -> None:
    box = toolbox_for(project)

    done = await use(box, "edit_file", path="data/notes.txt", search="alpha\nbeta\n", replace="")

    assert done.content == "data/notes.txt edited at line 1"
    assert (project / "data" / "notes.txt").read_text() == "gamma\n"


@pytest.mark.parametrize(
    ("search", "where"),
    [("a * b", "not found"), ("a", "found 3 times"), ("b", "found 2 times")],
)
async def test_edit_file_refuses_a_search_that_is_not_exactly_one_match(
    project: Path, search: str, where: str
) -> None:
    before = snapshot(project)

    done = await use(
        toolbox_for(project), "edit_file", path="pkg/calc.py", search=search, replace="?"
    )

    assert done.is_error
    assert f"the search text was {where} in pkg/calc.py; it must occur exactly once" in (
        done.content
    )
    assert done.changed == ()
    assert snapshot(project) == before


async def test_edit_file_refuses_an_empty_search(project: Path) -> None:
    before = snapshot(project)

    done = await use(toolbox_for(project), "edit_file", path="pkg/calc.py", search="", replace="x")

    assert done.is_error
    assert "search is empty" in done.content
    assert snapshot(project) == before


async def test_edit_file_on_a_missing_file_says_it_does_not_exist(project: Path) -> None:
    done = await use(toolbox_for(project), "edit_file", path="nope.py", search="a", replace="b")

    assert done.is_error
    assert "nope.py does not exist" in done.content
    assert not (project / "nope.py").exists()


async def test_edit_file_refuses_a_search_that_matches_twice_overlapping(
    project: Path,
) -> None:
    target = project / "repeat.txt"
    target.write_text("x\nx\nx\n")  # "x\nx" starts at line 1 and at line 2

    done = await use(
        toolbox_for(project), "edit_file", path="repeat.txt", search="x\nx", replace="y\ny"
    )

    assert target.read_text() == "x\nx\nx\n"
    assert done.is_error
    assert "found 2 times" in done.content


async def test_edit_file_keeps_the_mode_of_the_file(project: Path) -> None:
    target = project / "pkg" / "calc.py"
    target.chmod(0o750)

    await use(toolbox_for(project), "edit_file", path="pkg/calc.py", search="-", replace="+")

    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    assert "a + b" in target.read_text()


async def test_edit_file_refuses_a_binary_file_and_leaves_it_alone(project: Path) -> None:
    (project / "image.png").write_bytes(PNG)

    done = await use(toolbox_for(project), "edit_file", path="image.png", search="P", replace="Q")

    assert done.is_error
    assert "a PNG image" in done.content
    assert (project / "image.png").read_bytes() == PNG


# --- grep --------------------------------------------------------------------------------


async def test_grep_prints_path_line_and_text_for_each_match_in_path_order(
    project: Path,
) -> None:
    (project / "a.txt").write_text("beta here\nnothing\n")

    done = await use(toolbox_for(project), "grep", pattern=r"^b|a - b")

    assert not done.is_error
    assert done.content.splitlines() == [
        "a.txt:1: beta here",
        "data/notes.txt:2: beta",
        "pkg/calc.py:2:     return a - b",
    ]


async def test_grep_path_glob_matches_the_name_or_the_relative_path(project: Path) -> None:
    box = toolbox_for(project)

    by_name = await use(box, "grep", pattern="a", path_glob="*.py")
    by_path = await use(box, "grep", pattern="a", path_glob="data/*")

    assert {line.split(":")[0] for line in by_name.content.splitlines()} == {"pkg/calc.py"}
    assert {line.split(":")[0] for line in by_path.content.splitlines()} == {"data/notes.txt"}


async def test_grep_with_no_matches_says_so(box: RunTools) -> None:
    done = await use(box, "grep", pattern="zebra")

    assert not done.is_error
    assert done.content == "no matches for 'zebra'"


async def test_grep_caps_its_matches_and_counts_the_rest(project: Path) -> None:
    extra = 37
    (project / "many.txt").write_text("hit\n" * (GREP_MAX_MATCHES + extra))

    done = await use(toolbox_for(project), "grep", pattern="hit")

    lines = done.content.splitlines()
    assert len(lines) == GREP_MAX_MATCHES + 1
    assert lines[0] == "many.txt:1: hit"
    assert lines[GREP_MAX_MATCHES - 1] == f"many.txt:{GREP_MAX_MATCHES}: hit"
    assert lines[-1] == f"[{extra} more matches not shown; narrow the pattern or path_glob]"


async def test_grep_clips_a_very_long_line_and_says_how_much_it_cut(project: Path) -> None:
    (project / "min.js").write_text("needle" + "q" * 1000 + "\n")

    done = await use(toolbox_for(project), "grep", pattern="needle")

    shown = ("needle" + "q" * 1000)[:LINE_SHOWN_CHARS]
    assert done.content == f"min.js:1: {shown}... [+{1006 - LINE_SHOWN_CHARS} chars]"


async def test_an_invalid_regular_expression_is_an_error_observation(box: RunTools) -> None:
    done = await use(box, "grep", pattern="(unclosed")

    assert done.is_error
    assert "the pattern is not a valid regular expression" in done.content


async def test_grep_skips_binary_non_utf8_and_oversized_files_and_counts_them(
    project: Path,
) -> None:
    (project / "image.png").write_bytes(PNG + b"alpha")
    (project / "prog").write_bytes(ELF + b"alpha")
    (project / "latin1.txt").write_bytes("alpha caf\xe9\n".encode("latin-1"))
    (project / "huge.txt").write_text("alpha\n" * (READ_CEILING_BYTES // 6 + 1))

    done = await use(toolbox_for(project), "grep", pattern="alpha")

    assert done.content.splitlines() == [
        "data/notes.txt:1: alpha",
        "[4 binary, non-UTF-8 or oversized files not searched]",
    ]


async def test_grep_with_no_match_still_counts_what_it_could_not_search(project: Path) -> None:
    (project / "image.png").write_bytes(PNG)

    done = await use(toolbox_for(project), "grep", pattern="zebra")

    assert done.content == (
        "no matches for 'zebra'\n[1 binary, non-UTF-8 or oversized files not searched]"
    )


@pytest.mark.parametrize("skipped", sorted(SKIPPED_DIRS))
@pytest.mark.parametrize("depth", ["", "pkg/"])
async def test_walks_skip_tool_state_folders_at_any_depth(
    project: Path, skipped: str, depth: str
) -> None:
    hidden = project / depth / skipped / "inner"
    hidden.mkdir(parents=True)
    (hidden / "needle.txt").write_text("needle\n")
    box = toolbox_for(project)

    found = await use(box, "find", name_glob="needle*")
    grepped = await use(box, "grep", pattern="needle")

    assert found.content == "no files match 'needle*'"
    assert grepped.content == "no matches for 'needle'"


# --- find --------------------------------------------------------------------------------


async def test_find_lists_files_matching_by_name_or_by_relative_path(project: Path) -> None:
    (project / "pkg" / "sub").mkdir()
    (project / "pkg" / "sub" / "deep.py").write_text("")
    box = toolbox_for(project)

    by_name = await use(box, "find", name_glob="*.py")
    by_path = await use(box, "find", name_glob="pkg/sub/*")

    assert by_name.content.splitlines() == ["pkg/__init__.py", "pkg/calc.py", "pkg/sub/deep.py"]
    assert by_path.content == "pkg/sub/deep.py"


async def test_find_lists_files_not_folders(box: RunTools) -> None:
    done = await use(box, "find", name_glob="pkg")

    assert done.content == "no files match 'pkg'"


async def test_find_caps_its_results_and_counts_the_rest(project: Path) -> None:
    extra = 13
    many = project / "many"
    many.mkdir()
    for n in range(FIND_MAX_RESULTS + extra):
        (many / f"f{n:04d}.log").write_text("")

    done = await use(toolbox_for(project), "find", name_glob="*.log")

    lines = done.content.splitlines()
    assert len(lines) == FIND_MAX_RESULTS + 1
    assert lines[0] == "many/f0000.log"
    assert lines[-1] == f"[{extra} more files not shown]"


async def test_a_symlink_back_to_the_root_does_not_make_walks_repeat_files(
    project: Path,
) -> None:
    (project / "again").symlink_to(project, target_is_directory=True)
    (project / "pkg" / "up").symlink_to("..", target_is_directory=True)
    box = toolbox_for(project)

    found = await use(box, "find", name_glob="*")
    grepped = await use(box, "grep", pattern="gamma")

    assert found.content.splitlines() == ["data/notes.txt", "pkg/__init__.py", "pkg/calc.py"]
    assert grepped.content == "data/notes.txt:3: gamma"


# --- list_dir ----------------------------------------------------------------------------


async def test_list_dir_shows_one_level_with_kind_and_size(project: Path) -> None:
    (project / "README.md").write_text("hello\n")
    box = toolbox_for(project)

    top = await use(box, "list_dir")
    pkg = await use(box, "list_dir", path="pkg")

    assert top.content.splitlines() == ["file  README.md  6 bytes", "dir   data/", "dir   pkg/"]
    assert pkg.content.splitlines() == [
        "file  __init__.py  0 bytes",
        "file  calc.py  32 bytes",
    ]


async def test_list_dir_shows_symlink_targets_inside_and_hides_those_outside(
    project: Path, outside: Path
) -> None:
    (project / "notes_link").symlink_to(project / "data" / "notes.txt")
    (project / "pkg_link").symlink_to("pkg", target_is_directory=True)

    done = await use(toolbox_for(project), "list_dir")

    assert done.content.splitlines() == [
        "dir   data/",
        "link  link_out -> (outside the workspace)",
        "link  notes_link -> data/notes.txt",
        "dir   pkg/",
        "link  pkg_link -> pkg",
        "link  secret_link.txt -> (outside the workspace)",
    ]
    assert str(outside) not in done.content


async def test_list_dir_of_a_file_or_an_empty_folder(project: Path) -> None:
    (project / "empty").mkdir()
    box = toolbox_for(project)

    of_file = await use(box, "list_dir", path="pkg/calc.py")
    of_empty = await use(box, "list_dir", path="empty")
    of_missing = await use(box, "list_dir", path="nowhere")

    assert of_file.is_error and "pkg/calc.py is not a folder" in of_file.content
    assert not of_empty.is_error and of_empty.content == "empty is empty"
    assert of_missing.is_error and "nowhere is not a folder" in of_missing.content


async def test_list_dir_still_lists_a_folder_that_holds_a_symlink_loop(project: Path) -> None:
    (project / "data" / "loop").symlink_to("loop")

    done = await use(toolbox_for(project), "list_dir", path="data")

    assert not done.is_error, done.content
    assert done.content.splitlines()[0].startswith("link  loop")
    assert "file  notes.txt  17 bytes" in done.content


# --- confinement -------------------------------------------------------------------------


def escape_for(kind: str, outside: Path, *, folder: bool) -> tuple[str, str]:
    """A path that tries to reach ``outside`` one way, and the refusal it must get."""
    paths = {
        "dotdot": ("../outside", "../outside/secret.txt", "contains '..'"),
        "backslash dotdot": ("..\\outside", "..\\outside\\secret.txt", "contains '..'"),
        "dotdot inside": ("pkg/../..", "pkg/../../outside/secret.txt", "contains '..'"),
        "absolute": (str(outside), str(outside / "secret.txt"), "is absolute"),
        "symlinked folder": ("link_out", "link_out/secret.txt", "resolves outside"),
        "symlinked file": ("link_out/.", "secret_link.txt", "resolves outside"),
    }
    as_folder, as_file, refusal = paths[kind]
    return (as_folder if folder else as_file), refusal


ESCAPES = [
    "dotdot",
    "backslash dotdot",
    "dotdot inside",
    "absolute",
    "symlinked folder",
    "symlinked file",
]


@pytest.mark.parametrize("kind", ESCAPES)
@pytest.mark.parametrize(
    ("tool", "extra"),
    [
        ("read_file", {}),
        ("read_file", {"offset": 1, "limit": 1}),
        ("write_file", {"content": "pwned\n"}),
        ("edit_file", {"search": "top", "replace": "no"}),
        ("list_dir", {}),
    ],
)
async def test_every_path_tool_refuses_a_path_that_leaves_the_root(
    project: Path, outside: Path, tmp_path: Path, kind: str, tool: str, extra: dict[str, Any]
) -> None:
    path, refusal = escape_for(kind, outside, folder=tool == "list_dir")
    before_outside = snapshot(outside)
    before_tmp = sorted(p.name for p in tmp_path.iterdir())

    done = await use(toolbox_for(project), tool, path=path, **extra)

    assert done.is_error
    assert refusal in done.content
    assert "top secret" not in done.content
    assert done.changed == ()
    assert snapshot(outside) == before_outside
    assert sorted(p.name for p in tmp_path.iterdir()) == before_tmp


async def test_a_symlink_pointing_outside_the_root_is_refused_and_nothing_outside_changes(
    project: Path, outside: Path
) -> None:
    before = snapshot(outside)
    box = toolbox_for(project)

    attempts = [
        await use(box, "write_file", path="link_out/new/planted.txt", content="x"),
        await use(box, "write_file", path="secret_link.txt", content="overwritten"),
        await use(box, "edit_file", path="secret_link.txt", search="top", replace="no"),
        await use(box, "list_dir", path="link_out"),
    ]

    assert all(a.is_error for a in attempts)
    assert all("resolves outside the workspace through a symlink" in a.content for a in attempts)
    assert snapshot(outside) == before
    assert (project / "secret_link.txt").is_symlink()


async def test_a_dangling_symlink_pointing_outside_cannot_create_a_file_there(
    project: Path, outside: Path
) -> None:
    (project / "trap.txt").symlink_to(outside / "planted.txt")

    done = await use(toolbox_for(project), "write_file", path="trap.txt", content="x")

    assert done.is_error
    assert "resolves outside" in done.content
    assert not (outside / "planted.txt").exists()


async def test_walks_never_follow_a_symlink_out_of_the_root(project: Path, outside: Path) -> None:
    box = toolbox_for(project)

    grepped = await use(box, "grep", pattern="secret")
    found = await use(box, "find", name_glob="*secret*")

    assert grepped.content == "no matches for 'secret'"
    assert found.content == "no files match '*secret*'"


async def test_a_symlink_inside_the_root_is_not_followed_and_its_target_is_named(
    project: Path,
) -> None:
    (project / "alias.txt").symlink_to("data/notes.txt")
    (project / "alias").symlink_to("pkg", target_is_directory=True)
    box = toolbox_for(project)

    read = await use(box, "read_file", path="alias.txt")
    written = await use(box, "write_file", path="alias.txt", content="through the link\n")
    through = await use(box, "read_file", path="alias/calc.py")

    assert read.is_error and "use the path 'data/notes.txt' instead" in read.content
    assert written.is_error and "alias.txt is a symlink to 'data/notes.txt'" in written.content
    assert through.is_error and "use the path 'pkg' instead" in through.content
    assert (project / "alias.txt").is_symlink()
    assert (project / "data" / "notes.txt").read_text() == "alpha\nbeta\ngamma\n"


@pytest.mark.parametrize(
    ("path", "refusal"),
    [
        ("pkg/../data/notes.txt", "contains '..'"),
        ("..", "contains '..'"),
        ("/etc/passwd", "is absolute"),
        ("\\etc\\passwd", "is absolute"),
        ("", "empty"),
        ("data/notes.txt\x00", "NUL"),
        ("bad\ud800.txt", "not a valid file name"),
        ("memory:notes", "kept for the agent's memory"),
    ],
)
def test_these_paths_are_refused_as_text_even_when_they_would_land_inside(
    project: Path, path: str, refusal: str
) -> None:
    with pytest.raises(PathRefused, match=refusal):
        Workspace(project).canonical(path)


def test_a_path_is_named_by_its_normal_spelling(project: Path) -> None:
    workspace = Workspace(project)

    assert workspace.canonical("./data//notes.txt") == "data/notes.txt"
    assert workspace.canonical("pkg\\calc.py") == "pkg/calc.py"
    assert workspace.canonical(".") == "."


@pytest.fixture
def linked_root(tmp_path: Path) -> Path:
    """A root whose links point inside, outside, upwards, and nowhere outside."""
    root = tmp_path / "root"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "calc.py").write_text("")
    away = tmp_path / "away"
    away.mkdir()
    (root / "in").symlink_to("pkg", target_is_directory=True)
    (root / "out").symlink_to(away, target_is_directory=True)
    (root / "up").symlink_to("..", target_is_directory=True)
    (root / "pkg" / "back").symlink_to("../..", target_is_directory=True)
    (root / "gone").symlink_to(away / "missing.txt")
    return root


SEGMENTS = st.sampled_from(
    ["pkg", "calc.py", "in", "out", "up", "back", "gone", "..", ".", "", "...", "~", "a b", "C:"]
)
PATHS = st.one_of(
    st.tuples(st.lists(SEGMENTS, min_size=1, max_size=6), st.sampled_from(["/", "\\"])).map(
        lambda parts_sep: parts_sep[1].join(parts_sep[0])
    ),
    st.text(max_size=40),
)


def _files_reached_without_links(root: Path) -> set[tuple[int, int]]:
    """The (device, inode) of every regular file under ``root`` reached through real folders."""
    found = set()
    for dirpath, _dirnames, filenames in os.walk(root, followlinks=False):
        for name in filenames:
            info = os.lstat(Path(dirpath) / name)
            if stat.S_ISREG(info.st_mode):
                found.add((info.st_dev, info.st_ino))
    return found


# The fixture's files are only read: opening never writes, so sharing them is safe.
@settings(
    max_examples=400,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(path=PATHS)
def test_a_path_opens_a_file_inside_the_root_reached_without_a_link_or_is_refused(
    linked_root: Path, path: str
) -> None:
    workspace = Workspace(linked_root)
    try:
        with workspace.open(path) as handle:
            opened = os.fstat(handle.fileno())
    except PathRefused:
        return
    assert (opened.st_dev, opened.st_ino) in _files_reached_without_links(linked_root)


def test_a_path_through_a_symlink_loop_is_refused(project: Path) -> None:
    (project / "loop").symlink_to("loop")

    with pytest.raises(PathRefused, match="symlink"):
        Workspace(project).read_bytes("loop/file.txt")


# --- dispatch ----------------------------------------------------------------------------


async def test_an_unknown_tool_is_an_error_listing_the_tools(box: RunTools) -> None:
    done = await use(box, "rm_rf", path=".")

    assert done.is_error
    assert done.content == (
        "unknown tool 'rm_rf'; the tools are: "
        "read_file, write_file, edit_file, grep, find, list_dir"
    )


@pytest.mark.parametrize("raw", ['{"path": "pkg/', "[1, 2]", '"data/notes.txt"', ""])
async def test_arguments_that_are_not_a_json_object_are_an_error(box: RunTools, raw: str) -> None:
    done = await dispatch(box, ToolCall(id="1", name="read_file", arguments=raw))

    assert done.is_error
    assert done.content == f"read_file: the arguments are not a JSON object: {raw!r}"


@pytest.mark.parametrize(
    ("tool", "arguments", "problem"),
    [
        ("read_file", {}, "path: Field required"),
        ("read_file", {"path": 7}, "path: Input should be a valid string"),
        ("read_file", {"path": "a", "offset": "first"}, "offset: Input should be a valid integer"),
        ("read_file", {"path": "a", "limit": 2.5}, "limit: Input should be a valid integer"),
        ("write_file", {"path": "a.txt"}, "content: Field required"),
        ("write_file", {"path": "a.txt", "content": None}, "content: Input should be a valid"),
        ("edit_file", {"path": "a", "search": "x"}, "replace: Field required"),
        ("grep", {}, "pattern: Field required"),
        ("grep", {"pattern": "a", "path_glob": ["*.py"]}, "path_glob: Input should be a valid"),
        ("find", {"glob": "*.py"}, "name_glob: Field required"),
        ("list_dir", {"path": ".", "recursive": True}, "recursive: Extra inputs are not permitted"),
        ("write_file", {"path": "a", "content": "", "mode": 1}, "mode: Extra inputs are not"),
    ],
)
async def test_a_missing_mistyped_or_unknown_field_is_an_error_naming_it(
    project: Path, tool: str, arguments: dict[str, Any], problem: str
) -> None:
    before = snapshot(project)

    done = await dispatch(toolbox_for(project), ToolCall(id="1", name=tool, arguments=arguments))

    assert done.is_error
    assert done.content.startswith(f"{tool}: invalid arguments: ")
    assert problem in done.content
    assert snapshot(project) == before


async def test_a_boolean_for_a_number_is_a_mistyped_field(box: RunTools) -> None:
    done = await use(box, "read_file", path="data/notes.txt", limit=True)

    assert done.is_error
    assert "limit" in done.content


class _NoArgs(Args):
    pass


class _Broken(HarnessTool[_NoArgs]):
    name = "broken"
    description = "Always fails."
    args = _NoArgs

    async def invoke(self, args: _NoArgs, context: ToolContext) -> ToolOutcome:
        raise RuntimeError("tool bug")


async def test_a_tool_that_crashes_comes_back_as_an_error_observation(project: Path) -> None:
    box = RunTools([*workspace_tools(Workspace(project)), _Broken()])

    done = await use(box, "broken")

    assert done.is_error
    assert done.content == "broken failed: RuntimeError: tool bug"


def test_two_tools_with_one_name_are_a_config_error(project: Path) -> None:
    workspace = Workspace(project)

    with pytest.raises(ConfigError, match="two tools are named 'read_file'"):
        RunTools([*workspace_tools(workspace), *workspace_tools(workspace)])


def test_the_workspace_tools_are_offered_with_their_arguments(box: RunTools) -> None:
    specs = {spec.name: spec.parameters for spec in box.specs}

    assert list(specs) == ["read_file", "write_file", "edit_file", "grep", "find", "list_dir"]
    assert {name: sorted(p["properties"]) for name, p in specs.items()} == {
        "read_file": ["limit", "offset", "path"],
        "write_file": ["content", "path"],
        "edit_file": ["path", "replace", "search"],
        "grep": ["path_glob", "pattern"],
        "find": ["name_glob"],
        "list_dir": ["path"],
    }
    assert specs["read_file"]["required"] == ["path"]
    assert sorted(specs["edit_file"]["required"]) == ["path", "replace", "search"]
    assert "required" not in specs["list_dir"]
    assert all(p.get("additionalProperties") is False for p in specs.values())


# --- single-file mode --------------------------------------------------------------------


def single_box(path: Path) -> RunTools:
    return RunTools(single_file_tools(path))


async def test_single_file_read_of_a_missing_file_says_it_does_not_exist_yet(
    tmp_path: Path,
) -> None:
    done = await use(single_box(tmp_path / "poem.txt"), "read_file")

    assert not done.is_error
    assert done.content == "poem.txt does not exist yet; create it with write_file"
    assert not (tmp_path / "poem.txt").exists()


async def test_single_file_write_then_read_round_trips_with_numbered_lines(
    tmp_path: Path,
) -> None:
    box = single_box(tmp_path / "poem.txt")

    created = await use(box, "write_file", content="roses\nviolets\n")
    same = await use(box, "write_file", content="roses\nviolets\n")
    read = await use(box, "read_file")
    emptied = await use(box, "write_file", content="")
    empty = await use(box, "read_file")

    assert created.content == "poem.txt created (14 bytes)"
    assert created.changed == ("poem.txt",)
    assert same.content == "poem.txt unchanged (14 bytes)"
    assert same.changed == ()
    assert read.content == "     1\troses\n     2\tviolets\n"
    assert emptied.content == "poem.txt changed (0 bytes)"
    assert empty.content == "poem.txt is empty"


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("read_file", {"path": "other.txt"}),
        ("write_file", {"path": "other.txt", "content": "x"}),
        ("write_file", {"path": "../escape.txt", "content": "x"}),
    ],
)
async def test_single_file_tools_take_no_path_so_no_other_file_is_touched(
    tmp_path: Path, tool: str, arguments: dict[str, Any]
) -> None:
    (tmp_path / "other.txt").write_text("leave me\n")
    before = snapshot(tmp_path.parent)

    done = await dispatch(
        single_box(tmp_path / "poem.txt"), ToolCall(id="1", name=tool, arguments=arguments)
    )

    assert done.is_error
    assert "path: Extra inputs are not permitted" in done.content
    assert snapshot(tmp_path.parent) == before


def test_single_file_tools_are_read_and_write_only(tmp_path: Path) -> None:
    box = single_box(tmp_path / "poem.txt")

    assert box.names == ("read_file", "write_file")
    assert sorted(box.specs[0].parameters["properties"]) == ["limit", "offset"]
    assert "required" not in box.specs[0].parameters
    assert sorted(box.specs[1].parameters["properties"]) == ["content"]


async def test_single_file_read_reads_a_large_file_in_parts(tmp_path: Path) -> None:
    target = tmp_path / "big.txt"
    target.write_text("".join(f"line {n}\n" for n in range(1, 60_001)))
    box = single_box(target)

    whole = await use(box, "read_file")
    part = await use(box, "read_file", offset=59_999, limit=5)

    assert whole.is_error and "read it in parts with offset and limit" in whole.content
    assert part.content == "[big.txt: lines 59999-60000 of 60000]\n" + (
        " 59999\tline 59999\n 60000\tline 60000\n"
    )


async def test_single_file_write_keeps_the_mode_of_the_file(tmp_path: Path) -> None:
    target = tmp_path / "tool.sh"
    target.write_text("echo old\n")
    target.chmod(0o700)

    await use(single_box(target), "write_file", content="echo new\n")

    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    assert target.read_text() == "echo new\n"


async def test_single_file_read_refuses_a_binary_file(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(PNG)

    done = await use(single_box(tmp_path / "a.png"), "read_file")

    assert done.is_error
    assert "a.png is a PNG image" in done.content


# --- through the whole loop --------------------------------------------------------------


def fix_contract(project: Path) -> TaskContract:
    return TaskContract.workspace(
        "make add() add", project, WorkspaceFileContains("pkg/calc.py", "a + b")
    )


FIX = call("edit_file", path="pkg/calc.py", search="a - b", replace="a + b")


async def observations_after(project: Path, attempts: list[ToolCall]) -> list[ToolResult]:
    """Run the loop: the attempts in one turn, then the real fix; return what the model saw."""
    provider = ScriptedProvider([reply(calls=attempts), reply(calls=[FIX])])

    result = await run(fix_contract(project), provider)

    assert result.outcome is RunOutcome.SUCCESS
    provider.assert_exhausted()
    seen = provider.requests[1].messages[-1].content
    assert all(isinstance(o, ToolResult) for o in seen)
    return list(seen)  # type: ignore[arg-type]


async def test_a_run_sees_dotdot_escapes_refused_and_nothing_outside_changes(
    project: Path, outside: Path
) -> None:
    before = snapshot(outside)

    seen = await observations_after(
        project,
        [
            call("read_file", path="../outside/secret.txt"),
            call("write_file", path="../outside/secret.txt", content="pwned\n"),
            call("write_file", path="../planted.txt", content="pwned\n"),
            call("edit_file", path="pkg/../../outside/secret.txt", search="top", replace="no"),
            call("list_dir", path=".."),
        ],
    )

    assert len(seen) == 5
    assert all(o.is_error and "contains '..'" in o.content for o in seen)
    assert all("top secret" not in o.content for o in seen)
    assert snapshot(outside) == before
    assert not (project.parent / "planted.txt").exists()


async def test_a_run_sees_absolute_paths_refused_and_nothing_outside_changes(
    project: Path, outside: Path
) -> None:
    before = snapshot(outside)
    secret = str(outside / "secret.txt")

    seen = await observations_after(
        project,
        [
            call("read_file", path=secret),
            call("write_file", path=secret, content="pwned\n"),
            call("write_file", path=str(outside / "planted.txt"), content="pwned\n"),
            call("edit_file", path=secret, search="top", replace="no"),
            call("list_dir", path=str(outside)),
        ],
    )

    assert len(seen) == 5
    assert all(o.is_error and "is absolute" in o.content for o in seen)
    assert all("top secret" not in o.content for o in seen)
    assert snapshot(outside) == before


async def test_a_run_sees_symlink_escapes_refused_and_nothing_outside_changes(
    project: Path, outside: Path
) -> None:
    before = snapshot(outside)

    seen = await observations_after(
        project,
        [
            call("read_file", path="secret_link.txt"),
            call("read_file", path="link_out/secret.txt", offset=1, limit=1),
            call("write_file", path="secret_link.txt", content="pwned\n"),
            call("write_file", path="link_out/planted/file.txt", content="pwned\n"),
            call("edit_file", path="link_out/secret.txt", search="top", replace="no"),
            call("list_dir", path="link_out"),
        ],
    )

    assert len(seen) == 6
    assert all(o.is_error and "resolves outside the workspace" in o.content for o in seen)
    assert all("top secret" not in o.content for o in seen)
    assert snapshot(outside) == before


async def test_a_run_cannot_find_or_grep_files_behind_a_symlink_out(
    project: Path, outside: Path
) -> None:
    seen = await observations_after(
        project,
        [call("grep", pattern="secret"), call("find", name_glob="*secret*"), call("list_dir")],
    )

    grepped, found, listed = (o.content for o in seen)
    assert grepped == "no matches for 'secret'"
    assert found == "no files match '*secret*'"
    assert "link  link_out -> (outside the workspace)" in listed
    assert str(outside) not in listed


@pytest.mark.parametrize("tool", ["read_file", "write_file", "edit_file"])
async def test_a_named_pipe_is_refused_instead_of_blocking_the_run(
    project: Path, box: RunTools, tool: str
) -> None:
    os.mkfifo(project / "pipe")
    arguments: dict[str, Any] = {"path": "pipe"}
    if tool == "write_file":
        arguments["content"] = "x"
    elif tool == "edit_file":
        arguments.update(search="a", replace="b")

    result = await use(box, tool, **arguments)

    assert result.is_error
    assert "not a regular file" in result.content


async def test_an_edit_whose_replacement_equals_the_search_changes_nothing(
    project: Path, box: RunTools
) -> None:
    result = await use(box, "edit_file", path="pkg/calc.py", search="a - b", replace="a - b")

    assert not result.is_error
    assert result.changed == ()
    assert "unchanged" in result.content


async def test_a_new_file_gets_the_process_default_mode(box: RunTools, project: Path) -> None:
    await use(box, "write_file", path="fresh.txt", content="x")

    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((project / "fresh.txt").stat().st_mode) == 0o666 & ~umask


# --- the gate -----------------------------------------------------------------------------


class _StampArgs(Args):
    label: str


class _Stamp(HarnessTool[_StampArgs]):
    """A registered tool that is not a built-in file tool."""

    name = "stamp"
    description = "Record a label."
    args = _StampArgs

    def __init__(self) -> None:
        self.labels: list[str] = []

    async def invoke(self, args: _StampArgs, context: ToolContext) -> ToolOutcome:
        self.labels.append(args.label)
        return ToolOutcome(f"stamped {args.label}")


async def test_a_tool_that_is_not_a_file_tool_is_checked_as_an_exec_of_its_name() -> None:
    stamp = _Stamp()
    box = RunTools([stamp])
    stamped = ToolCall(id="1", name="stamp", arguments={"label": "a"})

    refused = await box.dispatch(
        stamped, gate=Gate(Policy.guarded().layer("app").deny_exec("stamp"))
    )
    deferred = await box.dispatch(stamped, gate=Gate(Policy.guarded()))
    allowed = await box.dispatch(
        stamped, gate=Gate(Policy.guarded().layer("app").allow_exec("stamp"))
    )

    assert isinstance(refused, ToolOutcome) and refused.is_error
    assert "exec stamp: deny (rule 'deny exec stamp' in layer 'app')" in refused.content
    assert isinstance(deferred, Deferral) and deferred.request.act is Act.EXEC
    assert deferred.request.target == "stamp" and deferred.request.arguments == {"label": "a"}
    assert isinstance(allowed, ToolOutcome) and allowed.content == "stamped a"
    assert not allowed.is_error and allowed.duration is not None
    assert stamp.labels == ["a"]


async def test_invalid_arguments_are_answered_before_the_gate_is_asked(project: Path) -> None:
    gate = Gate(Policy.guarded())
    done = await toolbox_for(project).dispatch(
        ToolCall(id="1", name="write_file", arguments={"path": "x"}), gate=gate
    )

    assert isinstance(done, ToolOutcome) and "invalid arguments" in done.content
    assert gate.scope.rows == []


async def test_names_that_would_make_a_listing_ambiguous_are_quoted(project: Path) -> None:
    (project / "evil\nname.txt").write_text("needle\n")
    (project / "x.py:99: injected").write_text("needle\n")
    box = toolbox_for(project)

    found = await use(box, "find", name_glob="*")
    listed = await use(box, "list_dir", path=".")
    grepped = await use(box, "grep", pattern="needle")

    assert '"evil\\nname.txt"' in found.content.splitlines()
    assert '"x.py:99: injected"' in found.content.splitlines()
    assert 'file  "evil\\nname.txt"  7 bytes' in listed.content.splitlines()
    assert sorted(grepped.content.splitlines()) == [
        '"evil\\nname.txt":1: needle',
        '"x.py:99: injected":1: needle',
    ]


async def test_a_catastrophic_pattern_is_cut_off_and_does_not_stall_the_loop(
    project: Path,
) -> None:
    (project / "bad.txt").write_text("a" * 60 + "b\n")
    box = RunTools(workspace_tools(Workspace(project), wall_end=time.time() + 1.0))
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticking = asyncio.create_task(tick())
    try:
        done = await use(box, "grep", pattern="(a|aa)+$")
    finally:
        ticking.cancel()

    assert done.is_error and "the search was stopped" in done.content
    assert ticks > 10, "the event loop did not run while the pattern was matched"
