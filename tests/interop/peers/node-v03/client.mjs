// client.mjs URL [JSONRPC|HTTP+JSON]: drives an orchd's own A2A 0.3
// interface of the given binding (JSON-RPC by default) with the
// @a2a-js/sdk 0.3.x client and prints ONE JSON object of what it saw.
//
// It fetches the card, sends a blocking message (routed by orchd to the
// agent with the skill named under the message metadata key "skill"), gets an
// immediate message answer, streams a message, gets the task, answers an
// input request on the same task, cancels a running task and gets an unknown
// task (expecting TaskNotFound). Every HTTP call the SDK makes is recorded
// (path, A2A-Version header, JSON-RPC method, error code and reason) so the
// caller can check which interface and version the SDK chose.

import { randomUUID } from 'node:crypto';
import { ClientFactory, JsonRpcTransportFactory, RestTransportFactory } from '@a2a-js/sdk/client';

import { recordingFetch } from '../js-shared/peers.mjs';

console.log = console.info = console.debug = (...args) => console.error(...args);

const base = process.argv[2];
if (!base) {
  console.error('usage: node client.mjs URL');
  process.exit(2);
}

// calls records every request the SDK makes.
const calls = [];

const fetchImpl = recordingFetch(calls);

function userMessage(text, extra = {}) {
  return { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text }], ...extra };
}

function textOf(parts) {
  return (parts ?? []).filter((p) => p.kind === 'text').map((p) => p.text).join('');
}

function taskSummary(task) {
  return {
    kind: task.kind,
    id: task.id,
    state: task.status?.state ?? '',
    status: textOf(task.status?.message?.parts),
    artifacts: (task.artifacts ?? []).map((a) => textOf(a.parts)),
  };
}

function summary(result) {
  return result.kind === 'message' ? { kind: 'message', text: textOf(result.parts) } : taskSummary(result);
}

// errorSummary is what a step that threw reports: the SDK's error class, the
// JSON-RPC code it carries and its message.
function errorSummary(err) {
  return { error: err?.name ?? 'Error', code: err?.errorResponse?.error?.code, message: String(err?.message ?? err) };
}

async function step(out, name, fn) {
  try {
    out[name] = await fn();
  } catch (err) {
    out[name] = errorSummary(err);
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const out = { sdk: '@a2a-js/sdk 0.3.x' };
// The binding to use: JSONRPC (default) or HTTP+JSON.
const binding = process.argv[3] ?? 'JSONRPC';
const transport = binding === 'HTTP+JSON'
  ? new RestTransportFactory({ fetchImpl })
  : new JsonRpcTransportFactory({ fetchImpl });
const factory = new ClientFactory({ transports: [transport] });
// At the well-known path orchd serves the A2A 1.0 card to a client that
// sends no A2A-Version, as this SDK's card resolver does; the 1.0 card has
// no 0.3 url, so the SDK finds no transport in it. wellKnown records what
// the SDK made of it; the client then reads the dual 0.3/1.0 card at the
// 0.2-era path, /.well-known/agent.json.
try {
  await factory.createFromUrl(base);
  out.wellKnown = 'usable';
} catch (err) {
  out.wellKnown = String(err?.message ?? err);
}
const client = await factory.createFromUrl(base, '.well-known/agent.json');
const card = await client.getAgentCard();
out.card = {
  name: card.name,
  protocolVersion: card.protocolVersion,
  url: card.url,
  preferredTransport: card.preferredTransport ?? '',
  interfaces: (card.additionalInterfaces ?? []).map((i) => ({ url: i.url, binding: i.transport })),
  streaming: card.capabilities?.streaming ?? false,
  extensions: (card.capabilities?.extensions ?? []).map((e) => e.uri),
  skills: card.skills.map((s) => s.id),
};

await step(out, 'send', async () => summary(await client.sendMessage({ message: userMessage('hello', { metadata: { skill: 'work' } }) })));
await step(out, 'reply', async () => summary(await client.sendMessage({ message: userMessage('hi', { metadata: { skill: 'reply' } }) })));

await step(out, 'stream', async () => {
  const events = [];
  const artifacts = new Map();
  let state = '';
  let taskId = '';
  for await (const ev of client.sendMessageStream({ message: userMessage('stream me', { metadata: { skill: 'work' } }) })) {
    events.push(ev.kind);
    if (ev.kind === 'task') {
      taskId = ev.id;
      state = ev.status?.state ?? '';
    } else if (ev.kind === 'status-update') {
      state = ev.status?.state ?? '';
    } else if (ev.kind === 'artifact-update') {
      const id = ev.artifact.artifactId;
      artifacts.set(id, (ev.append ? artifacts.get(id) ?? '' : '') + textOf(ev.artifact.parts));
    }
  }
  return { events, state, taskId, artifacts: [...artifacts.values()] };
});

await step(out, 'get', async () => {
  const id = out.send?.id;
  if (!id) {
    throw new Error('no task from send');
  }
  return taskSummary(await client.getTask({ id }));
});

await step(out, 'ask', async () => {
  const first = await client.sendMessage({ message: userMessage('a question', { metadata: { skill: 'ask' } }) });
  if (first.kind === 'message') {
    return { first: summary(first) };
  }
  const second = await client.sendMessage({ message: userMessage('1999', { taskId: first.id, contextId: first.contextId }) });
  return { first: taskSummary(first), second: summary(second) };
});

await step(out, 'cancel', async () => {
  const started = await client.sendMessage({
    message: userMessage('hang on', { metadata: { skill: 'hang' } }),
    configuration: { blocking: false },
  });
  if (started.kind === 'message') {
    return { started: summary(started) };
  }
  const res = { started: taskSummary(started) };
  try {
    res.canceled = taskSummary(await client.cancelTask({ id: started.id }));
  } catch (err) {
    res.canceled = errorSummary(err);
  }
  // Where the task ends, whatever the cancel call answered.
  for (let i = 0; i < 100; i++) {
    res.after = taskSummary(await client.getTask({ id: started.id }));
    if (!['submitted', 'working'].includes(res.after.state)) {
      break;
    }
    await sleep(50);
  }
  return res;
});

await step(out, 'unknown', async () => summary(await client.getTask({ id: 'no-such-task' })));
out.unknown.wireStatus = calls.at(-1)?.status;
out.unknown.wireCode = calls.at(-1)?.errorCode;
out.unknown.wireReason = calls.at(-1)?.errorReason;

out.calls = calls;
process.stdout.write(`${JSON.stringify(out)}\n`);
