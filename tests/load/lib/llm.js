// Shared helpers of the LLM load scripts: configuration from __ENV, request
// headers, prompts and an SSE parser. Plain ES2017 modules, so the scripts
// run unchanged under k6 and under the Node shim in ../shim.
//
// Environment (k6: -e KEY=VALUE, or the process environment):
//   BASE_URL     server root, default http://127.0.0.1:8080
//   MODEL        model name; by default setup() asks GET /v1/models
//   API_KEY      sent as Authorization: Bearer (OpenAI routes) or x-api-key
//                (Anthropic route) when set
//   VUS          virtual users, default 1
//   ITERATIONS   total iterations shared by the VUs; when unset the test runs
//                for DURATION (default 30s); when both are set DURATION caps
//                the run
//   MAX_TOKENS   tokens to generate per request, default 64
//   TEMPERATURE  sampling temperature; the server's default when unset
//   PROMPT       the user message (each request prefixes a unique tag)
import http from 'k6/http';
import { check } from 'k6';
import { Trend } from 'k6/metrics';

export const BASE_URL = (__ENV.BASE_URL || 'http://127.0.0.1:8080').replace(/\/+$/, '');
export const API_KEY = __ENV.API_KEY || '';
export const MAX_TOKENS = intEnv('MAX_TOKENS', 64);
export const TEMPERATURE = __ENV.TEMPERATURE ? Number(__ENV.TEMPERATURE) : undefined;
export const PROMPT =
  __ENV.PROMPT ||
  'You are helping with a load test of a language model server. Explain in a few ' +
    'sentences how a theatre troupe prepares for opening night, from the first ' +
    'read-through to the dress rehearsal.';

export function intEnv(name, def) {
  const v = __ENV[name];
  if (v === undefined || v === '') return def;
  const n = parseInt(v, 10);
  if (!(n >= 0)) throw new Error(`${name}=${v}: want a non-negative integer`);
  return n;
}

// runOptions returns k6 options: VUS, ITERATIONS / DURATION, and thresholds.
export function runOptions(thresholds) {
  const o = { vus: intEnv('VUS', 1), thresholds: thresholds };
  if (__ENV.ITERATIONS) {
    o.iterations = intEnv('ITERATIONS', 1);
    o.vus = Math.min(o.vus, o.iterations); // k6 refuses more VUs than iterations
  }
  if (__ENV.DURATION || !__ENV.ITERATIONS) o.duration = __ENV.DURATION || '30s';
  return o;
}

export function openaiHeaders() {
  const h = { 'Content-Type': 'application/json' };
  if (API_KEY) h.Authorization = `Bearer ${API_KEY}`;
  return h;
}

export function anthropicHeaders() {
  const h = { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' };
  if (API_KEY) h['x-api-key'] = API_KEY;
  return h;
}

// discoverModel is for setup(): MODEL, else the first model the server lists.
export function discoverModel() {
  if (__ENV.MODEL) return __ENV.MODEL;
  const res = http.get(`${BASE_URL}/v1/models`, { headers: openaiHeaders(), tags: { name: 'models' } });
  if (res.status !== 200) {
    throw new Error(`GET /v1/models: status ${res.status} ${res.error || res.body}; set MODEL`);
  }
  const list = res.json().data || [];
  if (!list.length) throw new Error('GET /v1/models listed no model; set MODEL');
  return list[0].id;
}

// tag makes a prompt unique per VU, iteration and purpose, and puts that at
// the start so that no two requests share more than the template's opening
// tokens: a prompt cache then cannot make one request cheaper than another.
export function tag(kind) {
  return `[${kind} vu ${__VU} iter ${__ITER} ${Math.random().toString(36).slice(2, 10)}]`;
}

// parseSSE splits a complete text/event-stream body into events
// ({event, data}), following the HTML server-sent events rules: blank lines
// end an event, "data" lines join with "\n", lines starting with ":" are
// comments (keep-alives), the event type defaults to "message".
export function parseSSE(body) {
  const events = [];
  let type = '';
  let data = [];
  const dispatch = () => {
    if (data.length) events.push({ event: type || 'message', data: data.join('\n') });
    type = '';
    data = [];
  };
  for (const line of String(body || '').split(/\r\n|\r|\n/)) {
    if (line === '') {
      dispatch();
      continue;
    }
    if (line[0] === ':') continue;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? '' : line.slice(i + 1);
    if (value[0] === ' ') value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'event') type = value;
  }
  dispatch();
  return events;
}

// json parses an event's data, or returns undefined.
export function json(s) {
  try {
    return JSON.parse(s);
  } catch (e) {
    return undefined;
  }
}

// PROBE is false when TTFT_PROBE=0: no probe requests, no ttft_ms or
// inter_token_ms.
export const PROBE = __ENV.TTFT_PROBE !== '0';

// latencyThresholds are the streaming scripts' example thresholds: errors,
// checks and time to headers, plus the probe's latencies when it runs.
export function latencyThresholds() {
  const t = {
    http_req_failed: ['rate<0.01'],
    errors: ['rate<0.01'],
    checks: ['rate>0.99'],
    ttfb_ms: ['p(95)<1000'],
  };
  if (PROBE) {
    t.ttft_ms = ['p(95)<2000'];
    t.inter_token_ms = ['p(95)<200'];
  }
  return t;
}

// Latency holds the streaming scripts' latency Trends (create it in the
// init context, as k6 requires of metrics): ttfb_ms, ttft_ms and
// inter_token_ms, measured as chat_stream.js explains.
export class Latency {
  constructor() {
    this.ttfb = new Trend('ttfb_ms', true);
    this.ttft = new Trend('ttft_ms', true);
    this.interToken = new Trend('inter_token_ms', true);
  }

  // probe sends the one-token, non-streaming probe (when PROBE) and
  // returns its duration, the time to a first token, or undefined.
  probe(url, body, params) {
    if (!PROBE) return undefined;
    const p = http.post(url, body, Object.assign({ tags: { name: 'ttft_probe' } }, params));
    if (!check(p, { 'probe: status is 200': (r) => r.status === 200 })) return undefined;
    this.ttft.add(p.timings.duration);
    return p.timings.duration;
  }

  // record adds a finished stream's time to headers and, with a probe
  // duration, its estimated interval between tokens.
  record(res, probeMs, tokens) {
    this.ttfb.add(res.timings.waiting);
    if (probeMs !== undefined && tokens > 1) {
      this.interToken.add(Math.max(0, res.timings.duration - probeMs) / (tokens - 1));
    }
  }
}
