// client.mjs URL [JSONRPC|HTTP+JSON]: drives an orchd's own A2A 1.0
// interface of the given binding (JSON-RPC by default) with the
// @a2a-js/sdk 1.x client and prints ONE JSON object of what it saw.
//
// It fetches the card, sends a blocking message (routed by orchd to the
// agent with the skill named under the message metadata key "skill"), gets an
// immediate message answer, streams a message, gets the task, answers an
// input request on the same task, cancels a running task and gets an unknown
// task (expecting TaskNotFound). Every HTTP call the SDK makes is recorded
// (path, A2A-Version header, JSON-RPC method, error code and reason) so the
// caller can check which interface and version the SDK chose.

import { randomUUID } from 'node:crypto';
import { Role, taskStateToJSON } from '@a2a-js/sdk';
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

function textPart(text) {
  return { content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' };
}

function userMessage(text, extra = {}) {
  return {
    messageId: randomUUID(), contextId: '', taskId: '', role: Role.ROLE_USER,
    parts: [textPart(text)], metadata: undefined, extensions: [], referenceTaskIds: [], ...extra,
  };
}

function textOf(parts) {
  return (parts ?? []).filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join('');
}

function isMessage(result) {
  return 'messageId' in result;
}

function taskSummary(task) {
  return {
    kind: 'task',
    id: task.id,
    state: taskStateToJSON(task.status?.state),
    status: textOf(task.status?.message?.parts),
    artifacts: (task.artifacts ?? []).map((a) => textOf(a.parts)),
  };
}

function summary(result) {
  return isMessage(result) ? { kind: 'message', text: textOf(result.parts) } : taskSummary(result);
}

// errorSummary is what a step that threw reports: the SDK's error class, the
// JSON-RPC code it carries and its message.
function errorSummary(err) {
  return { error: err?.name ?? 'Error', code: err?.envelopeCode ?? err?.code, message: String(err?.message ?? err) };
}

async function step(out, name, fn) {
  try {
    out[name] = await fn();
  } catch (err) {
    out[name] = errorSummary(err);
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const out = { sdk: '@a2a-js/sdk 1.x' };
// The binding to use: JSONRPC (default) or HTTP+JSON.
const binding = process.argv[3] ?? 'JSONRPC';
const transport = binding === 'HTTP+JSON'
  ? new RestTransportFactory({ fetchImpl })
  : new JsonRpcTransportFactory({ fetchImpl });
const factory = new ClientFactory({ transports: [transport] });
const client = await factory.createFromUrl(base);
const card = await client.getAgentCard();
out.card = {
  name: card.name,
  interfaces: card.supportedInterfaces.map((i) => ({ url: i.url, binding: i.protocolBinding, version: i.protocolVersion })),
  streaming: card.capabilities?.streaming ?? false,
  extensions: (card.capabilities?.extensions ?? []).map((e) => e.uri),
  skills: card.skills.map((s) => s.id),
};
out.transport = { protocol: client.transport.protocolName, version: client.protocolVersion };

await step(out, 'send', async () => summary(await client.sendMessage({ message: userMessage('hello', { metadata: { skill: 'work' } }) })));
await step(out, 'reply', async () => summary(await client.sendMessage({ message: userMessage('hi', { metadata: { skill: 'reply' } }) })));

await step(out, 'stream', async () => {
  const events = [];
  const artifacts = new Map();
  let state = '';
  let taskId = '';
  for await (const ev of client.sendMessageStream({ message: userMessage('stream me', { metadata: { skill: 'work' } }) })) {
    const kind = ev.payload?.$case;
    events.push(kind);
    const v = ev.payload?.value;
    if (kind === 'task') {
      taskId = v.id;
      state = taskStateToJSON(v.status?.state);
    } else if (kind === 'statusUpdate') {
      state = taskStateToJSON(v.status?.state);
    } else if (kind === 'artifactUpdate') {
      const id = v.artifact.artifactId;
      artifacts.set(id, (v.append ? artifacts.get(id) ?? '' : '') + textOf(v.artifact.parts));
    }
  }
  return { events, state, taskId, artifacts: [...artifacts.values()] };
});

await step(out, 'get', async () => {
  const id = out.send?.id;
  if (!id) {
    throw new Error('no task from send');
  }
  return taskSummary(await client.getTask({ id, tenant: '' }));
});

await step(out, 'ask', async () => {
  const first = await client.sendMessage({ message: userMessage('a question', { metadata: { skill: 'ask' } }) });
  if (isMessage(first)) {
    return { first: summary(first) };
  }
  const second = await client.sendMessage({
    message: userMessage('1999', { taskId: first.id, contextId: first.contextId }),
  });
  return { first: taskSummary(first), second: summary(second) };
});

await step(out, 'cancel', async () => {
  const started = await client.sendMessage({
    message: userMessage('hang on', { metadata: { skill: 'hang' } }),
    configuration: { returnImmediately: true, acceptedOutputModes: [], historyLength: undefined, taskPushNotificationConfig: undefined },
  });
  if (isMessage(started)) {
    return { started: summary(started) };
  }
  const res = { started: taskSummary(started) };
  try {
    res.canceled = taskSummary(await client.cancelTask({ id: started.id, tenant: '', metadata: undefined }));
  } catch (err) {
    res.canceled = errorSummary(err);
  }
  // Where the task ends, whatever the cancel call answered.
  for (let i = 0; i < 100; i++) {
    res.after = taskSummary(await client.getTask({ id: started.id, tenant: '' }));
    if (!['TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING'].includes(res.after.state)) {
      break;
    }
    await sleep(50);
  }
  return res;
});

await step(out, 'unknown', async () => summary(await client.getTask({ id: 'no-such-task', tenant: '' })));
out.unknown.wireStatus = calls.at(-1)?.status;
out.unknown.wireCode = calls.at(-1)?.errorCode;
out.unknown.wireReason = calls.at(-1)?.errorReason;

out.calls = calls;
process.stdout.write(`${JSON.stringify(out)}\n`);
