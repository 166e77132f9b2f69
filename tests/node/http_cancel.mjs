// An MCP client on the official TypeScript SDK (pinned in package.json): `Client` over
// `StreamableHTTPClientTransport` against a cancelkit server. Driven by
// tests/tests/ts_sdk_http/, which starts the server (`mcp_server --http 127.0.0.1:0`) and
// passes its URL and the file its stderr goes to.
//
//     node http_cancel.mjs URL SERVER_LOG SCENARIO
//
// SCENARIO is one of
//   client_cancels  connect (2025-11-25 `initialize`), list the tools, call `echo`, call
//                   `sleep {seconds: 30}` with an AbortSignal and abort it after ~300 ms, wait
//                   RESUME_WAIT_MS from the abort (the SDK resumes the call's stream, which
//                   ended without a response), call `echo` again, end the session (DELETE)
//   error_answer    connect, call a tool the server does not have (answered with a JSON-RPC
//                   error on the call's event stream, which the SDK resumes too: only a result
//                   counts as the response), wait RESUME_WAIT_MS from the answer, call `echo`,
//                   end the session
//   server_cancels  connect with a sampling handler that waits (30 s at most) for its
//                   `extra.signal` to abort, call `ask_client {timeout_ms}`: the server sends
//                   sampling/createMessage, gives up and sends notifications/cancelled for it
//
// The transport's `fetch` is a tap around the global one, so what this reports is what crossed
// the wire: every HTTP exchange with the MCP headers it carried, the message it POSTed, the
// status and headers of the answer, the answer's JSON body or each of its SSE events as it
// arrived, and how the answer's body ended. Everything the client reports is recorded too:
// `transport.onerror`, `Client.onerror` (the SDK passes it every transport error as well), and
// console.error / console.warn.
//
// Prints JSON lines, each an object with an "event" member; the last two are
// {"event": "transport_errors", "errors": [...], "whileClosing": [...]} (each {source, ms,
// message}: what was reported while the session was open, and once its end had begun) and
// {"event": "wire", "exchanges": [...]}.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CreateMessageRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const SLEEP_ABORT_AFTER_MS = 300;
const ASK_CLIENT_TIMEOUT_MS = 500;
const HANDLER_WAIT_MS = 30_000;
const STOPPED_WAIT_MS = 5_000;
const LATE_RESPONSE_WAIT_MS = 300;
const WHOLE_RUN_LIMIT_MS = 40_000;
const ABORT_REASON = "user pressed stop";
// How long the session stays open after a call's stream ended without a result (the abort, or
// an error answer): the SDK resumes such a stream (GET with Last-Event-ID) about 1.0 s after it
// ended and, if that fails, again 1.5 s later (its backoff: min(1000 * 1.5^n, 30000) ms, 2
// attempts), and a resumed stream that ends again without a result starts that over (about
// once a second, forever): 3.5 s holds both attempts and, when it loops, a third GET.
const RESUME_WAIT_MS = 3_500;
const UNKNOWN_TOOL = "no_such_tool";

const REQUEST_HEADERS = [
  "accept",
  "content-type",
  "mcp-session-id",
  "mcp-protocol-version",
  "last-event-id",
];
const RESPONSE_HEADERS = ["content-type", "mcp-session-id", "allow"];

const T0 = performance.now();
const msSince = (start) => Math.round((performance.now() - start) * 10) / 10;
const emit = (event, fields = {}) => console.log(JSON.stringify({ event, ...fields }));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Everything the client reports, in order: {source, ms, message}; `closing` is set once the
// session's end begins.
const reported = { errors: [], whileClosing: [], closing: false };
const describe = (error) => (error instanceof Error ? `${error.constructor.name}: ${error.message}` : String(error));
function report(source, error) {
  const entry = { source, ms: msSince(T0), message: describe(error) };
  (reported.closing ? reported.whileClosing : reported.errors).push(entry);
}
for (const level of ["error", "warn"]) {
  const original = console[level].bind(console);
  console[level] = (...args) => {
    report(`console.${level}`, args.map(describe).join(" "));
    original(...args);
  };
}

// Keeps the session open until RESUME_WAIT_MS after `since` (a performance.now()).
const waitOutResumes = (since) => sleep(Math.max(0, since + RESUME_WAIT_MS - performance.now()));

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return { unparsed: text };
  }
}

// Splits an event stream into events as its bytes arrive (LF, CR or CRLF line ends, `:`
// comments, a blank line ends an event).
class SseTap {
  constructor(record) {
    this.record = record;
    this.decoder = new TextDecoder();
    this.buffer = "";
    this.fields = {};
    this.data = [];
  }

  feed(bytes) {
    this.buffer += this.decoder.decode(bytes, { stream: true });
    for (;;) {
      const match = /\r\n|\r|\n/.exec(this.buffer);
      // A lone CR at the very end may be the first half of a CRLF.
      if (!match || (match[0] === "\r" && match.index + 1 === this.buffer.length)) return;
      const line = this.buffer.slice(0, match.index);
      this.buffer = this.buffer.slice(match.index + match[0].length);
      this.line(line);
    }
  }

  line(line) {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) {
      this.record.comments += 1;
      return;
    }
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "data") this.data.push(value);
    else if (["id", "event", "retry"].includes(name)) this.fields[name] = value;
  }

  dispatch() {
    if (Object.keys(this.fields).length === 0 && this.data.length === 0) return;
    const event = { ms: msSince(T0), ...this.fields };
    if (this.data.length > 0) {
      const text = this.data.join("\n");
      // A priming event's data is empty: nothing to parse.
      event.data = text === "" ? "" : parseJson(text);
    }
    this.record.events.push(event);
    this.fields = {};
    this.data = [];
  }
}

const exchanges = [];

// The transport's fetch: the global one, recording every exchange.
async function tapFetch(url, init = {}) {
  const headers = new Headers(init.headers);
  const record = {
    n: exchanges.length,
    ms: msSince(T0),
    method: init.method ?? "GET",
    headers: Object.fromEntries(REQUEST_HEADERS.filter((h) => headers.has(h)).map((h) => [h, headers.get(h)])),
    body: typeof init.body === "string" ? parseJson(init.body) : null,
    status: null,
    responseHeaders: {},
    events: null,
    comments: 0,
    json: null,
    end: null,
    closedMs: null,
  };
  exchanges.push(record);
  let response;
  try {
    response = await fetch(url, init);
  } catch (error) {
    record.end = `no response: ${error?.name ?? error}`;
    throw error;
  }
  record.status = response.status;
  record.responseHeaders = Object.fromEntries(
    RESPONSE_HEADERS.filter((h) => response.headers.has(h)).map((h) => [h, response.headers.get(h)]),
  );
  if (!response.body) return response;
  const sse = (response.headers.get("content-type") ?? "").toLowerCase().startsWith("text/event-stream");
  if (sse) record.events = [];
  const tap = sse ? new SseTap(record) : null;
  const chunks = [];
  const end = (how) => {
    if (record.end !== null) return;
    record.end = how;
    record.endMs = msSince(T0);
    if (!sse && chunks.length > 0) record.json = parseJson(Buffer.concat(chunks).toString("utf8"));
  };
  const reader = response.body.getReader();
  const body = new ReadableStream({
    async pull(controller) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch (error) {
        end(`error: ${error?.name ?? error}`);
        controller.error(error);
        return;
      }
      if (chunk.done) {
        end("eof");
        controller.close();
        return;
      }
      if (tap) tap.feed(chunk.value);
      else chunks.push(Buffer.from(chunk.value));
      controller.enqueue(chunk.value);
    },
    async cancel(reason) {
      end("closed by the client");
      record.closedMs = msSince(T0);
      await reader.cancel(reason);
    },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

function readLog(path) {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

// Polls the server's log for a line matching `pattern`: [ms it took, the line], or [null, null].
async function waitForLog(path, pattern, limitMs) {
  const start = performance.now();
  while (performance.now() - start < limitMs) {
    const line = readLog(path).split("\n").find((l) => pattern.test(l));
    if (line !== undefined) return [msSince(start), line];
    await sleep(2);
  }
  return [null, null];
}

const textOf = (result) => result?.content?.find((c) => c.type === "text")?.text ?? null;

async function clientCancels(client, logPath) {
  const listed = await client.listTools();
  emit("list_tools", { ok: true, tools: listed.tools.map((t) => t.name) });
  const hello = await client.callTool({ name: "echo", arguments: { text: "hello" } });
  emit("echo", { text: textOf(hello), isError: hello.isError ?? false });

  const controller = new AbortController();
  const started = performance.now();
  const call = client.callTool({ name: "sleep", arguments: { seconds: 30 } }, undefined, {
    signal: controller.signal,
  });
  await sleep(SLEEP_ABORT_AFTER_MS);
  const abortedAt = performance.now();
  const abortedAtMs = msSince(T0);
  controller.abort(ABORT_REASON);
  let outcome;
  try {
    const result = await call;
    outcome = { state: "completed", text: textOf(result) };
  } catch (error) {
    outcome = { state: "rejected", error: `${error?.code ?? ""} ${error?.message ?? error}`.trim() };
  }
  const callReturnedAfterAbortMs = msSince(abortedAt);
  const post = exchanges.find((e) => e.body?.method === "tools/call" && e.body?.params?.name === "sleep");
  const requestId = post?.body?.id ?? null;
  const [stoppedMs, stoppedLine] = await waitForLog(
    logPath,
    new RegExp(`sleep tool stopped request_id=${JSON.stringify(requestId)}(\\s|$)`),
    STOPPED_WAIT_MS,
  );
  emit("sleep", {
    requestId,
    outcome: outcome.state,
    detail: outcome.text ?? outcome.error,
    abortedAfterMs: Math.round(abortedAt - started),
    abortedAtMs,
    callReturnedAfterAbortMs,
    abortToStoppedMs: stoppedMs,
    stoppedLine,
  });

  // Let the SDK resume the call's stream (and a late response show up), then use the session.
  await waitOutResumes(abortedAt);
  const again = await client.callTool({ name: "echo", arguments: { text: "still serving" } });
  emit("echo", { text: textOf(again), isError: again.isError ?? false });
}

async function errorAnswer(client) {
  let outcome;
  try {
    const result = await client.callTool({ name: UNKNOWN_TOOL, arguments: {} });
    outcome = { state: "completed", text: textOf(result), isError: result.isError ?? false };
  } catch (error) {
    outcome = { state: "rejected", code: error?.code ?? null, error: describe(error) };
  }
  const answeredAt = performance.now();
  emit("unknown_tool", { name: UNKNOWN_TOOL, ...outcome, answeredAtMs: msSince(T0) });
  await waitOutResumes(answeredAt);
  const echo = await client.callTool({ name: "echo", arguments: { text: "still serving" } });
  emit("echo", { text: textOf(echo), isError: echo.isError ?? false });
}

async function serverCancels(client, calls) {
  const started = performance.now();
  try {
    const result = await client.callTool({ name: "ask_client", arguments: { timeout_ms: ASK_CLIENT_TIMEOUT_MS } });
    emit("ask_client", {
      text: textOf(result),
      isError: result.isError ?? false,
      afterMs: msSince(started),
      timeoutMs: ASK_CLIENT_TIMEOUT_MS,
    });
  } catch (error) {
    emit("ask_client", { error: `${error?.code ?? ""} ${error?.message ?? error}`.trim(), afterMs: msSince(started) });
  }
  // Let anything still in flight (a late answer from us, a second cancel) reach the wire.
  await sleep(LATE_RESPONSE_WAIT_MS);
  emit("sampling_handlers", { calls });
  const echo = await client.callTool({ name: "echo", arguments: { text: "still serving" } });
  emit("echo", { text: textOf(echo), isError: echo.isError ?? false });
}

async function main(url, logPath, scenario) {
  if (!["client_cancels", "error_answer", "server_cancels"].includes(scenario)) throw new Error(`unknown scenario ${scenario}`);
  const calls = [];
  const client = new Client(
    { name: "cancelkit-ts-http-interop", version: "1.0.0" },
    scenario === "server_cancels" ? { capabilities: { sampling: {} } } : undefined,
  );
  if (scenario === "server_cancels") {
    client.setRequestHandler(CreateMessageRequestSchema, async (_request, extra) => {
      const call = { requestId: extra.requestId, state: "started" };
      calls.push(call);
      const started = performance.now();
      const aborted = await new Promise((resolve) => {
        const timer = setTimeout(() => resolve(false), HANDLER_WAIT_MS);
        const onAbort = () => {
          clearTimeout(timer);
          resolve(true);
        };
        if (extra.signal.aborted) onAbort();
        else extra.signal.addEventListener("abort", onAbort, { once: true });
      });
      call.state = aborted ? "aborted" : "completed";
      call.afterMs = msSince(started);
      if (aborted) {
        call.reason = String(extra.signal.reason ?? "");
        throw new Error("the server cancelled this request");
      }
      return { role: "assistant", content: { type: "text", text: "hello" }, model: "ts-sdk-http-interop" };
    });
  }
  const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: tapFetch });
  // Errors the client reports in the background (a stream it could not resume, say): the
  // transport's (`connect` keeps this handler and passes each error on to the client's too).
  transport.onerror = (error) => report("transport.onerror", error);
  client.onerror = (error) => report("client.onerror", error);
  try {
    await client.connect(transport);
    emit("connected", {
      protocolVersion: transport.protocolVersion ?? null,
      sessionId: transport.sessionId ?? null,
      server: client.getServerVersion()?.name ?? null,
    });
    if (scenario === "client_cancels") await clientCancels(client, logPath);
    else if (scenario === "error_answer") await errorAnswer(client);
    else await serverCancels(client, calls);
    reported.closing = true;
    await transport.terminateSession();
  } finally {
    reported.closing = true;
    await client.close();
    emit("transport_errors", { errors: reported.errors, whileClosing: reported.whileClosing });
    emit("wire", { exchanges });
  }
}

const [url, logPath, scenario] = process.argv.slice(2);
if (!url || !logPath || !scenario) {
  console.error("usage: node http_cancel.mjs URL SERVER_LOG SCENARIO");
  process.exit(2);
}
const limit = setTimeout(() => {
  emit("wire", { exchanges, timedOut: true });
  process.exit(3);
}, WHOLE_RUN_LIMIT_MS);
try {
  await main(url, logPath, scenario);
} catch (error) {
  console.error(error?.stack ?? String(error));
  process.exitCode = 1;
}
clearTimeout(limit);
