"""A small FastMCP 4.1.2 server for cancelkit's third-party interop tests.

Written as a FastMCP user would write it, with FastMCP's own API only. Tools:

- ``wait(delay_ms: int) -> str``: sleeps ``delay_ms`` milliseconds, reporting progress through
  ``ctx.report_progress`` every 200 ms (``progress`` is the milliseconds waited so far,
  ``total`` is ``delay_ms``); returns ``"waited <delay_ms> ms"``.
- ``wait_task(delay_ms: int) -> str``: the same body declared ``task=True`` (task mode
  ``optional``), served by the ``fastmcp-tasks`` extension (``io.modelcontextprotocol/tasks``,
  SEP-2663, in-memory Docket backend). Without a task opt-in it runs in the foreground like
  ``wait``; the tasks extension only exists at protocol revision 2026-07-28.
- ``add(a: int, b: int) -> int``: returns ``a + b`` at once.

Cancellation log: the waiting tools write one line on stderr when they start, finish, or are
cancelled (the request's ``CancelledError``: FastMCP cancels a tool on ``notifications/cancelled``
and, at 2026-07-28, when the client closes the call's response stream), e.g.
``fastmcp-server: cancelled tools/call wait(delay_ms=30000) (request id 3) after 412 ms`` —
what gateway/tests/support/sdk/third_party.rs reads to see the tool really stopped.

Transports:

- no argument: stdio (newline-delimited JSON-RPC on stdin/stdout, logs on stderr);
- ``--http PORT``: Streamable HTTP on ``127.0.0.1:PORT`` only (never another interface), endpoint
  path ``/mcp`` (``http://127.0.0.1:PORT/mcp``). FastMCP guards the Host and Origin headers of a
  loopback-bound server, so clients must address it as ``127.0.0.1`` or ``localhost``.
"""

import argparse
import asyncio
import sys
import time

from fastmcp import Context, FastMCP
from fastmcp_tasks import TasksExtension

mcp = FastMCP("cancelkit-fastmcp-peer")
mcp.add_extension(TasksExtension())

PROGRESS_EVERY_MS = 200


def _log(line: str) -> None:
    print(f"fastmcp-server: {line}", file=sys.stderr, flush=True)


def _request_id(ctx: Context) -> str:
    # A background task has no request context; its id is then unknown here.
    try:
        return ctx.request_id
    except RuntimeError:
        return "none"


async def _wait(tool: str, delay_ms: int, ctx: Context) -> str:
    call = f"{tool}(delay_ms={delay_ms}) (request id {_request_id(ctx)})"
    started = time.monotonic()
    _log(f"started tools/call {call}")
    waited = 0
    try:
        while waited < delay_ms:
            step = min(PROGRESS_EVERY_MS, delay_ms - waited)
            await asyncio.sleep(step / 1000)
            waited += step
            await ctx.report_progress(progress=waited, total=delay_ms)
    except asyncio.CancelledError:
        after = round((time.monotonic() - started) * 1000)
        _log(f"cancelled tools/call {call} after {after} ms")
        raise
    _log(f"finished tools/call {call}")
    return f"waited {delay_ms} ms"


@mcp.tool
async def wait(delay_ms: int, ctx: Context) -> str:
    """Wait delay_ms milliseconds, reporting progress every 200 ms."""
    return await _wait("wait", delay_ms, ctx)


@mcp.tool(task=True)
async def wait_task(delay_ms: int, ctx: Context) -> str:
    """Wait delay_ms milliseconds, reporting progress every 200 ms; may run as a background task."""
    return await _wait("wait_task", delay_ms, ctx)


@mcp.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--http",
        type=int,
        metavar="PORT",
        help="serve Streamable HTTP on 127.0.0.1:PORT at /mcp instead of stdio",
    )
    args = parser.parse_args()
    if args.http is None:
        mcp.run(show_banner=False)
    else:
        mcp.run(
            transport="http",
            host="127.0.0.1",
            port=args.http,
            path="/mcp",
            show_banner=False,
        )


if __name__ == "__main__":
    main()
