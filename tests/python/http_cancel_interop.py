"""An MCP client on the official Python SDK (mcp 2.x, pinned in requirements.txt) against a
cancelkit server over Streamable HTTP. Driven by tests/tests/python_sdk_http/, which starts
the server (`mcp_server --http 127.0.0.1:0`) and passes its URL and the file its stderr goes to.

    python http_cancel_interop.py URL SERVER_LOG SCENARIO

SCENARIO is one of
  discover        connect with ClientSession.discover() (2026-07-28: no handshake, no session,
                  every request stamped in params._meta), list the tools, call `echo`, cancel a
                  `sleep {seconds: 30}` call after ~300 ms, call `echo` again, then call
                  `ask_client {timeout_ms}` (a 2026-07-28 server sends the client no requests)
  initialize      the same after ClientSession.initialize() (2025-11-25: a session named by
                  Mcp-Session-Id), without `ask_client`; after the cancel it also calls a tool the
                  server does not have (answered with a JSON-RPC error on the call's event
                  stream), and the second `echo` waits until RESUME_WAIT_S after the cancel: the
                  SDK resumes the cancelled call's stream (it ended without a response)
  server_cancels  initialize(), then call `ask_client {timeout_ms}`: the server sends
                  sampling/createMessage, our sampling callback sleeps 30 s, the server gives up
                  and sends notifications/cancelled for it

Tools are called with ClientSession.send_request(CallToolRequest, CallToolResult), as in
cancel_interop.py (call_tool minus its output-schema check, which lists the tools first).

The script taps the SDK's HTTP client (an httpx2 transport wrapped around the default one), so
what it reports is what crossed the wire: every HTTP exchange with the MCP headers it carried,
the JSON-RPC message it POSTed, the status and headers of the answer, and the answer's JSON body
or each of its SSE events as it arrived, and how the answer ended: read to its end, or closed by
the client before that (at 2026-07-28 that close is the cancel). What the client reports is
recorded too: every record of the `mcp`, `httpx2` and `httpx` loggers (and `py.warnings`), at
every level; the SDK reports a failed resumption at DEBUG, gives up on one at DEBUG, and would
warn of trouble at WARNING or above. An exception that escapes fails the run.

Prints JSON lines, each an object with an "event" member; the last two are {"event": "log",
"counts": {level: n}, "records": [{ms, level, logger, message, exc?}], "closeStartedMs"} and
{"event": "wire", "exchanges": [...]}.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

SLEEP_CANCEL_AFTER_S = 0.3
ASK_CLIENT_TIMEOUT_MS = 500
CALLBACK_SLEEP_S = 30.0
STOPPED_WAIT_S = 5.0
LATE_RESPONSE_WAIT_S = 0.3
WHOLE_RUN_LIMIT_S = 40.0
# How long the session stays open after the cancel (`initialize`): the SDK resumes the call's
# stream (GET with Last-Event-ID) about 1.0 s after it ended without a response and, if that
# fails, 1.0 s later (2 attempts); a resumed stream that ends again without a response starts
# that over (about once a second, forever): 3.5 s holds both attempts and, when it loops, a
# third GET.
RESUME_WAIT_S = 3.5
UNKNOWN_TOOL = "no_such_tool"
# The loggers whose records are reported (the SDK's and its HTTP client's; captured warnings).
TAPPED_LOGGERS = ("mcp", "httpx2", "httpx", "py.warnings")

# The request headers worth reporting (lower case, as httpx2 keeps them).
TAPPED_REQUEST_HEADERS = (
    "accept",
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "last-event-id",
)
TAPPED_RESPONSE_HEADERS = ("content-type", "mcp-session-id", "allow")

T0 = time.monotonic()


def ms_since(start: float) -> float:
    return round((time.monotonic() - start) * 1000, 1)


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def parse_json(raw: bytes | str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return {"unparsed": raw if isinstance(raw, str) else raw.decode("utf-8", "replace")}


class LogTap(logging.Handler):
    """Records every log record of TAPPED_LOGGERS, at every level."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[dict[str, Any]] = []
        self.close_started_ms: float | None = None

    def emit(self, record: logging.LogRecord) -> None:
        entry: dict[str, Any] = {
            "ms": ms_since(T0),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage()[:300],
        }
        if record.exc_info and record.exc_info[1] is not None:
            entry["exc"] = repr(record.exc_info[1])[:300]
        self.records.append(entry)

    def install(self) -> None:
        logging.captureWarnings(True)
        for name in TAPPED_LOGGERS:
            logger = logging.getLogger(name)
            logger.setLevel(logging.DEBUG)
            logger.addHandler(self)

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for entry in self.records:
            counts[entry["level"]] = counts.get(entry["level"], 0) + 1
        return counts


class SseTap:
    """Splits an event stream into events as its bytes arrive (the SSE line rules: LF, CR or
    CRLF line ends; `:` comments; a blank line ends an event)."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record
        self.buffer = ""
        self.fields: dict[str, str] = {}
        self.data: list[str] = []

    def feed(self, chunk: bytes) -> None:
        self.buffer += chunk.decode("utf-8", "replace")
        while True:
            match = re.search(r"\r\n|\r|\n", self.buffer)
            # A lone CR at the very end may be the first half of a CRLF.
            if match is None or (match.group() == "\r" and match.end() == len(self.buffer)):
                return
            line, self.buffer = self.buffer[: match.start()], self.buffer[match.end() :]
            self.line(line)

    def line(self, line: str) -> None:
        if line == "":
            self.dispatch()
            return
        if line.startswith(":"):
            self.record["comments"] += 1
            return
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self.data.append(value)
        elif name in ("id", "event", "retry"):
            self.fields[name] = value

    def dispatch(self) -> None:
        if not self.fields and not self.data:
            return
        event: dict[str, Any] = {"ms": ms_since(T0), **self.fields}
        if self.data:
            text = "\n".join(self.data)
            # A priming event's data is empty: nothing to parse.
            event["data"] = parse_json(text) if text else ""
        self.record["events"].append(event)
        self.fields, self.data = {}, []


class TapStream(httpx2.AsyncByteStream):
    """A response body that records what the client read of it, and whether the client closed
    it before its end."""

    def __init__(self, inner: httpx2.AsyncByteStream, record: dict[str, Any]) -> None:
        self.inner = inner
        self.record = record
        self.sse = SseTap(record) if record["events"] is not None else None
        self.body = bytearray()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.inner:
                if self.sse is not None:
                    self.sse.feed(chunk)
                else:
                    self.body.extend(chunk)
                yield chunk
        except anyio.get_cancelled_exc_class():
            # The task reading the body was cancelled: the SDK aborting the request's POST.
            self.end("cancelled by the client")
            raise
        except GeneratorExit:
            self.end("closed by the client")
            raise
        except BaseException as error:
            self.end(f"error: {error!r}")
            raise
        self.end("eof")

    def end(self, how: str) -> None:
        if self.record["end"] is not None:
            return
        self.record.update(end=how, endMs=ms_since(T0))
        if self.sse is None and self.body:
            self.record["json"] = parse_json(bytes(self.body))

    async def aclose(self) -> None:
        # The client is done with the body: before its end (then this is how it ended), or
        # after it (then `end` says so already).
        self.end("closed by the client")
        self.record["closedMs"] = ms_since(T0)
        await self.inner.aclose()


class TapTransport(httpx2.AsyncBaseTransport):
    """The SDK's HTTP client goes through this: every exchange is recorded."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.exchanges: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        record: dict[str, Any] = {
            "n": len(self.exchanges),
            "ms": ms_since(T0),
            "method": request.method,
            "headers": {k: request.headers[k] for k in TAPPED_REQUEST_HEADERS if k in request.headers},
            "body": parse_json(body) if body else None,
            "status": None,
            "responseHeaders": {},
            "events": None,
            "comments": 0,
            "json": None,
            "end": None,
            "closedMs": None,
        }
        self.exchanges.append(record)
        try:
            response = await self.inner.handle_async_request(request)
        except BaseException as error:
            record["end"] = f"no response: {error!r}"
            raise
        record["status"] = response.status_code
        record["responseHeaders"] = {
            k: response.headers[k] for k in TAPPED_RESPONSE_HEADERS if k in response.headers
        }
        if response.headers.get("content-type", "").lower().startswith("text/event-stream"):
            record["events"] = []
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=TapStream(response.stream, record),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()

    def posted(self, method: str) -> list[dict[str, Any]]:
        """The POSTs of JSON-RPC messages with this method."""
        return [
            e
            for e in self.exchanges
            if e["method"] == "POST" and isinstance(e["body"], dict) and e["body"].get("method") == method
        ]


def read_log(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


async def wait_for_log(path: str, pattern: str, limit_s: float) -> tuple[float | None, str | None]:
    """Polls the server's stderr log for `pattern` (a regex): the ms it took and the line, or
    (None, None)."""
    start = time.monotonic()
    regex = re.compile(pattern)
    while time.monotonic() - start < limit_s:
        for line in read_log(path).splitlines():
            if regex.search(line):
                return ms_since(start), line
        await anyio.sleep(0.002)
    return None, None


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


async def unknown_tool(session: ClientSession) -> None:
    """Calls a tool the server does not have: a JSON-RPC error answers it."""
    outcome: dict[str, Any]
    try:
        result = await call_tool(session, UNKNOWN_TOOL, {})
        outcome = {"state": "completed", "isError": result.is_error}
    except Exception as error:  # the error response
        code = getattr(getattr(error, "error", None), "code", None)
        outcome = {"state": "error", "code": code, "error": repr(error)}
    emit("unknown_tool", name=UNKNOWN_TOOL, **outcome, answeredAtMs=ms_since(T0))


async def cancel_a_sleep(session: ClientSession, tap: TapTransport, log_path: str, scenario: str) -> None:
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
        cancelled_at_ms = ms_since(T0)
        # The user pressing stop: cancel the scope the call awaits in.
        tg.cancel_scope.cancel()
    sleep_posts = [e for e in tap.posted("tools/call") if e["body"].get("params", {}).get("name") == "sleep"]
    request_id = sleep_posts[0]["body"]["id"] if sleep_posts else None
    # In a session the server knows the request by the client's id; at 2026-07-28 by an id of
    # its own (one peer serves every client), so there any request id will do: this run has
    # one sleep.
    logged_id = re.escape(json.dumps(request_id)) if scenario != "discover" else r"\S+"
    stopped_ms, stopped_line = await wait_for_log(
        log_path, rf"sleep tool stopped request_id={logged_id}(\s|$)", STOPPED_WAIT_S
    )
    emit(
        "sleep",
        requestId=request_id,
        outcome=outcome["state"],
        detail=outcome.get("text") or outcome.get("error"),
        cancelledAfterMs=round((cancelled_at - started) * 1000, 1),
        cancelledAtMs=cancelled_at_ms,
        callReturnedAfterCancelMs=ms_since(cancelled_at),
        cancelToStoppedMs=stopped_ms,
        stoppedLine=stopped_line,
    )

    if scenario == "initialize":
        await unknown_tool(session)
        # Let the SDK resume the cancelled call's stream (and a late response show up).
        await anyio.sleep(max(0.0, cancelled_at + RESUME_WAIT_S - time.monotonic()))
    echo = await call_tool(session, "echo", {"text": "still serving"})
    emit("echo", text=text_of(echo), isError=echo.is_error)
    if scenario != "initialize":
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
            model="python-sdk-http-interop",
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


async def main(url: str, log_path: str, scenario: str) -> None:
    if scenario not in ("discover", "initialize", "server_cancels"):
        raise SystemExit(f"unknown scenario {scenario!r}")
    tap = TapTransport()
    logs = LogTap()
    logs.install()
    callback, seen = sampling_recorder()
    try:
        with anyio.fail_after(WHOLE_RUN_LIMIT_S):
            # The SDK's default timeouts (create_mcp_http_client), through the tap.
            timeout = httpx2.Timeout(30.0, read=300.0)
            async with httpx2.AsyncClient(transport=tap, timeout=timeout) as http:
                async with streamable_http_client(url, http_client=http) as (read, write):
                    async with ClientSession(
                        read,
                        write,
                        sampling_callback=callback if scenario != "initialize" else None,
                    ) as session:
                        await connect(session, scenario)
                        await list_tools(session)
                        if scenario == "server_cancels":
                            await server_cancels(session, seen)
                        else:
                            await cancel_a_sleep(session, tap, log_path, scenario)
                        if scenario == "discover":
                            await ask_client(session)
                            await anyio.sleep(LATE_RESPONSE_WAIT_S)
                            emit("sampling_callbacks", calls=seen["calls"])
                        # Leaving the blocks ends the session (DELETE) and the client.
                        logs.close_started_ms = ms_since(T0)
    finally:
        emit("log", counts=logs.counts(), records=logs.records, closeStartedMs=logs.close_started_ms)
        emit("wire", exchanges=tap.exchanges)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(f"usage: {sys.argv[0]} URL SERVER_LOG SCENARIO")
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
