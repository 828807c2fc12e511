"""The one preparation of a run: every way a run starts goes prepare → drive.

A new run (:func:`prepared_new`), a resume or a queued job's drive
(:func:`prepared_stored`) and a sub-agent's drive (``prepared_child``, from
``trees/_driver.py``) each end in a :class:`PreparedRun`, built from the
:class:`RunKit` the harness's options become, and are driven by the one
:func:`drive`. A new option reaches the loop by being added to the kit.
"""

from io_harness.prepare._kit import RunKit
from io_harness.prepare._new import prepared_new
from io_harness.prepare._prepared import PreparedRun, drive
from io_harness.prepare._stored import decide_in_tree, prepared_stored

__all__ = ["PreparedRun", "RunKit", "decide_in_tree", "drive", "prepared_new", "prepared_stored"]
