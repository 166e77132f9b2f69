// An MCP client built on the official TypeScript SDK. It starts the server given on the command
// line over stdio, calls its `sleep` tool, aborts the call with an AbortController, then calls
// `echo`, and prints one JSON line describing what it saw on the wire.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [server] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: server,
  args: [],
  env: { ...process.env, RUST_LOG: "info" },
  stderr: "pipe",
});
let serverLog = "";
transport.stderr?.on("data", (chunk) => { serverLog += chunk.toString(); });

const client = new Client({ name: "cancelkit-ts-interop", version: "1.0.0" });
await client.connect(transport);

// Record every message on the wire, both ways.
const sent = [];
const received = [];
const send = transport.send.bind(transport);
transport.send = async (message, options) => { sent.push(message); return send(message, options); };
const onmessage = transport.onmessage;
transport.onmessage = (message, extra) => { received.push(message); onmessage?.(message, extra); };

const controller = new AbortController();
const started = Date.now();
const call = client.callTool({ name: "sleep", arguments: { seconds: 30 } }, undefined, { signal: controller.signal });
setTimeout(() => controller.abort("user pressed stop"), 500);
let outcome;
try {
  await call;
  outcome = "completed";
} catch (error) {
  outcome = `rejected: ${error?.code ?? ""} ${error?.message ?? error}`;
}
const abortedAfterMs = Date.now() - started;
const sleepRequest = sent.find((m) => m.method === "tools/call" && m.params?.name === "sleep");

const echo = await client.callTool({ name: "echo", arguments: { text: "still serving" } });
// Give a late response to the aborted call every chance to show up.
await new Promise((resolve) => setTimeout(resolve, 300));
await client.close();

console.log(JSON.stringify({
  outcome,
  abortedAfterMs,
  sleepRequestId: sleepRequest?.id ?? null,
  cancelSent: sent.filter((m) => m.method === "notifications/cancelled"),
  responsesToSleep: received.filter((m) => m.id !== undefined && m.id === sleepRequest?.id && m.method === undefined),
  echo: echo.content?.[0]?.text ?? null,
  serverLog,
}));
