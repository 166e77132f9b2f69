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

Transports:

- no argument: stdio (newline-delimited JSON-RPC on stdin/stdout, logs on stderr);
- ``--http PORT``: Streamable HTTP on ``127.0.0.1:PORT`` only (never another interface), endpoint
  path ``/mcp`` (``http://127.0.0.1:PORT/mcp``). FastMCP guards the Host and Origin headers of a
  loopback-bound server, so clients must address it as ``127.0.0.1`` or ``localhost``.
"""

import argparse
import asyncio

from fastmcp import Context, FastMCP
from fastmcp_tasks import TasksExtension

mcp = FastMCP("cancelkit-fastmcp-peer")
mcp.add_extension(TasksExtension())

PROGRESS_EVERY_MS = 200


async def _wait(delay_ms: int, ctx: Context) -> str:
    waited = 0
    while waited < delay_ms:
        step = min(PROGRESS_EVERY_MS, delay_ms - waited)
        await asyncio.sleep(step / 1000)
        waited += step
        await ctx.report_progress(progress=waited, total=delay_ms)
    return f"waited {delay_ms} ms"


@mcp.tool
async def wait(delay_ms: int, ctx: Context) -> str:
    """Wait delay_ms milliseconds, reporting progress every 200 ms."""
    return await _wait(delay_ms, ctx)


@mcp.tool(task=True)
async def wait_task(delay_ms: int, ctx: Context) -> str:
    """Wait delay_ms milliseconds, reporting progress every 200 ms; may run as a background task."""
    return await _wait(delay_ms, ctx)


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
