"""``read_skill``: a skill's instructions, or a file it ships, read as a checked ``read``."""

from __future__ import annotations

import stat
from collections.abc import Sequence
from pathlib import Path

from pydantic import Field

from io_harness.policy._gate import Access
from io_harness.policy._rules import Act
from io_harness.tools._base import Args, HarnessTool, ToolContext, ToolFailure, ToolOutcome
from io_harness.tools._skills import SHIPPED_FILES_SHOWN, SKILL_FILE, Skill
from io_harness.tools._text import READ_CEILING_BYTES, read_text
from io_harness.tools._workspace import PathRefused, Workspace

__all__ = ["ReadSkillArgs", "ReadSkillTool"]


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

    The act's target is the file's location: its path relative to the
    workspace root when it lies under the root, otherwise its absolute path,
    so the run's read rules apply to skills as to any file. The file is then
    read from the skills directory's descriptor without following a symlink,
    so the file read is the one the policy checked. An unknown name or a
    ``file`` that leaves the skill's folder is refused as an observation.
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
        skill, rel = self._file(args)
        directory, _ = skill.confined()
        return (Access(Act.READ, self._target(directory.root / rel)),)

    async def invoke(self, args: ReadSkillArgs, context: ToolContext) -> ToolOutcome:
        """The file's whole text; for a skill's instructions, the files its folder ships."""
        skill, rel = self._file(args)
        directory, _ = skill.confined()
        if args.file is None:
            shown = f"the instructions of skill {skill.name!r}"
        else:
            shown = f"{args.file} of skill {skill.name!r}"
            info = directory.lstat(rel)
            if info is None:
                raise ToolFailure(f"{shown} does not exist; {self._shipped_line(skill)}")
            if stat.S_ISDIR(info.st_mode):
                raise ToolFailure(f"{shown} is a folder; {self._shipped_line(skill)}")
        try:
            text = read_text(directory, rel, shown, too_large="read_skill reads files whole only")
        except PathRefused as exc:
            raise PathRefused(f"skill {skill.name!r}: {exc}") from None
        content = (
            f"[{shown}: {self._target(directory.root / rel)}]\n{text or '(the file is empty)'}"
        )
        if args.file is None and skill.folder is not None:
            content += ("" if content.endswith("\n") else "\n") + self._shipped_list(skill)
        return ToolOutcome(content)

    def _file(self, args: ReadSkillArgs) -> tuple[Skill, str]:
        """The skill, and the path in its skills directory of the file the call reads."""
        skill = self.skills.get(args.name)
        if skill is None:
            known = ", ".join(sorted(self.skills)) or "(none)"
            raise PathRefused(f"no skill is named {args.name!r}; the skills are: {known}")
        if args.file is None:
            return skill, skill.confined()[1]
        if skill.folder is None:
            raise PathRefused(
                f"skill {skill.name!r} is a single file ({skill.path.name}) and ships no "
                "other files; call read_skill with its name alone"
            )
        try:
            return skill, skill.shipped_path(args.file)
        except PathRefused as exc:
            raise PathRefused(f"skill {skill.name!r}: {exc}") from None

    def _target(self, path: Path) -> str:
        if path.is_relative_to(self.root):
            return path.relative_to(self.root).as_posix() or "."
        return str(path)

    def _shipped(self, skill: Skill) -> list[str]:
        assert skill.folder is not None
        directory, _ = skill.confined()
        try:
            walk = Workspace(skill.folder, called="its folder", within=directory)
            return sorted(found.rel for found in walk.walk() if found.rel != SKILL_FILE)
        except (PathRefused, OSError):
            return []

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
