"""A program that never answers the MCP handshake: ``silent.py [--tag=TAG]``.

It writes many lines on stderr (more than the harness keeps), a last line,
then sleeps without reading stdin. ``--tag`` marks the process for the tests.
"""

from __future__ import annotations

import sys
import time

for number in range(5000):
    print(f"early noise {number}", file=sys.stderr)
print("the last word: waiting for nothing", file=sys.stderr, flush=True)
time.sleep(3600)
