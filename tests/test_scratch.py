"""Temporary folders a killed process left are swept by the next one of their kind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from io_harness._scratch import scratch_folder, sweep


def test_a_folder_of_a_dead_process_is_swept_and_a_live_ones_kept(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = tmp_path / f"ioh-record-{dead.stdout.strip()}-abc"
    live = tmp_path / f"ioh-record-{os.getpid()}-def"
    other = tmp_path / "ioh-recordings"
    for folder in (stale, live, other):
        folder.mkdir()

    removed = sweep("record", tmp_path)

    assert removed == [stale] and not stale.exists()
    assert live.exists() and other.exists()


def test_a_scratch_folder_is_named_for_its_process_and_removed_after() -> None:
    with scratch_folder("record") as folder:
        assert Path(folder).name.startswith(f"ioh-record-{os.getpid()}-")
        assert Path(folder).is_dir()
    assert not Path(folder).exists()
