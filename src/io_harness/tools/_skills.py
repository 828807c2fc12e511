"""Skills: markdown instructions an agent reads when it needs them, and the tool that reads them.

A skills directory holds skills in two layouts: ``<dir>/<name>.md`` (a flat
skill, one file) and ``<dir>/<name>/SKILL.md`` (a folder skill, which may ship
more files beside its ``SKILL.md``). The system prompt carries each skill's
name and description only (:func:`skills_catalogue`); ``read_skill`` reads a
skill's file when the model asks, as an ordinary policy-checked read.

Every problem with the set (a missing directory, malformed frontmatter, two
skills with one name, too many skills) is a :class:`ConfigError` raised at
discovery, before the run starts: a set is taken whole or rejected.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from io_harness.errors import ConfigError
from io_harness.policy._gate import Access
from io_harness.policy._rules import Act
from io_harness.tools._base import Args, HarnessTool, ToolFailure, ToolOutcome
from io_harness.tools._text import READ_CEILING_BYTES, read_text
from io_harness.tools._workspace import PathRefused, Workspace

__all__ = [
    "DESCRIPTION_CHARS",
    "MAX_SKILLS",
    "SHIPPED_FILES_SHOWN",
    "SKILL_FILE",
    "ReadSkillTool",
    "Skill",
    "discover_skills",
    "shown_description",
    "skill_name_problem",
    "skills_catalogue",
]

MAX_SKILLS = 64
"""The most skills one run takes, over all its skills directories; more is a ConfigError."""

DESCRIPTION_CHARS = 240
"""The most characters of a description the catalogue shows; a longer one is cut with ``…``."""

SHIPPED_FILES_SHOWN = 100
"""The most shipped files ``read_skill`` lists after a folder skill's instructions."""

SKILL_FILE = "SKILL.md"
"""The instructions file of a folder skill."""

_SKILL_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_SKILL_NAME_MAX = 64


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill: its name, its description, and where its instructions are.

    ``path`` is the real location of the instructions file (symlinks
    followed). ``folder`` is the skill's own folder for the
    ``<name>/SKILL.md`` layout, whose other files ``read_skill`` can read;
    it is ``None`` for a flat ``<name>.md`` skill, which ships nothing.
    ``description`` is whole, its runs of whitespace made single spaces; the
    catalogue cuts it (:func:`shown_description`).
    """

    name: str
    description: str
    path: Path
    folder: Path | None = None


def skill_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a skill, or ``None`` when it can.

    The Agent Skills convention: 1-64 of ``a-z``, ``0-9`` and ``-``, neither
    starting nor ending with ``-``, with no ``--``.
    """
    if len(name) > _SKILL_NAME_MAX or not _SKILL_NAME.fullmatch(name):
        return (
            f"{name!r} is not a skill name: 1-{_SKILL_NAME_MAX} of a-z, 0-9 and '-', "
            "not starting or ending with '-', with no '--'"
        )
    return None


def discover_skills(folders: Sequence[Path]) -> tuple[Skill, ...]:
    """Every skill in every folder of ``folders``, sorted by name.

    In each folder, a file ``<name>.md`` is a flat skill and a subfolder
    holding ``SKILL.md`` is a folder skill; every other entry (other files,
    subfolders without ``SKILL.md``, names beginning with ``.``) is ignored.
    A folder given twice (the same real location) is read once.

    Raises :class:`ConfigError`, naming the file or folder, for: a folder
    that is missing or not a directory, a ``SKILL.md`` directly in it (it
    names a skill's own folder, not a skills directory), a skill file that is
    not UTF-8 text or over the read ceiling, malformed frontmatter, an
    invalid name, more than :data:`MAX_SKILLS` skills, and two skills with
    one name — in one folder (``x.md`` beside ``x/SKILL.md`` is that case) or
    across two.
    """
    loaded: list[tuple[Skill, Path]] = []
    seen: set[Path] = set()
    for folder in folders:
        real = _skills_folder(folder)
        if real in seen:
            continue
        seen.add(real)
        loaded.extend((_load(path, own), path) for path, own in _candidates(folder))
    if len(loaded) > MAX_SKILLS:
        where = ", ".join(str(f) for f in folders)
        raise ConfigError(
            f"the skills directories ({where}) hold {len(loaded)} skills; "
            f"a run takes at most {MAX_SKILLS}"
        )
    named: dict[str, tuple[Skill, Path]] = {}
    for skill, given in loaded:
        if skill.name in named:
            raise ConfigError(
                f"two skills are named {skill.name!r}: {named[skill.name][1]} and {given}"
            )
        named[skill.name] = (skill, given)
    return tuple(named[name][0] for name in sorted(named))


def _skills_folder(folder: Path) -> Path:
    if not folder.exists():
        raise ConfigError(f"skills directory {folder} does not exist")
    if not folder.is_dir():
        raise ConfigError(f"skills directory {folder} is not a directory")
    return folder.resolve()


def _candidates(folder: Path) -> list[tuple[Path, Path | None]]:
    """The instruction files of the skills in ``folder``: (file, skill folder or None)."""
    try:
        entries = sorted(folder.iterdir(), key=lambda p: p.name)
    except OSError as exc:
        raise ConfigError(f"skills directory {folder}: {exc.strerror or exc}") from None
    found: list[tuple[Path, Path | None]] = []
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            if (entry / SKILL_FILE).is_file():
                found.append((entry / SKILL_FILE, entry))
        elif entry.name == SKILL_FILE:
            raise ConfigError(
                f"{entry}: a {SKILL_FILE} directly in a skills directory; name the folder "
                f"that holds the skill's folder ({folder.parent}), not the skill's folder"
            )
        elif entry.suffix == ".md":
            found.append((entry, None))  # a broken symlink too: reading it says so
    return found


def _load(path: Path, folder: Path | None) -> Skill:
    shown = f"skill file {path}"
    try:
        text = read_text(
            path,
            shown,
            too_large="read_skill could never read it; shorten it, or move parts into "
            f"files beside a {SKILL_FILE}",
        )
    except ToolFailure as exc:
        raise ConfigError(str(exc)) from None
    except OSError as exc:
        raise ConfigError(f"{shown}: {exc.strerror or exc}") from None
    fields, body = _frontmatter(text.removeprefix("\ufeff"), shown)
    if "name" in fields:
        name = _string_field(fields, "name", shown)
        problem = skill_name_problem(name)
        if problem is not None:
            raise ConfigError(f"{shown}: the frontmatter's name: {problem}")
    else:
        name = folder.name if folder is not None else path.stem
        problem = skill_name_problem(name)
        if problem is not None:
            raise ConfigError(
                f"{shown}: the skill is named after its {'folder' if folder else 'file'}, "
                f"and {problem}; rename it or give a name in the frontmatter"
            )
    description = ""
    if "description" in fields:
        description = " ".join(_string_field(fields, "description", shown).split())
    if not description:
        description = _first_prose_line(body)
    return Skill(
        name=name,
        description=description,
        path=path.resolve(),
        folder=folder.resolve() if folder is not None else None,
    )


def _frontmatter(text: str, shown: str) -> tuple[dict[str, Any], str]:
    """The frontmatter's fields and the body after it; a file without one is all body.

    Frontmatter is YAML between a first line ``---`` and the next ``---`` line.
    """
    import yaml

    lines = text.split("\n")
    if lines[0].rstrip() != "---":
        return {}, text
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:
        raise ConfigError(
            f"{shown}: the frontmatter opened by '---' on line 1 is never closed by a '---' line"
        )
    try:
        data = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + 2} of the file)" if mark is not None else ""
        raise ConfigError(
            f"{shown}: the frontmatter is not valid YAML: {exc.problem or exc.context}{where}"
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{shown}: the frontmatter is not valid YAML: {exc}") from None
    if data is None:  # an empty frontmatter
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{shown}: the frontmatter is {_kind(data)}, not a mapping of fields "
            "(write 'name: ...' and 'description: ...' lines)"
        )
    return data, "\n".join(lines[end + 1 :])


def _string_field(fields: dict[str, Any], key: str, shown: str) -> str:
    value = fields[key]
    if not isinstance(value, str):
        raise ConfigError(f"{shown}: the frontmatter's {key} is {_kind(value)}, not a string")
    return value


def _kind(value: object) -> str:
    if value is None:
        return "empty"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    kind = type(value).__name__
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _first_prose_line(body: str) -> str:
    """The first line of the body that is neither blank nor a ``#`` heading, or ``""``."""
    for line in body.split("\n"):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return " ".join(stripped.split())
    return ""


def shown_description(description: str) -> str:
    """``description`` as the catalogue shows it: at most :data:`DESCRIPTION_CHARS` characters.

    A longer one is cut and ends with ``…`` (counted in the cap), so the cut
    is visible. An empty one reads ``(no description)``.
    """
    if not description:
        return "(no description)"
    if len(description) <= DESCRIPTION_CHARS:
        return description
    return description[: DESCRIPTION_CHARS - 1].rstrip() + "…"


def skills_catalogue(skills: Sequence[Skill]) -> str:
    """The system prompt's block of skills: names and descriptions, never bodies.

    ``""`` when there are no skills, so a run without skills says nothing of them.
    """
    if not skills:
        return ""
    head = (
        "Skills (instructions for particular tasks; before using one, read its "
        "instructions with read_skill and its name):"
    )
    return "\n".join([head, *(f"- {s.name}: {shown_description(s.description)}" for s in skills)])


# No docstring: pydantic would put it in the schema the model is shown.
class ReadSkillArgs(Args):
    name: str = Field(description="The skill's name, as the list of skills gives it.")
    file: str | None = Field(
        None,
        description=(
            "A file the skill ships, relative to its folder (e.g. references/api.md); "
            "omit it to read the skill's instructions."
        ),
    )


class ReadSkillTool(HarnessTool[ReadSkillArgs]):
    """``read_skill``: a skill's instructions, or a file it ships, read as a checked ``read``.

    The act's target is the file's real location (symlinks followed): its path
    relative to the workspace root when it lies under the root, otherwise its
    absolute path, so the run's read rules apply to skills as to any file. An
    unknown name or a ``file`` that leaves the skill's folder is refused as an
    observation.
    """

    reads_only = True

    name = "read_skill"
    description = (
        "Read a skill's instructions by its name (the skills are listed in the system "
        "prompt). With `file`, read a file the skill ships in its folder, such as "
        f"references/api.md. Files over {READ_CEILING_BYTES} bytes are refused."
    )
    args = ReadSkillArgs

    def __init__(self, skills: Sequence[Skill], root: Path) -> None:
        self.skills = {skill.name: skill for skill in skills}
        self.root = root.resolve()

    def accesses(self, args: ReadSkillArgs) -> Sequence[Access]:
        """One read of the file the call would read; an unknown name or bad file is refused."""
        return (Access(Act.READ, self._target(self._file(args)[1])),)

    async def invoke(self, args: ReadSkillArgs) -> ToolOutcome:
        """The file's whole text; for a skill's instructions, the files its folder ships."""
        skill, path = self._file(args)
        if args.file is None:
            shown = f"the instructions of skill {skill.name!r}"
        else:
            shown = f"{args.file} of skill {skill.name!r}"
            if not path.exists():
                raise ToolFailure(f"{shown} does not exist; {self._shipped_line(skill)}")
            if path.is_dir():
                raise ToolFailure(f"{shown} is a folder; {self._shipped_line(skill)}")
        text = read_text(path, shown, too_large="read_skill reads files whole only")
        content = f"[{shown}: {self._target(path)}]\n{text or '(the file is empty)'}"
        if args.file is None and skill.folder is not None:
            content += ("" if content.endswith("\n") else "\n") + self._shipped_list(skill)
        return ToolOutcome(content)

    def _file(self, args: ReadSkillArgs) -> tuple[Skill, Path]:
        skill = self.skills.get(args.name)
        if skill is None:
            known = ", ".join(sorted(self.skills)) or "(none)"
            raise PathRefused(f"no skill is named {args.name!r}; the skills are: {known}")
        if args.file is None:
            return skill, skill.path.resolve()
        if skill.folder is None:
            raise PathRefused(
                f"skill {skill.name!r} is a single file ({skill.path.name}) and ships no "
                "other files; call read_skill with its name alone"
            )
        return skill, _inside(skill.folder, args.file, skill.name)

    def _target(self, path: Path) -> str:
        if path.is_relative_to(self.root):
            return path.relative_to(self.root).as_posix() or "."
        return str(path)

    def _shipped(self, skill: Skill) -> list[str]:
        assert skill.folder is not None
        walk = Workspace(skill.folder)
        return sorted(rel for rel in map(walk.relative, walk.walk()) if rel != SKILL_FILE)

    def _shipped_line(self, skill: Skill) -> str:
        files = self._shipped(skill)
        if not files:
            return f"skill {skill.name!r} ships no files"
        shown = files[:SHIPPED_FILES_SHOWN]
        more = len(files) - len(shown)
        return f"the skill's files are: {', '.join(shown)}" + (f" and {more} more" if more else "")

    def _shipped_list(self, skill: Skill) -> str:
        files = self._shipped(skill)
        if not files:
            return f"\n[skill {skill.name!r} ships no other files]"
        lines = [
            f"\n[files skill {skill.name!r} ships; read one with read_skill "
            f'{{"name": "{skill.name}", "file": "<path>"}}]',
            *files[:SHIPPED_FILES_SHOWN],
        ]
        if len(files) > SHIPPED_FILES_SHOWN:
            lines.append(f"[{len(files) - SHIPPED_FILES_SHOWN} more files not shown]")
        return "\n".join(lines)


def _inside(folder: Path, file: str, skill: str) -> Path:
    """The real location of ``file`` in a skill's folder, or a refusal saying why.

    A skill's folder confines its files as the workspace confines the agent's
    paths: no absolute path, no ``..``, no symlink out. A missing file is
    reported by ``invoke``, with the files there are.
    """
    try:
        return Workspace(folder, called="its folder").resolve(file)
    except PathRefused as exc:
        raise PathRefused(f"skill {skill!r}: {exc}") from None
