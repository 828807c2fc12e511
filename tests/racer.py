"""A racing process: swaps two names in a loop, as a command's background child would.

``python racer.py A B`` exchanges the entries ``A`` and ``B`` (a real folder
and a symlink leading out, say) with ``renameat2(RENAME_EXCHANGE)``, one
atomic swap at a time, as fast as it can. It prints ``ready`` once it has
swapped, and at SIGTERM (or after ``--seconds``) it puts them back as they
were and prints how many swaps it made, so a test can show the race was run.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

AT_FDCWD = -100
RENAME_EXCHANGE = 2


def main() -> int:
    first, second = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 120.0
    libc = ctypes.CDLL(None, use_errno=True)
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    swaps = 0
    end = time.monotonic() + seconds
    while not stopping and time.monotonic() < end:
        if libc.renameat2(AT_FDCWD, first, AT_FDCWD, second, RENAME_EXCHANGE) != 0:
            print(f"renameat2 failed: {os.strerror(ctypes.get_errno())}", flush=True)
            return 1
        swaps += 1
        if swaps == 2:
            print("ready", flush=True)
    if swaps % 2:  # an odd count leaves them exchanged: put them back
        libc.renameat2(AT_FDCWD, first, AT_FDCWD, second, RENAME_EXCHANGE)
    print(swaps, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
