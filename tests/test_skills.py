"""Skills from the user's side: discovery, the catalogue, and ``read_skill`` through the gate.

Every test works on real files under ``tmp_path``. The ``skills`` fixture is
a skills directory at ``tmp_path/skills``, outside the workspace
(``project``); ``outside`` is a folder no skill may reach.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from io_harness import ConfigError, Policy, ToolCall
from io_harness.policy._gate import Gate
from io_harness.tools import RunTools, ToolOutcome
from io_harness.tools._gated import Deferral
from io_harness.tools._read_skill import ReadSkillTool
from io_harness.tools._skills import (
    DESCRIPTION_CHARS,
    MAX_SKILLS,
    SHIPPED_FILES_SHOWN,
    Skill,
    discover_skills,
    skills_catalogue,
)
from io_harness.tools._text import READ_CEILING_BYTES

PDF_SKILL = """---
name: pdf-tools
description: Fill and merge PDF forms.
license: MIT
---
# PDF tools

Use scripts/fill.py to fill a form.
"""

SECRET = "top secret\n"


# --- helpers -----------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def skills(tmp_path: Path) -> Path:
    """A skills directory with a folder skill (shipping two files) and a flat one."""
    folder = tmp_path / "skills"
    write(folder / "pdf" / "SKILL.md", PDF_SKILL)
    write(folder / "pdf" / "references" / "api.md", "# API\n\nfill(form, values)\n")
    write(folder / "pdf" / "scripts" / "fill.py", "print('filled')\n")
    write(
        folder / "commit-style.md", "# Commit style\n\nWrite commit subjects in the imperative.\n"
    )
    return folder.resolve()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    write(folder / "secret.txt", SECRET)
    return folder.resolve()


def box_for(skills_dir: Path, root: Path) -> RunTools:
    return RunTools([ReadSkillTool(discover_skills([skills_dir]), root)])


def gate(policy: Policy | None = None) -> Gate:
    return Gate(policy or Policy.permissive(), None, goal="g", run_id="r")


async def read_skill(
    box: RunTools, /, checked_by: Gate | None = None, **arguments: Any
) -> ToolOutcome:
    done = await box.dispatch(
        ToolCall(id="1", name="read_skill", arguments=arguments), gate=checked_by or gate()
    )
    assert not isinstance(done, Deferral)
    return done


def only(folder: Path) -> Skill:
    (skill,) = discover_skills([folder])
    return skill


# --- discovery: layouts and fields -------------------------------------------------------


def test_a_flat_file_and_a_folder_with_skill_md_are_both_discovered(skills: Path) -> None:
    found = discover_skills([skills])

    assert found == (
        Skill(
            name="commit-style",
            description="Write commit subjects in the imperative.",
            path=skills / "commit-style.md",
            folder=None,
        ),
        Skill(
            name="pdf-tools",
            description="Fill and merge PDF forms.",
            path=skills / "pdf" / "SKILL.md",
            folder=skills / "pdf",
        ),
    )


def test_the_frontmatter_name_and_description_win_over_the_file_name_and_body(
    tmp_path: Path,
) -> None:
    write(
        tmp_path / "s" / "notes.md", "---\nname: release\ndescription: Cut a release.\n---\nBody.\n"
    )

    skill = only(tmp_path / "s")

    assert (skill.name, skill.description) == ("release", "Cut a release.")


def test_without_frontmatter_the_name_is_the_stem_and_the_description_the_first_prose_line(
    tmp_path: Path,
) -> None:
    write(
        tmp_path / "s" / "triage.md",
        "\n# Triage\n\n## How\n\n  Label new issues by area.  \nMore.\n",
    )

    skill = only(tmp_path / "s")

    assert (skill.name, skill.description) == ("triage", "Label new issues by area.")


def test_a_folder_skill_without_a_name_is_named_after_its_folder(tmp_path: Path) -> None:
    write(tmp_path / "s" / "db-migrate" / "SKILL.md", "Migrate the database schema.\n")

    skill = only(tmp_path / "s")

    assert (skill.name, skill.description) == ("db-migrate", "Migrate the database schema.")


def test_frontmatter_without_a_description_falls_back_to_the_first_prose_line_after_it(
    tmp_path: Path,
) -> None:
    write(tmp_path / "s" / "x.md", "---\nname: lint\n---\n# Lint\n\nRun the linters first.\n")

    assert only(tmp_path / "s").description == "Run the linters first."


def test_a_multi_line_description_is_kept_whole_as_one_line(tmp_path: Path) -> None:
    write(
        tmp_path / "s" / "x.md",
        "---\ndescription: >\n  Reads logs\n  and   finds errors.\n---\nBody.\n",
    )

    assert only(tmp_path / "s").description == "Reads logs and finds errors."


def test_a_skill_with_no_prose_at_all_has_an_empty_description(tmp_path: Path) -> None:
    write(tmp_path / "s" / "empty.md", "---\nname: empty\n---\n# Only a heading\n")

    skill = only(tmp_path / "s")

    assert skill.description == ""
    assert skills_catalogue([skill]).endswith("- empty: (no description)")


def test_an_empty_frontmatter_is_no_fields(tmp_path: Path) -> None:
    write(tmp_path / "s" / "plain.md", "---\n---\nJust prose.\n")

    skill = only(tmp_path / "s")

    assert (skill.name, skill.description) == ("plain", "Just prose.")


def test_windows_line_endings_and_a_byte_order_mark_are_read(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "x.md").write_bytes(
        "\ufeff---\r\nname: crlf\r\ndescription: Works.\r\n---\r\nBody.\r\n".encode()
    )

    skill = only(tmp_path / "s")

    assert (skill.name, skill.description) == ("crlf", "Works.")


def test_other_files_hidden_entries_and_folders_without_skill_md_are_ignored(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "s"
    write(folder / "real.md", "A real skill.\n")
    write(folder / "notes.txt", "not markdown\n")
    write(folder / ".hidden.md", "Hidden.\n")
    write(folder / ".draft" / "SKILL.md", "A hidden folder skill.\n")
    write(folder / "assets" / "README.md", "Not a skill folder.\n")
    write(folder / "lower" / "skill.md", "Not SKILL.md.\n")

    assert [s.name for s in discover_skills([folder])] == ["real"]


def test_skills_from_several_folders_are_sorted_by_name(tmp_path: Path) -> None:
    write(tmp_path / "a" / "zeta.md", "Z.\n")
    write(tmp_path / "b" / "alpha" / "SKILL.md", "A.\n")
    write(tmp_path / "b" / "mid.md", "M.\n")

    found = discover_skills([tmp_path / "a", tmp_path / "b"])

    assert [s.name for s in found] == ["alpha", "mid", "zeta"]


def test_a_folder_given_twice_is_read_once(skills: Path) -> None:
    assert discover_skills([skills, skills / "." / "pdf" / ".."]) == discover_skills([skills])


def test_no_folders_and_an_empty_folder_give_no_skills(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()

    assert discover_skills([]) == ()
    assert discover_skills([tmp_path / "empty"]) == ()


def test_exactly_the_maximum_number_of_skills_is_accepted(tmp_path: Path) -> None:
    for n in range(MAX_SKILLS):
        write(tmp_path / "s" / f"skill-{n:02}.md", f"Skill {n}.\n")

    assert len(discover_skills([tmp_path / "s"])) == MAX_SKILLS


@pytest.mark.parametrize("name", ["a", "x1-y2", "a" * 64, "0-9"])
def test_names_of_the_agent_skills_form_are_accepted(tmp_path: Path, name: str) -> None:
    write(tmp_path / "s" / "x.md", f"---\nname: '{name}'\n---\nBody.\n")

    assert only(tmp_path / "s").name == name


# --- the catalogue -----------------------------------------------------------------------


def test_the_catalogue_names_read_skill_and_lists_names_and_descriptions_never_bodies(
    skills: Path,
) -> None:
    catalogue = skills_catalogue(discover_skills([skills]))

    head, *lines = catalogue.split("\n")
    assert "read_skill" in head
    assert lines == [
        "- commit-style: Write commit subjects in the imperative.",
        "- pdf-tools: Fill and merge PDF forms.",
    ]
    assert "scripts/fill.py" not in catalogue


def test_a_description_at_the_cap_is_shown_whole(tmp_path: Path) -> None:
    text = "d" * DESCRIPTION_CHARS
    write(tmp_path / "s" / "x.md", f"---\ndescription: {text}\n---\n")

    assert skills_catalogue(discover_skills([tmp_path / "s"])).endswith(f"- x: {text}")


def test_a_description_over_the_cap_is_cut_with_a_visible_marker(tmp_path: Path) -> None:
    write(tmp_path / "s" / "x.md", f"---\ndescription: {'d' * 1000}\n---\n")
    skill = only(tmp_path / "s")

    line = skills_catalogue([skill]).split("\n")[-1]

    shown = line.removeprefix("- x: ")
    assert len(shown) == DESCRIPTION_CHARS
    assert shown == "d" * (DESCRIPTION_CHARS - 1) + "…"
    assert skill.description == "d" * 1000


def test_no_skills_make_an_empty_catalogue() -> None:
    assert skills_catalogue([]) == ""


# --- configuration errors ----------------------------------------------------------------


def test_a_missing_skills_directory_is_a_config_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist") as raised:
        discover_skills([tmp_path / "nowhere"])

    assert str(tmp_path / "nowhere") in str(raised.value)


def test_a_skills_path_that_is_a_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    file = write(tmp_path / "skills.md", "A file.\n")

    with pytest.raises(ConfigError, match="is not a directory") as raised:
        discover_skills([file])

    assert str(file) in str(raised.value)


def test_one_skill_more_than_the_maximum_is_a_config_error_not_a_truncation(
    tmp_path: Path,
) -> None:
    for n in range(MAX_SKILLS + 1):
        write(tmp_path / "s" / f"skill-{n:02}.md", f"Skill {n}.\n")

    with pytest.raises(ConfigError, match=f"hold {MAX_SKILLS + 1} skills; a run takes at most"):
        discover_skills([tmp_path / "s"])


def test_the_maximum_counts_the_skills_of_every_folder_together(tmp_path: Path) -> None:
    for n in range(MAX_SKILLS):
        write(tmp_path / "a" / f"a-{n:02}.md", "A.\n")
    write(tmp_path / "b" / "one-more.md", "B.\n")

    with pytest.raises(ConfigError, match="at most 64"):
        discover_skills([tmp_path / "a", tmp_path / "b"])


def test_a_flat_file_and_a_folder_of_one_name_are_a_config_error_naming_both(
    tmp_path: Path,
) -> None:
    flat = write(tmp_path / "s" / "deploy.md", "Flat.\n")
    folder = write(tmp_path / "s" / "deploy" / "SKILL.md", "Folder.\n")

    with pytest.raises(ConfigError, match="two skills are named 'deploy'") as raised:
        discover_skills([tmp_path / "s"])

    assert str(flat) in str(raised.value)
    assert str(folder) in str(raised.value)


def test_a_frontmatter_name_taken_by_another_skill_is_a_config_error(tmp_path: Path) -> None:
    write(tmp_path / "s" / "a.md", "---\nname: b\n---\n")
    write(tmp_path / "s" / "b.md", "B.\n")

    with pytest.raises(ConfigError, match="two skills are named 'b'"):
        discover_skills([tmp_path / "s"])


def test_one_name_in_two_folders_is_a_config_error_naming_both_files(tmp_path: Path) -> None:
    first = write(tmp_path / "a" / "review.md", "A.\n")
    second = write(tmp_path / "b" / "review" / "SKILL.md", "B.\n")

    with pytest.raises(ConfigError, match="two skills are named 'review'") as raised:
        discover_skills([tmp_path / "a", tmp_path / "b"])

    assert str(first) in str(raised.value)
    assert str(second) in str(raised.value)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("---\nname: [unclosed\n---\n", r"not valid YAML: .*\(line 2 of the file\)"),
        ("---\ndescription: a: b\n---\n", "not valid YAML"),
        ("---\nname: x\n", "never closed"),
        ("---\n- name\n- description\n---\n", "frontmatter is a list, not a mapping"),
        ("---\njust a string\n---\n", "frontmatter is a str, not a mapping"),
        ("---\nname: 42\n---\n", "name is an int, not a string"),
        ("---\nname:\n---\n", "name is empty, not a string"),
        ("---\ndescription: [a, b]\n---\n", "description is a list, not a string"),
    ],
)
def test_malformed_frontmatter_is_a_config_error_naming_the_file(
    tmp_path: Path, text: str, problem: str
) -> None:
    file = write(tmp_path / "s" / "bad.md", text)

    with pytest.raises(ConfigError, match=problem) as raised:
        discover_skills([tmp_path / "s"])

    assert str(file) in str(raised.value)


@pytest.mark.parametrize("name", ["Deploy", "-x", "x-", "a--b", "a_b", "a b", "", "a" * 65, "é"])
def test_a_name_outside_the_agent_skills_form_is_a_config_error(tmp_path: Path, name: str) -> None:
    file = write(tmp_path / "s" / "x.md", f"---\nname: '{name}'\n---\n")

    with pytest.raises(ConfigError, match="is not a skill name") as raised:
        discover_skills([tmp_path / "s"])

    assert str(file) in str(raised.value)


def test_a_file_name_that_cannot_be_a_skill_name_asks_for_a_rename_or_a_name(
    tmp_path: Path,
) -> None:
    write(tmp_path / "s" / "README.md", "About these skills.\n")

    with pytest.raises(ConfigError, match=r"named after its file.*'README' is not a skill name"):
        discover_skills([tmp_path / "s"])


def test_a_skill_file_that_is_not_utf8_is_a_config_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    file = tmp_path / "s" / "latin.md"
    file.write_bytes("Caf\u00e9 rules.\n".encode("latin-1"))

    with pytest.raises(ConfigError, match="not UTF-8") as raised:
        discover_skills([tmp_path / "s"])

    assert str(file) in str(raised.value)


def test_a_skill_file_over_the_read_ceiling_is_a_config_error(tmp_path: Path) -> None:
    write(tmp_path / "s" / "huge.md", "x" * (READ_CEILING_BYTES + 1))

    with pytest.raises(ConfigError, match="over the read ceiling"):
        discover_skills([tmp_path / "s"])


@pytest.mark.parametrize("target", ["missing.md", "real.md", "folder"])
def test_a_symlink_in_a_skills_directory_is_a_config_error_and_never_followed(
    tmp_path: Path, target: str
) -> None:
    (tmp_path / "real.md").write_text("---\ndescription: hunter2\n---\n")
    (tmp_path / "folder").mkdir()
    write(tmp_path / "folder" / "SKILL.md", "---\ndescription: hunter2\n---\n")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "alias.md").symlink_to(tmp_path / target)

    with pytest.raises(ConfigError, match="is a symlink") as raised:
        discover_skills([tmp_path / "s"])
    assert "hunter2" not in str(raised.value)


def test_a_skill_folder_whose_skill_file_is_a_symlink_is_a_config_error(tmp_path: Path) -> None:
    write(tmp_path / "secret.md", "---\ndescription: hunter2\n---\n")
    (tmp_path / "s" / "x").mkdir(parents=True)
    (tmp_path / "s" / "x" / "SKILL.md").symlink_to(tmp_path / "secret.md")

    with pytest.raises(ConfigError, match="is a symlink"):
        discover_skills([tmp_path / "s"])


def test_pointing_at_a_skills_own_folder_is_a_config_error_that_says_so(skills: Path) -> None:
    with pytest.raises(ConfigError, match=r"SKILL\.md directly in a skills directory"):
        discover_skills([skills / "pdf"])


# --- read_skill ---------------------------------------------------------------------------


async def test_read_skill_reads_a_flat_skill_whole(skills: Path, project: Path) -> None:
    done = await read_skill(box_for(skills, project), name="commit-style")

    assert not done.is_error
    assert done.content == (
        f"[the instructions of skill 'commit-style': {skills / 'commit-style.md'}]\n"
        "# Commit style\n\nWrite commit subjects in the imperative.\n"
    )


async def test_read_skill_reads_a_folder_skill_and_lists_the_files_it_ships(
    skills: Path, project: Path
) -> None:
    done = await read_skill(box_for(skills, project), name="pdf-tools")

    assert not done.is_error
    assert done.content == (
        f"[the instructions of skill 'pdf-tools': {skills / 'pdf' / 'SKILL.md'}]\n"
        f"{PDF_SKILL}\n"
        """[files skill 'pdf-tools' ships; read one with read_skill """
        """{"name": "pdf-tools", "file": "<path>"}]\n"""
        "references/api.md\n"
        "scripts/fill.py"
    )


async def test_a_folder_skill_that_ships_nothing_says_so(tmp_path: Path, project: Path) -> None:
    write(tmp_path / "s" / "solo" / "SKILL.md", "Alone.")

    done = await read_skill(box_for(tmp_path / "s", project), name="solo")

    assert done.content.endswith("Alone.\n\n[skill 'solo' ships no other files]")


async def test_an_empty_skill_file_is_read_as_empty(tmp_path: Path, project: Path) -> None:
    write(tmp_path / "s" / "blank.md", "")

    done = await read_skill(box_for(tmp_path / "s", project), name="blank")

    assert not done.is_error
    assert done.content.endswith("\n(the file is empty)")


async def test_read_skill_reads_a_file_the_skill_ships(skills: Path, project: Path) -> None:
    done = await read_skill(box_for(skills, project), name="pdf-tools", file="references/api.md")

    assert not done.is_error
    assert done.content.endswith("# API\n\nfill(form, values)\n")
    assert "references/api.md of skill 'pdf-tools'" in done.content


async def test_the_list_of_shipped_files_is_capped_and_counts_the_rest(
    tmp_path: Path, project: Path
) -> None:
    folder = tmp_path / "s"
    write(folder / "big" / "SKILL.md", "Many files.\n")
    for n in range(SHIPPED_FILES_SHOWN + 5):
        write(folder / "big" / "refs" / f"{n:03}.md", "x\n")

    done = await read_skill(box_for(folder, project), name="big")

    assert "refs/000.md" in done.content
    assert f"refs/{SHIPPED_FILES_SHOWN:03}.md" not in done.content
    assert done.content.endswith("[5 more files not shown]")


async def test_an_unknown_skill_is_an_observation_listing_the_skills(
    skills: Path, project: Path
) -> None:
    done = await read_skill(box_for(skills, project), name="nope")

    assert done.is_error
    assert done.content == (
        "read_skill: no skill is named 'nope'; the skills are: commit-style, pdf-tools"
    )


async def test_a_file_of_a_flat_skill_is_refused_saying_it_ships_nothing(
    skills: Path, project: Path
) -> None:
    done = await read_skill(box_for(skills, project), name="commit-style", file="x.md")

    assert done.is_error
    assert "is a single file (commit-style.md) and ships no other files" in done.content


@pytest.mark.parametrize(
    ("file", "problem"),
    [
        ("../commit-style.md", "contains '..'"),
        ("references/../../commit-style.md", "contains '..'"),
        ("/etc/passwd", "is absolute"),
        ("", "is empty"),
    ],
)
async def test_a_file_that_leaves_the_skills_folder_is_refused(
    skills: Path, project: Path, file: str, problem: str
) -> None:
    done = await read_skill(box_for(skills, project), name="pdf-tools", file=file)

    assert done.is_error
    assert problem in done.content
    assert "commit subjects" not in done.content


async def test_a_symlink_out_of_the_skills_folder_is_refused_and_nothing_is_read(
    skills: Path, project: Path, outside: Path
) -> None:
    (skills / "pdf" / "leak.txt").symlink_to(outside / "secret.txt")
    (skills / "pdf" / "leak_dir").symlink_to(outside, target_is_directory=True)
    box = box_for(skills, project)

    for file in ("leak.txt", "leak_dir/secret.txt"):
        done = await read_skill(box, name="pdf-tools", file=file)
        assert done.is_error
        assert "resolves outside its folder through a symlink" in done.content
        assert SECRET.strip() not in done.content
    listed = await read_skill(box, name="pdf-tools")
    assert "leak" not in listed.content


async def test_a_symlink_within_the_skills_folder_is_not_followed_and_names_its_target(
    skills: Path, project: Path
) -> None:
    (skills / "pdf" / "api.md").symlink_to("references/api.md")

    done = await read_skill(box_for(skills, project), name="pdf-tools", file="api.md")

    assert done.is_error
    assert "use the path 'pdf/references/api.md' instead" in done.content


async def test_a_missing_shipped_file_or_a_folder_is_an_error_listing_the_files(
    skills: Path, project: Path
) -> None:
    box = box_for(skills, project)

    missing = await read_skill(box, name="pdf-tools", file="references/nope.md")
    folder = await read_skill(box, name="pdf-tools", file="references")

    assert missing.is_error
    assert "references/nope.md of skill 'pdf-tools' does not exist" in missing.content
    assert folder.is_error
    assert "references of skill 'pdf-tools' is a folder" in folder.content
    for done in (missing, folder):
        assert "references/api.md, scripts/fill.py" in done.content


async def test_binary_and_oversized_shipped_files_are_refused_never_cut(
    skills: Path, project: Path
) -> None:
    (skills / "pdf" / "form.pdf").write_bytes(b"%PDF-1.7\n" + b"\x00" * 16)
    write(skills / "pdf" / "big.md", "x" * (READ_CEILING_BYTES + 1))
    box = box_for(skills, project)

    binary = await read_skill(box, name="pdf-tools", file="form.pdf")
    big = await read_skill(box, name="pdf-tools", file="big.md")

    assert binary.is_error
    assert "is a PDF document" in binary.content
    assert big.is_error
    assert f"over the read ceiling of {READ_CEILING_BYTES} bytes" in big.content


async def test_a_deny_read_glob_on_the_skills_directory_refuses_read_skill_naming_the_rule(
    skills: Path, project: Path
) -> None:
    policy = Policy.permissive().layer("app").deny_read(f"{skills}/*")
    checked = gate(policy)
    box = box_for(skills, project)

    seed = await read_skill(box, checked, name="pdf-tools")
    shipped = await read_skill(box, checked, name="pdf-tools", file="references/api.md")

    for done in (seed, shipped):
        assert done.is_error
        assert "refused by the policy" in done.content
        assert f"rule 'deny read {skills}/*' in layer 'app'" in done.content
        assert "Fill and merge" not in done.content
        assert "fill(form" not in done.content
    assert [(row.target, row.decision) for row in checked.scope.rows] == [
        (str(skills / "pdf" / "SKILL.md"), "refused"),
        (str(skills / "pdf" / "references" / "api.md"), "refused"),
    ]


async def test_a_skill_under_the_workspace_is_checked_by_its_relative_path(
    project: Path,
) -> None:
    write(project / "skills" / "local.md", "A local skill.\n")
    box = box_for(project / "skills", project)

    allowed = await read_skill(box, name="local")
    refused = await read_skill(
        box, gate(Policy.permissive().layer("app").deny_read("skills/*")), name="local"
    )

    assert allowed.content.startswith("[the instructions of skill 'local': skills/local.md]")
    assert refused.is_error
    assert "read skills/local.md: deny" in refused.content


async def test_the_policy_check_sees_where_a_skill_outside_the_workspace_is(
    tmp_path: Path, project: Path, outside: Path
) -> None:
    write(outside / "s" / "alias.md", "Really outside.\n")
    policy = Policy.permissive().layer("app").deny_read(f"{outside}/*")

    done = await read_skill(box_for(outside / "s", project), gate(policy), name="alias")

    assert done.is_error
    assert f"read {outside / 's' / 'alias.md'}: deny" in done.content


async def test_read_skill_without_a_gate_reads_the_same(skills: Path, project: Path) -> None:
    box = box_for(skills, project)

    done = await box.dispatch(ToolCall(id="1", name="read_skill", arguments={"name": "nope"}))
    seed = await box.dispatch(ToolCall(id="2", name="read_skill", arguments={"name": "pdf-tools"}))

    assert isinstance(done, ToolOutcome)
    assert done.is_error
    assert "the skills are: commit-style, pdf-tools" in done.content
    assert isinstance(seed, ToolOutcome)
    assert PDF_SKILL in seed.content


def test_read_skill_is_offered_with_a_name_and_an_optional_file(
    skills: Path, project: Path
) -> None:
    spec = box_for(skills, project).specs[0]

    assert spec.name == "read_skill"
    assert spec.parameters["required"] == ["name"]
    assert set(spec.parameters["properties"]) == {"name", "file"}
    assert all(p["description"] for p in spec.parameters["properties"].values())
