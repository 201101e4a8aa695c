// What the @a2a-js/sdk peers of orchd's interop tests share whatever the
// SDK release: it imports no SDK (each peer directory installs its own),
// only Node's standard library.

// The five behaviours every agents.mjs serves, one agent each.
export const behaviours = ['complete', 'stream', 'ask', 'slow', 'steer'];

// listen starts an express app on an ephemeral port of 127.0.0.1 and
// returns its server and base URL.
export async function listen(app) {
  const server = await new Promise((resolve, reject) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
    s.on('error', reject);
  });
  return { server, base: `http://127.0.0.1:${server.address().port}` };
}

// runAgents starts one agent per behaviour with start(behaviour), which
// resolves to {base, server}; prints ONE JSON line mapping behaviour to base
// URL; and stops every server when stdin ends or on SIGTERM / SIGINT.
export async function runAgents(name, start) {
  const started = await Promise.all(behaviours.map(start));
  const stop = (why) => {
    console.error(`${name} agents: stopping (${why})`);
    for (const { server } of started) {
      server.closeAllConnections?.();
      server.close();
    }
    process.exit(0);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  process.stdin.on('end', () => stop('stdin closed'));
  process.stdin.on('error', () => stop('stdin error'));
  process.stdin.resume();
  process.stdout.write(`${JSON.stringify(Object.fromEntries(behaviours.map((b, i) => [b, started[i].base])))}\n`);
}

// recordingFetch returns a fetch that records every request in calls: its
// path, A2A-Version header and JSON-RPC method, then its status and, for
// an error answer, the error code and A2A reason (JSON-RPC: {"error":
// {"code": -32001}}; HTTP+JSON: google.rpc.Status with the reason in an
// ErrorInfo detail). The caller checks which interface and version the
// SDK chose.
export function recordingFetch(calls) {
  return async (input, init = {}) => {
    const url = new URL(typeof input === 'string' ? input : input.url);
    const headers = new Headers(init.headers);
    let method = '';
    try {
      method = JSON.parse(init.body ?? '{}').method ?? '';
    } catch {
      // not JSON-RPC
    }
    const call = { path: url.pathname, version: headers.get('A2A-Version') ?? '', method };
    calls.push(call);
    const res = await fetch(input, init);
    call.status = res.status;
    if (!(res.headers.get('content-type') ?? '').includes('text/event-stream')) {
      const body = await res.clone().json().catch(() => undefined);
      if (body?.error) {
        call.errorCode = body.error.code;
        const reason = body.error.details?.find?.((d) => d?.reason)?.reason;
        if (reason) {
          call.errorReason = reason;
        }
      }
    }
    return res;
  };
}
