"""A Streamable HTTP MCP server on the official Python SDK (mcp 2.3.0, `MCPServer` under
uvicorn) for `cancelkit check mcp --url` in cli/tests/check_http.rs.

Binds 127.0.0.1 on a port the OS chooses and prints it as the first line of stdout. Tools:
`sleep {seconds}` (awaits `anyio.sleep`, so the SDK's cancellation stops it) and `echo {text}`.
The SDK serves 2026-07-28 statelessly (a closed response stream cancels the handler) and the
handshake revisions with sessions on the same endpoint. Exits when stdin closes, so it never
outlives the test that started it.
"""

import asyncio
import os
import socket
import sys
import threading

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer

server = MCPServer("cancelkit-check-http", log_level="WARNING")


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleeps for `seconds` (at most 60), unless cancelled."""
    await anyio.sleep(min(max(seconds, 0.0), 60.0))
    return "slept"


@server.tool()
def echo(text: str) -> str:
    """Answers with its text at once."""
    return text


def exit_at_eof() -> None:
    sys.stdin.read()
    os._exit(0)


def main() -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(256)
    print(listener.getsockname()[1], flush=True)
    threading.Thread(target=exit_at_eof, daemon=True).start()
    app = server.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[listener]))


if __name__ == "__main__":
    main()
