"""A 2025-only stdio server (raw JSON-RPC, no SDK) that answers requests concurrently, with its two read-only
tools `red` and `blue` each answering with the name of the tool being called. `global` mode keeps that name in
a module global while the call waits (a handler's "current request" as process state: broken on purpose; two
calls interleaved on one process answer each other's name). `context` mode keeps it in a context variable,
one per call: the clean counterpart.

Expected: legacy.stdio fails in `global` mode ("red: alone red, interleaved blue") and passes in `context` mode.

    python legacy_current_call.py global|context
"""

import asyncio
import contextvars
import json
import sys

MODE = sys.argv[1]
CURRENT_GLOBAL = ""
CURRENT = contextvars.ContextVar("current", default="")
TOOLS = [{"name": n, "description": f"Says {n}.", "inputSchema": {"type": "object"},
          "annotations": {"readOnlyHint": True}} for n in ("red", "blue")]


def write(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def call(name: str) -> str:
    global CURRENT_GLOBAL
    if MODE == "global":
        CURRENT_GLOBAL = name
        await asyncio.sleep(0.05)
        return CURRENT_GLOBAL
    CURRENT.set(name)
    await asyncio.sleep(0.05)
    return CURRENT.get()


async def handle(msg: dict) -> None:
    method, id_ = msg.get("method"), msg.get("id")
    if id_ is None:
        return  # a notification
    if method == "initialize":
        result = {"protocolVersion": msg["params"].get("protocolVersion", "2025-11-25"),
                  "capabilities": {"tools": {}}, "serverInfo": {"name": f"legacy-current-call-{MODE}",
                                                                "version": "1"}}
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        text = await call(msg["params"]["name"])
        result = {"content": [{"type": "text", "text": text}]}
    else:
        write({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": f"no {method}"}})
        return
    write({"jsonrpc": "2.0", "id": id_, "result": result})


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    tasks = set()
    while line := await reader.readline():
        task = asyncio.create_task(handle(json.loads(line)))
        tasks.add(task)
        task.add_done_callback(tasks.discard)


asyncio.run(main())
