"""The guard a stdio MCP server starts through on Linux, so that it dies with the harness.

Run by path as ``python -I -S -B _guard.py PARENT PROGRAM [ARG...]``. It asks
the kernel to SIGKILL it when its parent dies (``prctl(PR_SET_PDEATHSIG)``),
checks that the parent is still ``PARENT`` (the harness may have died before
the request was made), restores the signals Python ignores, then becomes the
server: ``execvp`` finds ``PROGRAM`` on the server's own ``PATH``, as the
SDK's direct start would. The death signal survives the exec, so a harness
that is killed (even with SIGKILL) takes the server with it.

It is a script of the standard library alone, run by path, so nothing of the
server's folder can stand in for it. Any failure before the exec exits with
status 127 and one line on stderr beginning ``ioh-mcp-guard:``.
"""

# Only os, sys, ctypes and the C signal module: the guard runs at every server start.
from __future__ import annotations

import _signal as signal  # type: ignore[import-not-found]  # signal without enum
import os
import sys

MARK = "ioh-mcp-guard:"
FAILED = 127
PR_SET_PDEATHSIG = 1


def _fail(message: str) -> None:
    sys.stderr.write(f"{MARK} {message}\n")
    sys.stderr.flush()
    os._exit(FAILED)


def main(argv: list[str]) -> None:
    """Arm the death signal, check the parent, exec the server."""
    if len(argv) < 3 or not argv[1].isdigit():
        _fail("usage: _guard.py PARENT PROGRAM [ARG...]")
    parent, program, args = int(argv[1]), argv[2], argv[2:]
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        _fail(f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(ctypes.get_errno())}")
    if os.getppid() != parent:  # the harness died before the death signal was armed
        os._exit(FAILED)
    for number in (signal.SIGPIPE, getattr(signal, "SIGXFSZ", None)):
        if number is not None:  # Python ignores these; an exec would keep them ignored
            signal.signal(number, signal.SIG_DFL)
    try:
        os.execvp(program, args)
    except OSError as exc:
        _fail(f"cannot run {program!r}: {exc.strerror or exc}")


if __name__ == "__main__":
    main(sys.argv)
