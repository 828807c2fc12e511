"""An MCP server, by hand, that answers the handshake, fails tools/list late, and lingers.

Usage: fails_list.py MARKER DELAY

It answers ``tools/list`` with an error after DELAY seconds and then keeps
running after its stdin closes, so only a kill ends it.
"""

from __future__ import annotations

import json
import sys
import time


def send(message: object) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


delay = float(sys.argv[2])
for line in sys.stdin:
    request = json.loads(line)
    if request.get("method") == "initialize":
        info = {"name": "fails-list", "version": "1"}
        version = request["params"]["protocolVersion"]
        result = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}
        send({"jsonrpc": "2.0", "id": request["id"], "result": result})
    elif request.get("method") == "tools/list":
        time.sleep(delay)
        send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32603, "message": "boom"}})
while True:  # stdin closed: linger until killed
    time.sleep(1)
