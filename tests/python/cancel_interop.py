"""An MCP client on the official Python SDK (mcp 2.x, pinned in requirements.txt) against a
cancelkit server over stdio. Driven by tests/tests/python_sdk_interop.rs.

    python cancel_interop.py SERVER_BINARY SCENARIO

SCENARIO is one of
  discover        connect with ClientSession.discover() (2026-07-28, no handshake), list the
                  tools, call `echo`, cancel a `sleep {seconds: 30}` call after ~300 ms, call
                  `echo` again, then call `ask_client {timeout_ms}`. A 2026-07-28 server sends
                  no requests; should it send one anyway, the tap records it and withholds it
                  from the SDK (which would answer -32601 at once), so the server's timeout runs
                  out and shows whether it then sends notifications/cancelled, which a
                  2026-07-28 server must not
  initialize      the same after ClientSession.initialize() (the 2025-11-25 handshake), without
                  `ask_client`
  server_cancels  initialize(), then call `ask_client {timeout_ms}`: the server sends
                  sampling/createMessage, our sampling callback sleeps 30 s, the server gives up
                  and sends notifications/cancelled for it

Tools are called with ClientSession.send_request(CallToolRequest, CallToolResult): call_tool
minus its output-schema check, which lists the tools first, so that a tools/list the SDK
rejects fails only the listing test (the listing is made and reported on its own) and not every
cancellation test with it.

Prints JSON lines, each an object with an "event" member; the last is {"event": "wire", ...}
with every JSON-RPC message that crossed the client's transport, both ways, as sent/received,
and the server's stderr log. The script taps the transport streams between stdio_client and
ClientSession, because the SDK never surfaces notifications/cancelled to a message handler.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage

SLEEP_CANCEL_AFTER_S = 0.3
ASK_CLIENT_TIMEOUT_MS = 500
CALLBACK_SLEEP_S = 30.0
STOPPED_WAIT_S = 5.0
LATE_RESPONSE_WAIT_S = 0.3
WHOLE_RUN_LIMIT_S = 40.0

T0 = time.monotonic()


def ms_since(start: float) -> float:
    return round((time.monotonic() - start) * 1000, 1)


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


class Wire:
    """Every message that crosses the transport, in order, with a timestamp (ms since start)."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def record(self, direction: str, item: SessionMessage | Exception) -> None:
        if isinstance(item, SessionMessage):
            message = item.message.model_dump(by_alias=True, mode="json", exclude_unset=True)
        else:
            message = {"transportError": repr(item)}
        self.messages.append({"dir": direction, "ms": ms_since(T0), "message": message})

    def sent(self, method: str) -> list[dict[str, Any]]:
        return [m["message"] for m in self.messages if m["dir"] == "out" and m["message"].get("method") == method]


async def pump_in(wire: Wire, source: Any, sink: Any, withhold_requests: bool) -> None:
    """Server -> session, recording each message; with `withhold_requests`, requests from the
    server are recorded but not passed on, so they go unanswered."""
    async with sink:
        async for item in source:
            wire.record("in", item)
            if withhold_requests and isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCRequest):
                wire.messages[-1]["withheld"] = True
                continue
            try:
                await sink.send(item)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return


async def pump_out(wire: Wire, source: Any, sink: Any) -> None:
    """Session -> server, recording each message."""
    async with source:
        async for item in source:
            wire.record("out", item)
            await sink.send(item)


def read_log(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


async def wait_for_log(path: str, pattern: str, limit_s: float) -> float | None:
    """Polls the server's stderr log for `pattern` (a regex); the ms it took, or None."""
    start = time.monotonic()
    regex = re.compile(pattern)
    while time.monotonic() - start < limit_s:
        if regex.search(read_log(path)):
            return ms_since(start)
        await anyio.sleep(0.002)
    return None


async def call_tool(session: ClientSession, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    request = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments))
    return await session.send_request(request, types.CallToolResult)


async def list_tools(session: ClientSession) -> None:
    try:
        listed = await session.list_tools()
        emit("list_tools", ok=True, tools=[tool.name for tool in listed.tools])
    except Exception as error:
        emit("list_tools", ok=False, error=repr(error))


def text_of(result: types.CallToolResult) -> str | None:
    for block in result.content:
        if isinstance(block, types.TextContent):
            return block.text
    return None


async def connect(session: ClientSession, scenario: str) -> None:
    if scenario == "discover":
        result = await session.discover()
        emit(
            "connected",
            via="discover",
            protocolVersion=session.protocol_version,
            supportedVersions=result.supported_versions,
        )
    else:
        result = await session.initialize()
        emit("connected", via="initialize", protocolVersion=result.protocol_version)


async def cancel_a_sleep(session: ClientSession, wire: Wire, log_path: str) -> None:
    echo = await call_tool(session, "echo", {"text": "hello"})
    emit("echo", text=text_of(echo), isError=echo.is_error)

    outcome: dict[str, Any] = {"state": "running"}

    async def call() -> None:
        try:
            result = await call_tool(session, "sleep", {"seconds": 30})
            outcome.update(state="completed", text=text_of(result))
        except anyio.get_cancelled_exc_class():
            outcome["state"] = "cancelled"
            raise
        except Exception as error:  # an error response would show up here
            outcome.update(state="error", error=repr(error))

    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await anyio.sleep(SLEEP_CANCEL_AFTER_S)
        cancelled_at = time.monotonic()
        # The user pressing stop: cancel the scope the call_tool awaits in.
        tg.cancel_scope.cancel()
    sleep_calls = [m for m in wire.sent("tools/call") if m.get("params", {}).get("name") == "sleep"]
    request_id = sleep_calls[0]["id"] if sleep_calls else None
    stopped_ms = await wait_for_log(
        log_path, rf"sleep tool stopped request_id={re.escape(json.dumps(request_id))}\b", STOPPED_WAIT_S
    )
    emit(
        "sleep",
        requestId=request_id,
        outcome=outcome["state"],
        detail=outcome.get("text") or outcome.get("error"),
        cancelledAfterMs=round((cancelled_at - started) * 1000, 1),
        callReturnedAfterCancelMs=ms_since(cancelled_at),
        cancelToStoppedMs=stopped_ms,
    )

    echo = await call_tool(session, "echo", {"text": "still serving"})
    emit("echo", text=text_of(echo), isError=echo.is_error)
    # Give a late response to the cancelled call every chance to show up.
    await anyio.sleep(LATE_RESPONSE_WAIT_S)


def sampling_recorder() -> tuple[Any, dict[str, Any]]:
    seen: dict[str, Any] = {"calls": []}

    async def sampling_callback(
        context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        call: dict[str, Any] = {"requestId": context.request_id, "state": "started"}
        seen["calls"].append(call)
        started = time.monotonic()
        try:
            await anyio.sleep(CALLBACK_SLEEP_S)
        except anyio.get_cancelled_exc_class():
            call.update(state="cancelled", afterMs=ms_since(started))
            raise
        call.update(state="completed", afterMs=ms_since(started))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="hello"),
            model="python-sdk-interop",
        )

    return sampling_callback, seen


async def ask_client(session: ClientSession) -> None:
    started = time.monotonic()
    try:
        result = await call_tool(session, "ask_client", {"timeout_ms": ASK_CLIENT_TIMEOUT_MS})
        emit(
            "ask_client",
            text=text_of(result),
            isError=result.is_error,
            afterMs=ms_since(started),
            timeoutMs=ASK_CLIENT_TIMEOUT_MS,
        )
    except Exception as error:  # an error response
        emit("ask_client", error=repr(error), afterMs=ms_since(started), timeoutMs=ASK_CLIENT_TIMEOUT_MS)


async def server_cancels(session: ClientSession, seen: dict[str, Any]) -> None:
    await ask_client(session)
    # Let anything still in flight (a late answer from us, a second cancel) reach the wire.
    await anyio.sleep(LATE_RESPONSE_WAIT_S)
    emit("sampling_callbacks", calls=seen["calls"])
    echo = await call_tool(session, "echo", {"text": "still serving"})
    emit("echo", text=text_of(echo), isError=echo.is_error)


async def main(server: str, scenario: str) -> None:
    if scenario not in ("discover", "initialize", "server_cancels"):
        raise SystemExit(f"unknown scenario {scenario!r}")
    with tempfile.TemporaryDirectory(prefix="cancelkit-python-interop-") as log_dir:
        await run_scenario(scenario, server, os.path.join(log_dir, "server.log"))


async def run_scenario(scenario: str, server: str, log_path: str) -> None:
    wire = Wire()
    callback, seen = sampling_recorder()
    params = StdioServerParameters(command=server, env={"RUST_LOG": "info"})
    try:
        with anyio.fail_after(WHOLE_RUN_LIMIT_S), open(log_path, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with anyio.create_task_group() as pumps:
                    to_session, session_read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
                    session_write, from_session = anyio.create_memory_object_stream[SessionMessage](0)
                    pumps.start_soon(pump_in, wire, read, to_session, scenario == "discover")
                    pumps.start_soon(pump_out, wire, from_session, write)
                    async with ClientSession(
                        session_read,
                        session_write,
                        sampling_callback=callback if scenario != "initialize" else None,
                    ) as session:
                        await connect(session, scenario)
                        await list_tools(session)
                        if scenario == "server_cancels":
                            await server_cancels(session, seen)
                        else:
                            await cancel_a_sleep(session, wire, log_path)
                        if scenario == "discover":
                            await ask_client(session)
                            await anyio.sleep(LATE_RESPONSE_WAIT_S)
                            emit("sampling_callbacks", calls=seen["calls"])
                    pumps.cancel_scope.cancel()
    finally:
        emit("wire", messages=wire.messages, serverLog=read_log(log_path))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(f"usage: {sys.argv[0]} SERVER_BINARY SCENARIO")
    anyio.run(main, sys.argv[1], sys.argv[2])
