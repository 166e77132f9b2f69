// An MCP server on the official TypeScript SDK (pinned in package.json), over stdio, for
// `cancelkit check mcp` in cli/tests/check_peers.rs.
//
//     node check_server.mjs [--tasks]
//
// Built with the SDK's high-level `McpServer` API, as a TypeScript developer would write it: a
// slow tool `sleep {seconds}` and a fast tool `echo {text}`. The SDK decides what a cancel does;
// the sleep does not watch the request's abort signal, as most tools do not.
//
// With `--tasks`, `sleep` is a task tool of the SDK's experimental tasks API (2025-11-25 tasks:
// `taskSupport: "optional"`, an in-memory task store, `capabilities.tasks` with `cancel` and
// task-augmented `tools/call`): a task-augmented call gets a task, a plain one is answered when
// its task completes (the SDK polls the store every 50 ms), and `tasks/cancel` is the SDK's own.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { InMemoryTaskStore } from "@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js";
import { z } from "zod";

const tasks = process.argv.includes("--tasks");
const info = { name: "cancelkit-check-ts-peer", version: "1.0.0" };
const server = tasks
  ? new McpServer(info, {
      capabilities: { tasks: { cancel: {}, requests: { tools: { call: {} } } } },
      taskStore: new InMemoryTaskStore(),
    })
  : new McpServer(info);

const sleep = {
  description: "Sleeps for the given number of seconds.",
  inputSchema: { seconds: z.number().min(0).max(3600) },
};
const slept = (seconds) => ({ content: [{ type: "text", text: `slept ${seconds}s` }] });

if (tasks) {
  server.experimental.tasks.registerToolTask(
    "sleep",
    { ...sleep, execution: { taskSupport: "optional" } },
    {
      async createTask({ seconds }, { taskStore, taskRequestedTtl }) {
        const task = await taskStore.createTask({ ttl: taskRequestedTtl, pollInterval: 50 });
        setTimeout(() => {
          // a cancelled task is terminal: the store refuses its result
          taskStore.storeTaskResult(task.taskId, "completed", slept(seconds)).catch(() => {});
        }, seconds * 1000);
        return { task };
      },
      getTask: (_args, { taskId, taskStore }) => taskStore.getTask(taskId),
      getTaskResult: (_args, { taskId, taskStore }) => taskStore.getTaskResult(taskId),
    },
  );
} else {
  server.registerTool("sleep", sleep, async ({ seconds }) => {
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    return slept(seconds);
  });
}

server.registerTool(
  "echo",
  {
    description: "Returns its text.",
    inputSchema: { text: z.string() },
  },
  async ({ text }) => ({ content: [{ type: "text", text }] }),
);

await server.connect(new StdioServerTransport());
