"""The HTML report of a run: one self-contained page to read in a browser.

:func:`render_report` gives the page as text, :func:`write_report` writes it
to a file; ``ioh report RUN_ID`` is the same from the command line. The page
needs no network (its style and script are inline) and escapes everything
the run stored. For a tree's root it holds every agent, each in its own
section linked from the drawing of the tree. See ``docs/report.md``.

    from io_harness import Store
    from io_harness.report import write_report

    with Store.open(".ioh/runs.db") as store:
        write_report(store, run_id, "report.html")
"""

from io_harness._report import render_report, write_report

__all__ = ["render_report", "write_report"]
