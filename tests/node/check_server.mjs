// An MCP server on the official TypeScript SDK (pinned in package.json), over stdio, for
// `cancelkit check mcp` in cli/tests/check_peers.rs.
//
//     node check_server.mjs
//
// Built with the SDK's high-level `McpServer` API, as a TypeScript developer would write it: a
// slow tool `sleep {seconds}` and a fast tool `echo {text}`. The SDK decides what a cancel does;
// the sleep does not watch the request's abort signal, as most tools do not.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "cancelkit-check-ts-peer", version: "1.0.0" });

server.registerTool(
  "sleep",
  {
    description: "Sleeps for the given number of seconds.",
    inputSchema: { seconds: z.number().min(0).max(3600) },
  },
  async ({ seconds }) => {
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    return { content: [{ type: "text", text: `slept ${seconds}s` }] };
  },
);

server.registerTool(
  "echo",
  {
    description: "Returns its text.",
    inputSchema: { text: z.string() },
  },
  async ({ text }) => ({ content: [{ type: "text", text }] }),
);

await server.connect(new StdioServerTransport());
