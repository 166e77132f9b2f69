"""An MCP client on the official Python SDK (mcp 2.x, pinned in requirements.txt) against the
cancelkit gateway's `/mcp` endpoint over Streamable HTTP. Driven by gateway/tests/sdk_python.rs.

    python gateway_client.py URL TOKEN ERA [TOOLS]

ERA is `discover` (MCP 2026-07-28: ClientSession.discover(), no session, every request stamped
in params._meta; a cancel closes the request's POST stream) or `initialize` (2025-11-25:
ClientSession.initialize(), an Mcp-Session-Id session; a cancel is a POSTed
notifications/cancelled). The SDK's streamable HTTP transport picks the era from what the
session negotiated: after discover() it aborts the cancelled request's POST and swallows the
notification, after initialize() it POSTs the notification.

TOOLS (JSON, optional) names the upstream's tools the script calls, as the gateway exposes them:
`{"slow": {"name", "args"}, "progress": {"name", "args"}, "fast": {"name", "args"}, "settleMs",
"burst", "resumeWaitMs"}`
— the slow call (long, with progress), the same tool for a short call with progress, a fast
call whose string arguments have `{text}` replaced by the text of each call, how long a slow
call runs upstream when nothing stops it (the script waits that long after the API-cancelled
call was sent before its `wire`, so a late result or progress of a cancelled call has every
chance to show), how many calls the abort burst makes (60 unless given), and how long the
script stays in a session after its last POST stream ended, for the SDK's resumes (see
RESUME_WAIT_MS). Without it: the demo upstream's `demo-sleep {seconds: 30}`,
`demo-sleep {seconds: 0.5}`, `demo-echo {text}`, no settling.

The script, in order (names below are the demo's):
  1. connects (`connected`), lists the tools (`list_tools`), calls `demo-echo` (`echo`);
  2. calls `demo-sleep {seconds: 0.5}` with a progress callback (`progress`);
  3. client abort: calls `demo-sleep {seconds: 30}` with a progress callback and, at its first
     progress (the upstream tool is running), cancels the anyio scope the call awaits in
     (`client_abort`); then waits for a line on stdin, so the test can check the gateway and
     the upstream before it goes on;
  4. API cancel: calls `demo-sleep {seconds: 30}` the same way and, at its first progress,
     prints `api_cancel_ready` with the request id; the test cancels it through the gateway's
     cancellation API; the call's outcome is `api_cancel` (an MCPError, we expect -32800);
     then waits on stdin again;
  5. calls `demo-echo` again (`echo`);
  6. aborts a burst of `demo-sleep {seconds: 30}` calls, each 1 to 5 ms after it is sent, so
     that some cancels race their calls (`abort_burst`); then waits on stdin again;
  7. waits for late messages and the SDK's resumes, calls `demo-echo` once more (`echo`), and
     prints `wire`: every HTTP exchange with the gateway (when sent, `startedAt`; a GET's
     `lastEventId`: a resume), with every JSON-RPC message the gateway sent on each response
     body (read from the raw bytes, below the SDK), when each arrived (`messageTimes`, Unix
     ms), its SSE event ids (`eventIds`), its `Allow`, and how and when each body ended
     (`ended`, `endedAt`); and
     what the SDK logged at WARNING or above (`transportErrors`).

Times named `...At` are Unix epoch milliseconds (the test compares them with its own clock):
`abortedAt` (the moment the client cancelled), each progress callback's time (`progressTimes`).

Prints JSON lines, each an object with an "event" member. Everything runs under a hard time
limit; stdin closing early ends the script.
"""

from __future__ import annotations

import codecs
import json
import logging
import sys
import time
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

WHOLE_RUN_LIMIT_S = 40.0
CALL_LIMIT_S = 15.0
LATE_MESSAGE_WAIT_S = 0.3
PROGRESS_SLEEP_S = 0.5
SLOW_SLEEP_S = 30
ABORT_BURST = 60
# How long the script stays in a session after its last POST stream ended: the SDK resumes a
# stream that ended without a response (GET, Last-Event-ID) at +1 s, and at +2 s if that failed.
RESUME_WAIT_MS = 3_000
POST_END_WAIT_S = 1.0  # at most, for the POST streams to end (one still open: from then)

T0 = time.monotonic()

DEMO_TOOLS: dict[str, Any] = {
    "slow": {"name": "demo-sleep", "args": {"seconds": SLOW_SLEEP_S}},
    "progress": {"name": "demo-sleep", "args": {"seconds": PROGRESS_SLEEP_S}},
    "fast": {"name": "demo-echo", "args": {"text": "{text}"}},
    "settleMs": 0,
    "resumeWaitMs": RESUME_WAIT_MS,
}
TOOLS: dict[str, Any] = DEMO_TOOLS
# When the aborted and the API-cancelled slow calls were sent (Unix ms), for the settling wait.
SLOW_SENT: list[float] = []


def ms() -> float:
    return round((time.monotonic() - T0) * 1000, 1)


def now_ms() -> float:
    """Unix epoch milliseconds: the test's clock too."""
    return round(time.time() * 1000, 1)


class Collect(logging.Handler):
    """What the SDK logs at WARNING or above (its transport's errors), for the report."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(f"{record.name}: {record.getMessage()}"[:500])


ERRORS = Collect()


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, "ms": ms(), **fields}), flush=True)


class Exchange:
    """One HTTP request to the gateway and what came back on its body, byte for byte."""

    def __init__(self, request: httpx2.Request) -> None:
        self.method = request.method
        self.started_ms = ms()
        self.started_at = now_ms()
        body = request.content if request.method == "POST" else b""
        try:
            self.request = json.loads(body) if body else None
        except ValueError:
            self.request = body.decode("utf-8", "replace")
        self.session = request.headers.get("mcp-session-id")
        self.last_event_id = request.headers.get("last-event-id")
        self.status: int | None = None
        self.content_type: str | None = None
        self.allow: str | None = None
        self.body = bytearray()
        # "eof": the gateway ended the body; "client": the client closed it first.
        self.ended: str | None = None
        self.ended_ms: float | None = None
        self.ended_at: float | None = None
        # The SSE events parsed as their bytes arrive, each with its arrival time.
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.pending = ""
        self.data: list[str] = []
        self.event_id: str | None = None
        self.event_ids: list[str] = []
        self.events: list[Any] = []
        self.event_times: list[float] = []
        self.last_chunk_at: float | None = None

    def feed(self, chunk: bytes) -> None:
        """A chunk of the body, as it arrives: its SSE events, and their ids (a resume names one)."""
        self.body.extend(chunk)
        self.last_chunk_at = now_ms()
        self.pending += self.decoder.decode(chunk)
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            line = line.removesuffix("\r")
            if line == "":
                if self.event_id is not None:
                    self.event_ids.append(self.event_id)
                    self.event_id = None
                # An event whose data is empty (the priming event of a resumable stream) is
                # not dispatched, as the SSE standard says.
                joined = "\n".join(self.data)
                if joined:
                    try:
                        self.events.append(json.loads(joined))
                    except ValueError:
                        self.events.append({"unparsed": joined})
                    self.event_times.append(self.last_chunk_at)
                self.data = []
            elif line.startswith("data:"):
                self.data.append(line[5:].removeprefix(" "))
            elif line.startswith("id:"):
                self.event_id = line[3:].removeprefix(" ")
        # An event cut off before its blank line never reached the client as a message.

    def messages(self) -> tuple[list[Any], list[float | None]]:
        """The JSON-RPC messages of the body (each SSE event's data, or the JSON body), and when
        each arrived."""
        if not (self.content_type or "").startswith("text/event-stream"):
            text = self.body.decode("utf-8", "replace")
            try:
                found = [json.loads(text)] if text.strip() else []
            except ValueError:
                found = [{"unparsed": text}]
            return found, [self.last_chunk_at for _ in found]
        return self.events, self.event_times

    def report(self) -> dict[str, Any]:
        messages, times = self.messages()
        return {
            "method": self.method,
            "request": self.request,
            "session": self.session,
            "lastEventId": self.last_event_id,
            "status": self.status,
            "contentType": self.content_type,
            "allow": self.allow,
            "messages": messages,
            "messageTimes": times,
            "eventIds": self.event_ids,
            "ended": self.ended,
            "startedMs": self.started_ms,
            "startedAt": self.started_at,
            "endedMs": self.ended_ms,
            "endedAt": self.ended_at,
        }


class TeeStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, exchange: Exchange) -> None:
        self.inner = inner
        self.exchange = exchange

    async def __aiter__(self):  # type: ignore[override]
        async for chunk in self.inner:
            self.exchange.feed(chunk)
            yield chunk
        if self.exchange.ended is None:
            self.exchange.ended = "eof"
            self.exchange.ended_ms = ms()
            self.exchange.ended_at = now_ms()

    async def aclose(self) -> None:
        if self.exchange.ended is None:
            self.exchange.ended = "client"
            self.exchange.ended_ms = ms()
            self.exchange.ended_at = now_ms()
        await self.inner.aclose()


class TapTransport(httpx2.AsyncBaseTransport):
    """Records every exchange below the SDK (what the gateway really sent, not what the SDK's
    transport made of it: it synthesizes errors for streams that end without a response)."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport(trust_env=False)
        self.exchanges: list[Exchange] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        exchange = Exchange(request)
        self.exchanges.append(exchange)
        response = await self.inner.handle_async_request(request)
        exchange.status = response.status_code
        exchange.content_type = response.headers.get("content-type")
        exchange.allow = response.headers.get("allow")
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=TeeStream(response.stream, exchange),
            request=request,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()

    def last_call(self, tool: str) -> Any:
        """The id of the latest tools/call of `tool` POSTed."""
        for exchange in reversed(self.exchanges):
            request = exchange.request
            if (
                isinstance(request, dict)
                and request.get("method") == "tools/call"
                and request.get("params", {}).get("name") == tool
            ):
                return request.get("id")
        return None


def text_of(result: types.CallToolResult) -> str | None:
    for block in result.content:
        if isinstance(block, types.TextContent):
            return block.text
    return None


def error_of(error: BaseException) -> dict[str, Any]:
    if isinstance(error, MCPError):
        return {"code": error.code, "message": error.message, "data": error.data}
    return {"type": type(error).__name__, "repr": repr(error)}


async def wait_for_go(step: str) -> None:
    emit("waiting", step=step)
    line = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
    if not line:
        raise SystemExit(f"stdin closed while waiting after {step}")


async def connect(session: ClientSession, era: str) -> None:
    if era == "discover":
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


def with_text(args: Any, text: str) -> Any:
    """`args` with `{text}` in its strings replaced by `text`."""
    if isinstance(args, str):
        return args.replace("{text}", text)
    if isinstance(args, dict):
        return {key: with_text(value, text) for key, value in args.items()}
    if isinstance(args, list):
        return [with_text(value, text) for value in args]
    return args


async def echo(session: ClientSession, text: str) -> None:
    fast = TOOLS["fast"]
    try:
        result = await session.call_tool(fast["name"], with_text(fast["args"], text))
        emit("echo", text=text_of(result), isError=result.is_error, meta=result.meta)
    except Exception as error:
        emit("echo", error=error_of(error))


async def progress_call(session: ClientSession) -> None:
    seen: list[dict[str, Any]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append({"progress": progress, "total": total, "message": message})

    try:
        with anyio.fail_after(CALL_LIMIT_S):
            call = TOOLS["progress"]
            result = await session.call_tool(call["name"], call["args"], progress_callback=on_progress)
        emit("progress", updates=seen, text=text_of(result), isError=result.is_error)
    except Exception as error:
        emit("progress", updates=seen, error=error_of(error))


async def slow_call(session: ClientSession, first_progress: anyio.Event, outcome: dict[str, Any]) -> None:
    """The slow call (a 30 s demo-sleep); `first_progress` is set when the upstream reports
    running."""

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        outcome["progress"] = outcome.get("progress", 0) + 1
        outcome.setdefault("progressTimes", []).append(now_ms())
        first_progress.set()

    outcome["state"] = "running"
    slow = TOOLS["slow"]
    SLOW_SENT.append(now_ms())
    try:
        result = await session.call_tool(slow["name"], slow["args"], progress_callback=on_progress)
        outcome.update(state="completed", text=text_of(result))
    except anyio.get_cancelled_exc_class():
        outcome["state"] = "cancelled"
        raise
    except Exception as error:
        outcome.update(state="rejected", error=error_of(error))
    finally:
        first_progress.set()


async def client_abort(session: ClientSession, tap: TapTransport) -> None:
    first_progress = anyio.Event()
    outcome: dict[str, Any] = {}
    started = time.monotonic()
    with anyio.fail_after(CALL_LIMIT_S):
        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_call, session, first_progress, outcome)
            await first_progress.wait()
            # The user pressing stop: cancel the scope the call awaits in.
            outcome["abortedAt"] = now_ms()
            tg.cancel_scope.cancel()
    emit(
        "client_abort",
        requestId=tap.last_call(TOOLS["slow"]["name"]),
        outcome=outcome.get("state"),
        detail=outcome.get("text") or outcome.get("error"),
        progressBeforeAbort=outcome.get("progress", 0),
        progressTimes=outcome.get("progressTimes", []),
        abortedAt=outcome.get("abortedAt"),
        abortedAfterMs=round((time.monotonic() - started) * 1000, 1),
    )


async def api_cancel(session: ClientSession, tap: TapTransport) -> None:
    first_progress = anyio.Event()
    outcome: dict[str, Any] = {}
    started = time.monotonic()
    with anyio.fail_after(CALL_LIMIT_S):
        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_call, session, first_progress, outcome)
            await first_progress.wait()
            if outcome.get("state") == "running":
                emit("api_cancel_ready", requestId=tap.last_call(TOOLS["slow"]["name"]))
    emit(
        "api_cancel",
        requestId=tap.last_call(TOOLS["slow"]["name"]),
        outcome=outcome.get("state"),
        error=outcome.get("error"),
        text=outcome.get("text"),
        progressTimes=outcome.get("progressTimes", []),
        afterMs=round((time.monotonic() - started) * 1000, 1),
    )


async def abort_burst(session: ClientSession, tap: TapTransport) -> None:
    """Calls aborted right after they are sent (1 to 5 ms), so that some cancels race their
    calls: every run that starts must still end cancelled."""
    first = len(tap.exchanges)
    outcomes: dict[str, int] = {}
    burst = TOOLS.get("burst", ABORT_BURST)
    for i in range(burst):
        state = "rejected"
        with anyio.move_on_after(0.001 * (1 + i % 5)) as scope:
            try:
                await session.call_tool(TOOLS["slow"]["name"], TOOLS["slow"]["args"])
                state = "completed"
            except Exception:
                state = "rejected"
        if scope.cancelled_caught:
            state = "cancelled"
        outcomes[state] = outcomes.get(state, 0) + 1
    ids = [
        e.request.get("id")
        for e in tap.exchanges[first:]
        if isinstance(e.request, dict) and e.request.get("method") == "tools/call"
    ]
    emit("abort_burst", calls=burst, outcomes=outcomes, ids=ids)


async def settle(tap: TapTransport, era: str) -> None:
    """Gives a late message of a cancelled call every chance to arrive (past the end the slow
    calls would have had upstream, had nothing stopped them) and, in a session, the SDK every
    chance to resume the streams that ended without a response (RESUME_WAIT_MS past the last POST
    stream's end; a cancelled call's ends a moment after the SDK gave up on it)."""
    until = max(now_ms() + LATE_MESSAGE_WAIT_S * 1000, max(SLOW_SENT, default=0) + TOOLS["settleMs"])
    if era == "initialize":
        posts = [e for e in tap.exchanges if e.method == "POST"]
        with anyio.move_on_after(POST_END_WAIT_S):
            while any(e.ended_at is None for e in posts):
                await anyio.sleep(0.01)
        last_end = max((e.ended_at or now_ms() for e in posts), default=0)
        until = max(until, last_end + TOOLS["resumeWaitMs"])
    while now_ms() < until:  # the wall clock's end, not the event loop's
        await anyio.sleep((until - now_ms()) / 1000)


async def run(url: str, token: str, era: str) -> None:
    tap = TapTransport()
    http = httpx2.AsyncClient(
        headers={"authorization": f"Bearer {token}"},
        transport=tap,
        trust_env=False,
        timeout=httpx2.Timeout(30.0, read=300.0),
    )
    try:
        with anyio.fail_after(WHOLE_RUN_LIMIT_S):
            async with http, streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await connect(session, era)
                    try:
                        listed = await session.list_tools()
                        emit("list_tools", tools=[tool.name for tool in listed.tools])
                    except Exception as error:
                        emit("list_tools", error=error_of(error))
                    await echo(session, "hello")
                    await progress_call(session)
                    await client_abort(session, tap)
                    await wait_for_go("client_abort")
                    await api_cancel(session, tap)
                    await wait_for_go("api_cancel")
                    await echo(session, "still serving")
                    await abort_burst(session, tap)
                    await wait_for_go("abort_burst")
                    await settle(tap, era)
                    await echo(session, "after the resumes")
    finally:
        emit(
            "wire",
            exchanges=[e.report() for e in tap.exchanges],
            transportErrors=ERRORS.records,
        )


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5) or sys.argv[3] not in ("discover", "initialize"):
        raise SystemExit(f"usage: {sys.argv[0]} URL TOKEN discover|initialize [TOOLS]")
    if len(sys.argv) == 5:
        TOOLS = {**DEMO_TOOLS, **json.loads(sys.argv[4])}
    logging.getLogger().addHandler(ERRORS)
    anyio.run(run, sys.argv[1], sys.argv[2], sys.argv[3])
