"""An MCP server on the official Python SDK (mcp 2.x, pinned in requirements.txt), over stdio,
for `cancelkit check mcp` in cli/tests/check_peers.rs.

    python check_server.py

Built with the SDK's high-level `MCPServer` API and nothing else, as a Python developer would
write it: a slow tool `sleep {seconds}` and a fast tool `echo {text}`. The SDK decides how the
revision is negotiated, what a cancel does, and whether `subscriptions/listen` is offered (its
default: yes); this script adds no cancellation handling of its own.
"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("cancelkit-check-python-peer")


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleeps for the given number of seconds."""
    await anyio.sleep(seconds)
    return f"slept {seconds}s"


@server.tool()
async def echo(text: str) -> str:
    """Returns its text."""
    return text


if __name__ == "__main__":
    server.run("stdio")
