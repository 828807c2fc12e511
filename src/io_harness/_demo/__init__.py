"""The bundled demo: a small Python project with failing tests, and a recorded model.

``ioh demo`` copies :data:`PROJECT`, :data:`CONTRACT` and :data:`CASSETTE` into a
fresh folder and runs the contract, under its ``[policy]``, with
:class:`~io_harness.Replay` over the copied cassette, the real tools and the real
pytest command. ``python -m
io_harness._demo.record`` writes the cassette again after a change to
prompts or tool output.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

__all__ = ["CASSETTE", "CONTRACT", "PROJECT", "copy_cassette", "prepare", "use_this_python"]

_HERE = Path(__file__).parent
PROJECT = _HERE / "project"
CONTRACT = _HERE / "contract.toml"
CASSETTE = _HERE / "cassette.jsonl"


def prepare(folder: Path) -> Path:
    """Copy the demo into ``folder`` (which must not exist); return its contract's path."""
    shutil.copytree(PROJECT, folder / "project", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(CONTRACT, folder / "contract.toml")
    return folder / "contract.toml"


def copy_cassette(folder: Path) -> Path:
    """Copy the recording into ``folder`` (beside the contract, outside the workspace), so
    the demo's banner names a file the reader has; return its path."""
    return Path(shutil.copy2(CASSETTE, folder / CASSETTE.name))


def use_this_python() -> None:
    """Put the running interpreter first on ``PATH``: the demo's criterion runs ``python``."""
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
