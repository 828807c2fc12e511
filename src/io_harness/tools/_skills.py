"""Skills: markdown instructions an agent reads when it needs them, found and listed.

A skills directory holds skills in two layouts: ``<dir>/<name>.md`` (a flat
skill, one file) and ``<dir>/<name>/SKILL.md`` (a folder skill, which may ship
more files beside its ``SKILL.md``). The system prompt carries each skill's
name and description only (:func:`skills_catalogue`); ``read_skill``
(:mod:`._read_skill`) reads a skill's file when the model asks, as an ordinary
policy-checked read.

Every problem with the set (a missing directory, malformed frontmatter, two
skills with one name, too many skills) is a :class:`ConfigError` raised at
discovery, before the run starts: a set is taken whole or rejected.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from io_harness._confined import parts_of
from io_harness.errors import ConfigError
from io_harness.tools._base import ToolFailure
from io_harness.tools._text import read_text
from io_harness.tools._workspace import PathMissing, PathRefused, Workspace

__all__ = [
    "DESCRIPTION_CHARS",
    "MAX_SKILLS",
    "SHIPPED_FILES_SHOWN",
    "SKILL_FILE",
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

    ``path`` is where the instructions file lies. ``folder`` is the skill's
    own folder for the ``<name>/SKILL.md`` layout, whose other files
    ``read_skill`` can read; it is ``None`` for a flat ``<name>.md`` skill,
    which ships nothing. ``description`` is whole, its runs of whitespace
    made single spaces; the catalogue cuts it (:func:`shown_description`).
    ``directory`` is the confined skills directory the skill was found in:
    every read walks from it, never through a symlink.
    """

    name: str
    description: str
    path: Path
    folder: Path | None = None
    directory: Workspace | None = field(default=None, compare=False, repr=False)

    def confined(self) -> tuple[Workspace, str]:
        """The skills directory and the instructions file's path in it."""
        directory = self.directory or Workspace(self.path.parent, called="its folder")
        return directory, self.path.relative_to(directory.root).as_posix()

    def shipped_path(self, file: str) -> str:
        """The path in the skills directory of ``file``, a file this folder skill ships.

        ``file`` is checked as text (no ``..``, not absolute), so it stays in
        the skill's folder; a skill with no folder ships nothing.
        """
        assert self.folder is not None
        directory, _ = self.confined()
        inside = self.folder.relative_to(directory.root).parts
        return "/".join((*inside, *parts_of(file, "its folder")))


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


def discover_skills(
    folders: Sequence[Path],
    *,
    within: Workspace | None = None,
    readable: Callable[[Path], bool] | None = None,
) -> tuple[Skill, ...]:
    """Every skill in every folder of ``folders``, sorted by name.

    In each folder, a file ``<name>.md`` is a flat skill and a subfolder
    holding ``SKILL.md`` is a folder skill; every other entry (other files,
    subfolders without ``SKILL.md``, names beginning with ``.``) is ignored.
    A folder given twice (the same location) is read once. A folder inside
    ``within`` (the run's workspace) is reached from its descriptor, and no
    symlink is followed in any folder: a repository's files cannot lead a
    read elsewhere. ``readable`` says whether the run's policy lets a file
    (by its location) be read outright; a skill it does not is listed by its
    file's or folder's name, its file unread (:data:`WITHHELD`).

    Raises :class:`ConfigError`, naming the file or folder, for: a folder
    that is missing or not a directory, a ``SKILL.md`` directly in it (it
    names a skill's own folder, not a skills directory), a symlink named as
    a skill, a skill file that is not UTF-8 text or over the read ceiling,
    malformed frontmatter, an invalid
    name, more than :data:`MAX_SKILLS` skills, and two skills with one name —
    in one folder (``x.md`` beside ``x/SKILL.md`` is that case) or across two.
    """
    loaded: list[tuple[Skill, Path]] = []
    seen: set[Path] = set()
    for folder in folders:
        directory = _skills_folder(folder, within)
        if directory.root in seen:
            continue
        seen.add(directory.root)
        for rel, own in _candidates(directory):
            skill = _load(directory, rel, own, readable)
            loaded.append((skill, folder / rel))
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


def _skills_folder(folder: Path, within: Workspace | None) -> Workspace:
    directory = Workspace(folder, called="its folder", within=within)
    try:
        directory.entries()
    except PathMissing:
        raise ConfigError(f"skills directory {folder} does not exist") from None
    except PathRefused as exc:
        raise ConfigError(f"skills directory {folder}: {exc}") from None
    except NotADirectoryError:
        raise ConfigError(f"skills directory {folder} is not a directory") from None
    except FileNotFoundError:
        raise ConfigError(f"skills directory {folder} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"skills directory {folder}: {exc.strerror or exc}") from None
    return directory


def _candidates(directory: Workspace) -> list[tuple[str, str | None]]:
    """The instruction files of the skills in ``directory``: (file, skill folder or None)."""
    where = directory.root
    found: list[tuple[str, str | None]] = []
    for entry in directory.entries():
        if entry.name.startswith("."):
            continue
        if entry.kind == "dir":
            inner = directory.lstat(f"{entry.name}/{SKILL_FILE}")
            if inner is not None and stat.S_ISLNK(inner.st_mode):
                raise ConfigError(
                    f"skill file {where / entry.name / SKILL_FILE} is a symlink; skills are "
                    "read without following symlinks: put the file itself there"
                )
            if inner is not None and stat.S_ISREG(inner.st_mode):
                found.append((f"{entry.name}/{SKILL_FILE}", entry.name))
        elif entry.name == SKILL_FILE:
            raise ConfigError(
                f"{where / entry.name}: a {SKILL_FILE} directly in a skills directory; name the "
                f"folder that holds the skill's folder ({where.parent}), not the skill's folder"
            )
        elif entry.kind == "link":
            # Taken for a skill or ignored, either would be a guess: a link is never followed.
            raise ConfigError(
                f"{where / entry.name} in a skills directory is a symlink (to {entry.link!r}); "
                "skills are read without following symlinks: put the skill itself there"
            )
        elif entry.name.endswith(".md"):
            found.append((entry.name, None))
    return found


def _load(
    directory: Workspace, rel: str, folder: str | None, readable: Callable[[Path], bool] | None
) -> Skill:
    path = directory.root / rel
    shown = f"skill file {path}"
    if readable is not None and not readable(path):
        return _unread(directory, path, folder, shown)
    try:
        text = read_text(
            directory,
            rel,
            shown,
            too_large="read_skill could never read it; shorten it, or move parts into "
            f"files beside a {SKILL_FILE}",
        )
    except (ToolFailure, PathRefused) as exc:
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
        name = folder if folder is not None else rel.removesuffix(".md")
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
        path=path,
        folder=directory.root / folder if folder is not None else None,
        directory=directory,
    )


WITHHELD = "(not shown: the run's policy does not let this skill's file be read without asking)"
"""The description of a skill whose file the policy does not let be read outright."""


def _unread(directory: Workspace, path: Path, folder: str | None, shown: str) -> Skill:
    """A skill listed by its file's or folder's name alone: its file is not read at all.

    The catalogue must not carry what the policy withholds; ``read_skill``
    then asks the gate like any read.
    """
    name = folder if folder is not None else path.name.removesuffix(".md")
    problem = skill_name_problem(name)
    if problem is not None:
        raise ConfigError(f"{shown}: the skill is named after its location, and {problem}")
    return Skill(
        name=name,
        description=WITHHELD,
        path=path,
        folder=directory.root / folder if folder is not None else None,
        directory=directory,
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
