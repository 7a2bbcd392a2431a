// Helper thread of the shim's k6/http: performs one request at a time for
// the thread that blocks in http.mjs, replies on the port, then wakes it.
import http from 'node:http';
import https from 'node:https';
import { workerData } from 'node:worker_threads';

const { port, flag } = workerData;
// k6 keeps connections alive per VU; so does each VU's helper.
const agents = {
  'http:': new http.Agent({ keepAlive: true, maxSockets: 1 }),
  'https:': new https.Agent({ keepAlive: true, maxSockets: 1 }),
};

port.on('message', async (spec) => {
  const r = await send(spec);
  port.postMessage(r);
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
});

function send({ method, url, headers, body, timeoutMs }) {
  return new Promise((resolve) => {
    const t = { start: performance.now() };
    let done = false;
    const finish = (r) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      const now = performance.now();
      const at = (k, def) => (t[k] === undefined ? def : t[k]);
      const socket = at('socket', now);
      const connected = at('connected', socket);
      const sent = at('sent', now);
      const response = at('response', now);
      const end = at('end', now);
      const ms = (a, b) => Math.max(0, b - a);
      const timings = {
        blocked: ms(t.start, socket),
        connecting: ms(socket, connected),
        tls_handshaking: 0,
        sending: ms(connected, sent),
        waiting: ms(sent, response),
        receiving: ms(response, end),
      };
      timings.duration = timings.sending + timings.waiting + timings.receiving;
      resolve({ status: 0, headers: {}, body: null, ...r, timings });
    };
    let u;
    try {
      u = new URL(url);
    } catch (e) {
      finish({ error: String(e.message) });
      return;
    }
    const mod = u.protocol === 'https:' ? https : http;
    const req = mod.request(u, { method, headers, agent: agents[u.protocol] }, (res) => {
      t.response = performance.now();
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        t.end = performance.now();
        finish({
          status: res.statusCode,
          statusText: res.statusMessage,
          headers: res.headers,
          body: Buffer.concat(chunks).toString('utf8'),
        });
      });
      res.on('error', (e) => finish({ error: String(e.message) }));
    });
    req.on('socket', (s) => {
      t.socket = performance.now();
      if (s.connecting) s.once('connect', () => (t.connected = performance.now()));
      else t.connected = t.socket;
    });
    req.on('finish', () => (t.sent = performance.now()));
    req.on('error', (e) => finish({ error: String(e.message) }));
    const timer = setTimeout(() => req.destroy(new Error(`request timeout after ${timeoutMs}ms`)), timeoutMs);
    req.end(body === null ? undefined : body);
  });
}
