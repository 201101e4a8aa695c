// Five A2A 0.3 agents built with @a2a-js/sdk 0.3.x for orchd's
// interoperability tests: complete, stream, ask, slow and steer, each on its
// own ephemeral port of 127.0.0.1 with its own (0.3 layout) Agent Card.
//
// Once all of them listen, the process prints one JSON line to stdout,
// {"complete":"http://127.0.0.1:P",...}, and it exits when stdin reaches EOF
// or on SIGTERM. Everything else goes to stderr.
//
// The steer agent implements the steering extension by hand: it advertises
// it, and a message/send carrying the extension's control metadata for its
// working task is taken before the SDK's request handler (which would start a
// second execution of the task), recorded, and answered with the task. What
// it took is served as JSON at GET /steering/log.

import { randomUUID } from 'node:crypto';
import express from 'express';
import { A2AError, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';

import { listen, runAgents } from '../js-shared/peers.mjs';

// stdout carries only the line of URLs.
console.log = console.info = console.debug = (...args) => console.error(...args);

const PREFIX = 'js03';
const STEERING = 'https://a2a-protocol.org/extensions/steering/v1';
const CONTROL = `${STEERING}/control`;
const INTERRUPTED = `${STEERING}/interrupted`;
const RECEIPT = `${STEERING}/receipt`;
const SLOW_LIMIT_MS = 60_000;
const FINAL = new Set(['completed', 'failed', 'canceled', 'rejected', 'input-required', 'auth-required']);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function textOf(message) {
  return (message?.parts ?? []).filter((p) => p.kind === 'text').map((p) => p.text).join(' ');
}

function agentMessage(rc, text) {
  return { kind: 'message', messageId: randomUUID(), role: 'agent', parts: [{ kind: 'text', text }], taskId: rc.taskId, contextId: rc.contextId };
}

function status(rc, state, message, metadata) {
  const ev = {
    kind: 'status-update', taskId: rc.taskId, contextId: rc.contextId,
    status: { state, message, timestamp: new Date().toISOString() },
    final: FINAL.has(state),
  };
  if (metadata) {
    ev.metadata = metadata;
  }
  return ev;
}

// startTask is the first event of an execution: a new task, or the stored
// one carried on in state.
function startTask(rc, state = 'submitted', metadata) {
  const base = rc.task ?? { kind: 'task', id: rc.taskId, contextId: rc.contextId, history: [rc.userMessage], artifacts: [] };
  const task = { ...base, status: { state, timestamp: new Date().toISOString() } };
  if (metadata) {
    task.metadata = { ...(base.metadata ?? {}), ...metadata };
  }
  return task;
}

function artifact(rc, id, text, append, lastChunk) {
  return {
    kind: 'artifact-update', taskId: rc.taskId, contextId: rc.contextId,
    artifact: { artifactId: id, name: 'result', parts: [{ kind: 'text', text }] },
    append, lastChunk,
  };
}

// Runs tracks the executions that stay working until something wakes them:
// a cancel, an interrupt or the time limit.
class Runs {
  constructor() {
    this.byTask = new Map();
  }

  // wait parks the execution of rc's task and resolves with what woke it.
  wait(rc, bus) {
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.wake(rc.taskId, 'timeout'), SLOW_LIMIT_MS);
      this.byTask.set(rc.taskId, {
        rc, bus,
        wake: (why) => {
          clearTimeout(timer);
          this.byTask.delete(rc.taskId);
          resolve(why);
        },
      });
    });
  }

  get(taskId) {
    return this.byTask.get(taskId);
  }

  wake(taskId, why) {
    this.byTask.get(taskId)?.wake(why);
  }
}

// Executor drives one behaviour.
class Executor {
  constructor(behaviour) {
    this.behaviour = behaviour;
    this.runs = new Runs();
  }

  async execute(rc, bus) {
    const text = textOf(rc.userMessage);
    console.error(`${PREFIX}-${this.behaviour}: task ${rc.taskId}: ${JSON.stringify(text)}`);
    try {
      await this.run(rc, bus, text);
    } finally {
      bus.finished();
    }
  }

  async run(rc, bus, text) {
    switch (this.behaviour) {
      case 'complete':
        bus.publish(startTask(rc));
        bus.publish(artifact(rc, randomUUID(), `done: ${text}`, false, true));
        bus.publish(status(rc, 'completed', agentMessage(rc, 'completed')));
        return;
      case 'stream': {
        bus.publish(startTask(rc));
        bus.publish(status(rc, 'working', agentMessage(rc, 'streaming')));
        const id = randomUUID();
        for (let i = 1; i <= 3; i++) {
          await sleep(30);
          bus.publish(artifact(rc, id, `part ${i}`, i > 1, i === 3));
        }
        bus.publish(status(rc, 'completed', agentMessage(rc, 'streamed')));
        return;
      }
      case 'ask':
        if (!rc.task) {
          bus.publish(startTask(rc));
          bus.publish(status(rc, 'input-required', agentMessage(rc, 'which year?')));
          return;
        }
        bus.publish(startTask(rc, 'working'));
        bus.publish(artifact(rc, randomUUID(), `answer: ${text}`, false, true));
        bus.publish(status(rc, 'completed', agentMessage(rc, 'answered')));
        return;
      case 'slow':
      case 'steer': {
        // A resumed task is no longer interrupted.
        bus.publish(rc.task ? startTask(rc, 'working', { [INTERRUPTED]: false }) : startTask(rc));
        bus.publish(status(rc, 'working'));
        const why = await this.runs.wait(rc, bus);
        console.error(`${PREFIX}-${this.behaviour}: task ${rc.taskId} woke: ${why}`);
        if (why === 'timeout') {
          bus.publish(status(rc, 'completed', agentMessage(rc, 'worked for a minute')));
        }
        // A cancel or an interrupt published the final event already.
        return;
      }
      default:
        throw new Error(`unknown behaviour ${this.behaviour}`);
    }
  }

  async cancelTask(taskId, bus) {
    console.error(`${PREFIX}-${this.behaviour}: cancel ${taskId}`);
    const run = this.runs.get(taskId);
    const rc = run?.rc ?? { taskId, contextId: '' };
    bus.publish(status(rc, 'canceled', agentMessage(rc, 'canceled')));
    this.runs.wake(taskId, 'cancel');
  }
}

// SteerableHandler takes steering signals before the stock request handler.
class SteerableHandler extends DefaultRequestHandler {
  constructor(card, store, executor) {
    super(card, store, executor);
    this.card = card;
    this.store = store;
    this.executor = executor;
    this.seq = 0;
    // log lists every signal taken, in order.
    this.log = [];
  }

  async sendMessage(params, context) {
    if (params.message?.metadata?.[CONTROL] === undefined) {
      return super.sendMessage(params, context);
    }
    return this.signal(params.message, context);
  }

  async *sendMessageStream(params, context) {
    if (params.message?.metadata?.[CONTROL] === undefined) {
      yield* super.sendMessageStream(params, context);
      return;
    }
    yield await this.signal(params.message, context);
  }

  async signal(message, context) {
    const control = message.metadata[CONTROL];
    if (control !== 'steer' && control !== 'interrupt') {
      throw A2AError.invalidParams(`unknown steering control ${JSON.stringify(control)}: want steer or interrupt`);
    }
    if (!message.taskId) {
      throw A2AError.invalidParams(`a steering message needs the taskId of the task to ${control}`);
    }
    const task = await this.store.load(message.taskId, context);
    if (!task) {
      throw A2AError.taskNotFound(message.taskId);
    }
    const run = this.executor.runs.get(task.id);
    if (task.status?.state !== 'working' || !run) {
      throw A2AError.unsupportedOperation(`${control} of task ${task.id}, which is ${task.status?.state}, not working`);
    }
    const seq = ++this.seq;
    const text = textOf(message);
    this.log.push({ control, text, taskId: task.id, messageId: message.messageId, seq });
    console.error(`${this.card.name}: ${control} #${seq} for ${task.id}: ${JSON.stringify(text)}`);
    const taken = { ...message, taskId: task.id, contextId: task.contextId };
    if (control === 'steer') {
      // The steer becomes the status message, so it lands in the history.
      run.bus.publish(status(run.rc, 'working', taken, { [`${STEERING}/seq`]: seq }));
      await this.settled(task.id, context, (t) => t.history?.some((m) => m.messageId === message.messageId));
    } else {
      // The 0.3 SDK keeps task metadata only from task events, so the
      // interrupted task is published whole before the final status.
      const now = await this.store.load(task.id, context);
      const stopped = agentMessage(run.rc, 'interrupted');
      run.bus.publish({
        ...now,
        status: { state: 'input-required', message: stopped, timestamp: new Date().toISOString() },
        history: [...(now.history ?? []), taken],
        metadata: { ...(now.metadata ?? {}), [INTERRUPTED]: true },
      });
      run.bus.publish(status(run.rc, 'input-required', stopped));
      run.wake('interrupt');
      await this.settled(task.id, context, (t) => t.status?.state === 'input-required');
    }
    const answer = structuredClone(await this.store.load(task.id, context));
    answer.metadata = {
      ...(answer.metadata ?? {}),
      [RECEIPT]: { control, messageId: message.messageId, seq, hops: [{ agent: this.card.name, seq }] },
    };
    return answer;
  }

  // settled waits until the stored task satisfies ok (the SDK applies
  // published events asynchronously).
  async settled(taskId, context, ok) {
    for (let i = 0; i < 500; i++) {
      const t = await this.store.load(taskId, context);
      if (t && ok(t)) {
        return t;
      }
      await sleep(10);
    }
    throw new Error(`task ${taskId} did not settle`);
  }
}

function cardFor(behaviour, base) {
  const extensions = [];
  if (behaviour === 'steer') {
    extensions.push({
      uri: STEERING,
      description: 'Takes steers and interrupts while working (implemented by hand).',
      required: false,
      params: { steerable: true, interruptible: true },
    });
  }
  return {
    protocolVersion: '0.3.0',
    name: `${PREFIX}-${behaviour}`,
    description: `@a2a-js/sdk 0.3.x test agent: ${behaviour}`,
    version: '1.0.0',
    url: `${base}/a2a/jsonrpc`,
    preferredTransport: 'JSONRPC',
    additionalInterfaces: [{ url: `${base}/a2a/jsonrpc`, transport: 'JSONRPC' }],
    capabilities: { streaming: behaviour === 'stream', pushNotifications: false, extensions },
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [{ id: behaviour, name: behaviour, description: `the ${behaviour} behaviour`, tags: [behaviour] }],
  };
}

async function start(behaviour) {
  const app = express();
  const { server, base } = await listen(app);
  const card = cardFor(behaviour, base);
  const store = new InMemoryTaskStore();
  const executor = new Executor(behaviour);
  const handler = behaviour === 'steer'
    ? new SteerableHandler(card, store, executor)
    : new DefaultRequestHandler(card, store, executor);
  app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
  app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  if (behaviour === 'steer') {
    app.get('/steering/log', (_req, res) => res.json(handler.log));
  }
  return { base, server };
}

await runAgents(PREFIX, start);
