// A plain ACP v1 agent on the official TypeScript SDK (@agentclientprotocol/sdk), over stdio, for
// `cancelkit check acp`.
//
// - A prompt `sleep N` streams an agent_message_chunk update each second for N seconds, then ends
//   its turn with `end_turn`.
// - A prompt `ask N` first asks the client for permission (session/request_permission), then
//   sleeps N seconds.
//
// Cancellation is handled the way the SDK intends: `session/cancel` aborts the session's turn
// (an AbortController per session, as in the SDK's example agent), which ends the prompt with
// `stopReason: "cancelled"`; the permission request is sent with that signal as its
// `cancellationSignal`, so the SDK sends `$/cancel_request` for it when the turn is aborted. A
// `$/cancel_request` for the prompt itself aborts the handler's own `signal`, and the prompt is
// answered with the SDK's -32800 error.

import { Readable, Writable } from "node:stream";

import * as acp from "@agentclientprotocol/sdk";

/** sessionId -> the AbortController of its running turn, or null. */
const sessions = new Map();

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    function onAbort() {
      clearTimeout(timer);
      reject(signal.reason);
    }
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

function say(client, sessionId, text) {
  return client.notify(acp.methods.client.session.update, {
    sessionId,
    update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
  });
}

async function runTurn(text, sessionId, client, signal) {
  const [verb, count] = text.trim().split(/\s+/);
  const seconds = Number.parseInt(count ?? "0", 10) || 0;
  if (verb === "ask") {
    const answer = await client.request(
      acp.methods.client.session.requestPermission,
      {
        sessionId,
        toolCall: { toolCallId: "call-1", title: "Run the example tool" },
        options: [
          { optionId: "allow", name: "Allow", kind: "allow_once" },
          { optionId: "reject", name: "Reject", kind: "reject_once" },
        ],
      },
      { cancellationSignal: signal },
    );
    await say(client, sessionId, `permission: ${answer.outcome.outcome}`);
    if (signal.aborted) {
      throw signal.reason;
    }
  } else if (verb !== "sleep") {
    await say(client, sessionId, `you said: ${text}`);
    return;
  }
  for (let second = 1; second <= seconds; second++) {
    await sleep(1000, signal);
    await say(client, sessionId, `slept ${second} of ${seconds} s`);
  }
}

const app = acp
  .agent({ name: "cancelkit-interop-acp-agent" })
  .onRequest(acp.methods.agent.initialize, () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: { loadSession: false },
    agentInfo: { name: "cancelkit-interop-ts-acp-agent", version: "1.0.0" },
  }))
  .onRequest(acp.methods.agent.session.new, () => {
    const sessionId = crypto.randomUUID();
    sessions.set(sessionId, null);
    return { sessionId };
  })
  .onRequest(acp.methods.agent.session.prompt, async ({ params, signal, client }) => {
    if (!sessions.has(params.sessionId)) {
      throw acp.RequestError.invalidParams({ sessionId: params.sessionId });
    }
    sessions.get(params.sessionId)?.abort();
    const turn = new AbortController();
    sessions.set(params.sessionId, turn);
    const text = params.prompt
      .filter((block) => block.type === "text")
      .map((block) => block.text)
      .join(" ");
    try {
      await runTurn(text, params.sessionId, client, AbortSignal.any([turn.signal, signal]));
      return { stopReason: "end_turn" };
    } catch (error) {
      if (turn.signal.aborted) {
        return { stopReason: "cancelled" };
      }
      throw error;
    } finally {
      if (sessions.get(params.sessionId) === turn) {
        sessions.set(params.sessionId, null);
      }
    }
  })
  .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
    sessions.get(params.sessionId)?.abort();
  });

const stream = acp.ndJsonStream(
  Writable.toWeb(process.stdout),
  Readable.toWeb(process.stdin),
);
const connection = app.connect(stream);
await connection.closed;
