// An MCP client on the official TypeScript SDK (pinned in package.json) against the cancelkit
// gateway's `/mcp` endpoint over Streamable HTTP (MCP 2025-11-25: an Mcp-Session-Id session, a
// cancel is a POSTed notifications/cancelled). Driven by gateway/tests/sdk_typescript.rs.
//
//     node gateway_client.mjs URL TOKEN [TOOLS]
//
// TOOLS (JSON, optional) names the upstream's tools the script calls, as the gateway exposes
// them: `{"slow": {name, args}, "progress": {name, args}, "fast": {name, args}, "settleMs",
// "burst", "resumeWaitMs"}` — the slow call (long, with progress), the same tool for a short
// call with progress, a fast call whose string arguments have `{text}` replaced by the text of
// each call, how long a slow call runs upstream when nothing stops it (the script waits that
// long after the API-cancelled call was sent before its `wire`, so a late result or progress of
// a cancelled call has every chance to show), how many calls the abort burst makes (60 unless
// given), and how long the script stays in the session after the last of its POST streams
// ended (RESUME_WAIT_MS unless given): the SDK resumes a stream that ended without a result
// (a cancelled call's, or one answered with an error) with a GET and Last-Event-ID about 1 s
// after its end, and retries a failed resume at about +2.5 s. Without it: the demo upstream's
// `demo-sleep {seconds: 30}`, `demo-sleep {seconds: 0.5}`, `demo-echo {text}`, no settling.
// Names below are the demo's.
//
// In order: connect (`connected`), list the tools (`list_tools`), call `demo-echo` (`echo`);
// call `demo-sleep {seconds: 0.5}` with `onprogress` (`progress`); client abort: call
// `demo-sleep {seconds: 30}` and, at its first progress (the upstream tool is running), abort
// it with an AbortController (`client_abort`), then wait for a line on stdin so the test can
// check the gateway and the upstream; API cancel: call `demo-sleep {seconds: 30}` and, at its
// first progress, print `api_cancel_ready` with the request id, then report how the call ends
// once the test cancelled it through the gateway's API (`api_cancel`), and wait on stdin again;
// call `demo-echo` again (`echo`); abort a burst of `demo-sleep` calls, each 0 to 2 ms after it
// is sent, so that some notifications/cancelled overtake their call (`abort_burst`), and wait
// on stdin again; wait for late messages and for the SDK's resumes (see `resumeWaitMs`), call
// `demo-echo` once more (`echo`: the session still serves), and print `wire`: every HTTP
// exchange with the gateway, with every JSON-RPC message the gateway sent on each response body
// (read below the SDK, from the bytes), when each arrived (`messageTimes`, Unix ms), the SSE
// event ids on it (`eventIds`), how and when each body ended (`ended`, `endedAt`), when it was
// sent (`startedAt`), a GET's `Last-Event-ID` (`lastEventId`: a resume) and the response's
// `Allow` (`allow`);
// with the errors the SDK reported through `onerror` (`transportErrors`). Times named `...At`
// are Unix epoch milliseconds (the test compares them with its own clock): `abortedAt` (the
// moment the client aborted), each progress callback's time (`progressTimes`).
//
// Prints JSON lines, each an object with an "event" member. Everything runs under a hard time
// limit; stdin closing early ends the script.
import readline from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const WHOLE_RUN_LIMIT_MS = 40_000;
const CALL_LIMIT_MS = 15_000;
const LATE_MESSAGE_WAIT_MS = 300;
const ABORT_BURST = 60;
// How long the script stays in the session after its last POST stream ended, unless TOOLS says:
// past the SDK's resumes of a stream that ended without a result (+1 s, a failed one retried at
// +2.5 s), so each shows on the wire.
const RESUME_WAIT_MS = 3_000;
// How long the script waits for its POST streams to end before it counts RESUME_WAIT_MS (one
// still open by then is counted from then).
const POST_END_WAIT_MS = 1_000;

const [url, token, toolsJson] = process.argv.slice(2);
if (!url || !token) {
  console.error("usage: node gateway_client.mjs URL TOKEN [TOOLS]");
  process.exit(2);
}
const TOOLS = {
  slow: { name: "demo-sleep", args: { seconds: 30 } },
  progress: { name: "demo-sleep", args: { seconds: 0.5 } },
  fast: { name: "demo-echo", args: { text: "{text}" } },
  settleMs: 0,
  resumeWaitMs: RESUME_WAIT_MS,
  ...(toolsJson ? JSON.parse(toolsJson) : {}),
};
// When the aborted and the API-cancelled slow calls were sent (Unix ms), for the settling wait.
const slowSent = [];
const transportErrors = [];
const withText = (args, text) => JSON.parse(JSON.stringify(args), (_, v) => (typeof v === "string" ? v.replaceAll("{text}", text) : v));

const t0 = Date.now();
const emit = (event, fields = {}) => console.log(JSON.stringify({ event, ms: Date.now() - t0, ...fields }));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
// The last line, written whole before the process exits (a pipe is written asynchronously:
// exiting at once would cut a long line).
const emitAndExit = (event, fields, code) => {
  process.stdout.write(`${JSON.stringify({ event, ms: Date.now() - t0, ...fields })}\n`, () => process.exit(code));
};

// Every HTTP exchange, recorded below the SDK.
const exchanges = [];
const wire = () => exchanges.map((e) => {
  const [messages, messageTimes] = messagesOf(e);
  return { ...e, messages, messageTimes, body: undefined, events: undefined, eventTimes: undefined, pending: undefined, data: undefined, lastChunkAt: undefined, eventId: undefined };
});
const limit = setTimeout(() => {
  emit("timeout", { limitMs: WHOLE_RUN_LIMIT_MS });
  emitAndExit("wire", { exchanges: wire(), transportErrors }, 3);
}, WHOLE_RUN_LIMIT_MS);

// The JSON-RPC messages of a body (each SSE event's data, or the JSON body) and when each
// arrived.
function messagesOf(exchange) {
  if (!(exchange.contentType ?? "").startsWith("text/event-stream")) {
    const text = exchange.body;
    if (!text.trim()) return [[], []];
    let found;
    try { found = [JSON.parse(text)]; } catch { found = [{ unparsed: text }]; }
    return [found, [exchange.lastChunkAt]];
  }
  return [exchange.events, exchange.eventTimes];
}

// A chunk of an exchange's body, as it arrives: SSE events are parsed at once, each with its
// arrival time, and the ids of the events dispatched (a priming event's too: its id is what a
// resume names). An event cut off before its blank line never reached the client as a message.
function feed(exchange, text) {
  exchange.body += text;
  exchange.lastChunkAt = Date.now();
  const lines = (exchange.pending + text).split("\n");
  exchange.pending = lines.pop();
  for (let line of lines) {
    if (line.endsWith("\r")) line = line.slice(0, -1);
    if (line === "") {
      if (exchange.eventId !== null) exchange.eventIds.push(exchange.eventId);
      exchange.eventId = null;
      // An event whose data is empty (the priming event of a resumable stream) is not
      // dispatched, as the SSE standard says.
      const joined = exchange.data.join("\n");
      if (joined !== "") {
        try { exchange.events.push(JSON.parse(joined)); } catch { exchange.events.push({ unparsed: joined }); }
        exchange.eventTimes.push(exchange.lastChunkAt);
      }
      exchange.data = [];
    } else if (line.startsWith("data:")) {
      exchange.data.push(line.slice(5).replace(/^ /, ""));
    } else if (line.startsWith("id:")) {
      exchange.eventId = line.slice(3).replace(/^ /, "");
    }
  }
}

// A fetch that records each request and passes the response body through a recorder: a
// ReadableStream pulling from the original, so a cancel by the SDK reaches the connection
// just as it would without the tap.
async function tapFetch(input, init = {}) {
  const headers = new Headers(init.headers);
  let request = null;
  if (typeof init.body === "string") {
    try { request = JSON.parse(init.body); } catch { request = init.body; }
  }
  const exchange = {
    method: init.method ?? "GET",
    request,
    session: headers.get("mcp-session-id"),
    lastEventId: headers.get("last-event-id"),
    status: null,
    contentType: null,
    allow: null,
    body: "",
    ended: null,
    startedMs: Date.now() - t0,
    startedAt: Date.now(),
    endedMs: null,
    endedAt: null,
    events: [],
    eventTimes: [],
    eventIds: [],
    eventId: null,
    pending: "",
    data: [],
    lastChunkAt: null,
  };
  exchanges.push(exchange);
  const response = await fetch(input, init);
  exchange.status = response.status;
  exchange.contentType = response.headers.get("content-type");
  exchange.allow = response.headers.get("allow");
  if (!response.body) {
    exchange.ended = "eof";
    exchange.endedMs = Date.now() - t0;
    exchange.endedAt = Date.now();
    return response;
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const end = (how) => {
    if (exchange.ended === null) {
      exchange.ended = how;
      exchange.endedMs = Date.now() - t0;
      exchange.endedAt = Date.now();
    }
  };
  const body = new ReadableStream({
    async pull(controller) {
      try {
        const { value, done } = await reader.read();
        if (done) {
          end("eof");
          controller.close();
          return;
        }
        feed(exchange, decoder.decode(value, { stream: true }));
        controller.enqueue(value);
      } catch (error) {
        end(`error: ${error}`);
        controller.error(error);
      }
    },
    async cancel(reason) {
      end("client");
      await reader.cancel(reason);
    },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

const input = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function waitForGo(step) {
  emit("waiting", { step });
  const { done } = await input.next();
  if (done) throw new Error(`stdin closed while waiting after ${step}`);
}

const errorOf = (error) => ({ code: error?.code ?? null, message: error?.message ?? String(error), data: error?.data ?? null });
const textOf = (result) => result?.content?.find((c) => c.type === "text")?.text ?? null;
const lastCall = (tool) => {
  for (let i = exchanges.length - 1; i >= 0; i--) {
    const request = exchanges[i].request;
    if (request?.method === "tools/call" && request?.params?.name === tool) return request.id;
  }
  return null;
};

// The slow call (a 30 s demo-sleep); resolves `running` at its first progress (the upstream
// tool is running).
function slowCall(client, signal) {
  const progressTimes = [];
  let markRunning;
  const running = new Promise((resolve) => { markRunning = resolve; });
  slowSent.push(Date.now());
  const call = client.callTool(
    { name: TOOLS.slow.name, arguments: TOOLS.slow.args },
    undefined,
    { signal, timeout: CALL_LIMIT_MS, onprogress: () => { progressTimes.push(Date.now()); markRunning(); } },
  );
  const outcome = call.then(
    (result) => ({ state: "completed", text: textOf(result) }),
    (error) => ({ state: "rejected", error: errorOf(error) }),
  );
  outcome.then(() => markRunning());
  return { running, outcome, progress: () => progressTimes.length, progressTimes };
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { authorization: `Bearer ${token}` } },
  fetch: tapFetch,
});
const client = new Client({ name: "cancelkit-gateway-ts", version: "1.0.0" });
client.onerror = (error) => transportErrors.push(String(error?.message ?? error).slice(0, 500));
try {
  await client.connect(transport);
  emit("connected", { protocolVersion: transport.protocolVersion ?? null, server: client.getServerVersion() ?? null, sessionId: transport.sessionId ?? null });

  try {
    const listed = await client.listTools();
    emit("list_tools", { tools: listed.tools.map((t) => t.name) });
  } catch (error) {
    emit("list_tools", { error: errorOf(error) });
  }

  const echo = async (text) => {
    try {
      const result = await client.callTool({ name: TOOLS.fast.name, arguments: withText(TOOLS.fast.args, text) });
      emit("echo", { text: textOf(result), isError: result.isError ?? false, meta: result._meta ?? null });
    } catch (error) {
      emit("echo", { error: errorOf(error) });
    }
  };
  await echo("hello");

  {
    const updates = [];
    try {
      const result = await client.callTool(
        { name: TOOLS.progress.name, arguments: TOOLS.progress.args },
        undefined,
        { timeout: CALL_LIMIT_MS, onprogress: (p) => updates.push(p) },
      );
      emit("progress", { updates, text: textOf(result), isError: result.isError ?? false });
    } catch (error) {
      emit("progress", { updates, error: errorOf(error) });
    }
  }

  {
    const controller = new AbortController();
    const started = Date.now();
    const call = slowCall(client, controller.signal);
    await call.running;
    const abortedAt = Date.now();
    controller.abort("user pressed stop");
    const outcome = await call.outcome;
    emit("client_abort", {
      requestId: lastCall(TOOLS.slow.name),
      outcome: outcome.state,
      error: outcome.error ?? null,
      progressBeforeAbort: call.progress(),
      progressTimes: call.progressTimes,
      abortedAt,
      abortedAfterMs: Date.now() - started,
    });
  }
  await waitForGo("client_abort");

  {
    const started = Date.now();
    const call = slowCall(client, undefined);
    await call.running;
    if (call.progress() > 0) emit("api_cancel_ready", { requestId: lastCall(TOOLS.slow.name) });
    const outcome = await call.outcome;
    emit("api_cancel", {
      requestId: lastCall(TOOLS.slow.name),
      progressTimes: call.progressTimes,
      outcome: outcome.state,
      error: outcome.error ?? null,
      text: outcome.text ?? null,
      afterMs: Date.now() - started,
    });
  }
  await waitForGo("api_cancel");

  await echo("still serving");

  // A burst of calls aborted at once, so that some notifications/cancelled overtake their
  // tools/call (separate POSTs): every run must still end cancelled.
  {
    const first = exchanges.length;
    const outcomes = {};
    const burst = TOOLS.burst ?? ABORT_BURST;
    for (let i = 0; i < burst; i++) {
      const controller = new AbortController();
      const call = client
        .callTool({ name: TOOLS.slow.name, arguments: TOOLS.slow.args }, undefined, { signal: controller.signal })
        .then(() => "completed", () => "rejected");
      setTimeout(() => controller.abort("burst"), i % 3);
      const outcome = await call;
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
    }
    const ids = exchanges.slice(first).filter((e) => e.request?.method === "tools/call").map((e) => e.request.id);
    emit("abort_burst", { calls: burst, outcomes, ids });
  }
  await waitForGo("abort_burst");
  // Give a late message for a cancelled call every chance to arrive: past the end the slow
  // calls would have had upstream, had nothing stopped them; and the SDK every chance to resume
  // the streams that ended without a result: RESUME_WAIT_MS past the last POST stream's end (a
  // cancelled call's stream ends a moment after the SDK rejected the call).
  const posts = exchanges.filter((e) => e.method === "POST");
  const postsEndBy = Date.now() + POST_END_WAIT_MS;
  while (posts.some((e) => e.endedAt === null) && Date.now() < postsEndBy) await sleep(10);
  const lastPostEnd = Math.max(0, ...posts.map((e) => e.endedAt ?? Date.now()));
  const settleUntil = Math.max(
    Date.now() + LATE_MESSAGE_WAIT_MS,
    Math.max(0, ...slowSent) + (TOOLS.settleMs ?? 0),
    lastPostEnd + (TOOLS.resumeWaitMs ?? RESUME_WAIT_MS),
  );
  // A timer may fire a millisecond before the clock reads its end.
  while (Date.now() < settleUntil) await sleep(settleUntil - Date.now());
  await echo("after the resumes");
  await transport.terminateSession().catch((error) => emit("terminate", { error: errorOf(error) }));
  await client.close();
} catch (error) {
  emit("failed", { error: errorOf(error), stack: error?.stack ?? null });
} finally {
  clearTimeout(limit);
  emitAndExit("wire", { exchanges: wire(), transportErrors }, 0);
}
