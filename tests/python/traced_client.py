"""An MCP client on the official Python SDK (mcp 2.x, pinned in requirements.txt) driving a
server through `cancelkit trace`. Driven by cli/tests/python_client.rs.

    python traced_client.py ERA CANCELKIT TRACE_FILE SERVER [SERVER_ARGS...]

ERA is `discover` (2026-07-28, no handshake) or `initialize` (the 2025-11-25 handshake). The SDK
starts `CANCELKIT trace --out TRACE_FILE -- SERVER ...` as its stdio server, so every frame it
exchanges passes through the proxy. The session lists the tools, calls `echo`, starts
`sleep {seconds: 30}` and cancels it after about 300 ms the way an application does (cancelling
the task that awaits the call: the SDK then sends notifications/cancelled), calls `echo` again
and closes.

Prints one JSON line per step ({"event": ...}); the test reads the trace file for the wire.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

CANCEL_AFTER_S = 0.3
WHOLE_RUN_LIMIT_S = 30.0


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def text_of(result: types.CallToolResult) -> str | None:
    for block in result.content:
        if isinstance(block, types.TextContent):
            return block.text
    return None


async def call_tool(session: ClientSession, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    request = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments))
    return await session.send_request(request, types.CallToolResult)


async def session_steps(session: ClientSession, era: str) -> None:
    if era == "discover":
        await session.discover()
    else:
        await session.initialize()
    emit("connected", via=era, protocolVersion=session.protocol_version)
    listed = await session.list_tools()
    emit("tools", names=[tool.name for tool in listed.tools])
    emit("echo", text=text_of(await call_tool(session, "echo", {"text": "hello"})))

    outcome = {"state": "running"}

    async def sleep_call() -> None:
        try:
            await call_tool(session, "sleep", {"seconds": 30})
            outcome["state"] = "completed"
        except anyio.get_cancelled_exc_class():
            outcome["state"] = "cancelled"
            raise
        except Exception as error:  # an error response would land here
            outcome["state"] = f"error: {error!r}"

    started = time.monotonic()
    async with anyio.create_task_group() as group:
        group.start_soon(sleep_call)
        await anyio.sleep(CANCEL_AFTER_S)
        group.cancel_scope.cancel()
    emit("sleep", outcome=outcome["state"], afterMs=round((time.monotonic() - started) * 1000))
    emit("echo", text=text_of(await call_tool(session, "echo", {"text": "still serving"})))


async def main(era: str, cancelkit: str, trace: str, server: list[str]) -> None:
    if era not in ("discover", "initialize"):
        raise SystemExit(f"unknown era {era!r}")
    params = StdioServerParameters(command=cancelkit, args=["trace", "--out", trace, "--", *server])
    with anyio.fail_after(WHOLE_RUN_LIMIT_S):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session_steps(session, era)
    emit("closed")


if __name__ == "__main__":
    if len(sys.argv) < 5:
        raise SystemExit(f"usage: {sys.argv[0]} ERA CANCELKIT TRACE_FILE SERVER [SERVER_ARGS...]")
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
