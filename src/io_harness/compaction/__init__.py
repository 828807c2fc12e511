"""Compaction: a long run's view fitted to its context window, the task never lost.

:class:`Compaction` is the setting (``_settings.py``); ``_pass.py`` holds the
view of a compacted run (:class:`View`, its :class:`Edit` s), the pass's
request and the checks on what it asks; ``_step.py`` runs one pass inside a
step. Only the setting is imported here: the rest loads when a run compacts.
"""

from io_harness.compaction._settings import Compaction, positions_text

__all__ = ["Compaction", "positions_text"]
