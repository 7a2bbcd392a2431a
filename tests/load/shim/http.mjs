// k6/http for the shim. k6's requests are synchronous; here a helper worker
// thread (http_worker.mjs) performs each request with node:http while the
// calling thread blocks in Atomics.wait, then takes the reply off a
// MessagePort with receiveMessageOnPort. Timings follow k6's definitions:
// sending, waiting (request written -> first response byte, i.e. the
// response headers), receiving (headers -> last body byte), and
// duration = sending + waiting + receiving.
import { MessageChannel, Worker, receiveMessageOnPort } from 'node:worker_threads';
import { Counter, Rate, Trend } from './metrics.mjs';

const reqs = new Counter('http_reqs');
const failed = new Rate('http_req_failed');
const trends = {};
for (const k of ['duration', 'blocked', 'connecting', 'sending', 'waiting', 'receiving']) {
  trends[k] = new Trend(`http_req_${k}`, true);
}

let helper;

function roundTrip(spec) {
  if (!helper) {
    const { port1, port2 } = new MessageChannel();
    const flag = new Int32Array(new SharedArrayBuffer(4));
    const worker = new Worker(new URL('./http_worker.mjs', import.meta.url), {
      workerData: { port: port2, flag },
      transferList: [port2],
    });
    worker.unref();
    helper = { port: port1, flag };
  }
  Atomics.store(helper.flag, 0, 0);
  helper.port.postMessage(spec);
  // The worker enforces spec.timeoutMs; the margin covers its start-up.
  if (Atomics.wait(helper.flag, 0, 0, spec.timeoutMs + 10000) === 'timed-out') {
    throw new Error(`k6 shim: the HTTP helper thread did not answer ${spec.method} ${spec.url}`);
  }
  return receiveMessageOnPort(helper.port).message;
}

function durationMs(v, def) {
  if (v === undefined || v === null) return def;
  if (typeof v === 'number') return v; // k6: a number is milliseconds
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(String(v));
  if (!m) throw new Error(`bad timeout ${v}`);
  return Number(m[1]) * { ms: 1, s: 1000, m: 60000, h: 3600000 }[m[2]];
}

// Header names as k6 (Go) gives them: Content-Type, X-Request-Id.
function canonical(name) {
  return name.toLowerCase().replace(/(^|-)([a-z])/g, (_, d, c) => d + c.toUpperCase());
}

class Response {
  constructor(r, request) {
    this.status = r.status;
    this.status_text = r.statusText || '';
    this.body = r.body;
    this.headers = {};
    for (const [k, v] of Object.entries(r.headers || {})) {
      this.headers[canonical(k)] = Array.isArray(v) ? v.join(', ') : v;
    }
    this.timings = r.timings;
    this.error = r.error || '';
    this.error_code = r.error ? 1000 : 0;
    this.url = request.url;
    this.request = request;
  }

  // k6's json() also takes a GJSON selector; the shim supports dotted paths.
  json(selector) {
    let v = JSON.parse(this.body);
    if (selector) {
      for (const k of String(selector).split('.')) {
        v = v == null ? undefined : v[k];
      }
    }
    return v;
  }
}

export function request(method, url, body, params) {
  params = params || {};
  const headers = { ...params.headers };
  if (body !== null && body !== undefined && typeof body === 'object') {
    // k6 sends an object body as a form.
    body = Object.entries(body)
      .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
      .join('&');
    if (!Object.keys(headers).some((k) => k.toLowerCase() === 'content-type')) {
      headers['Content-Type'] = 'application/x-www-form-urlencoded';
    }
  }
  const spec = {
    method: method.toUpperCase(),
    url: String(url),
    headers,
    body: body === undefined || body === null ? null : String(body),
    timeoutMs: durationMs(params.timeout, 60000), // k6's default timeout is 60s
  };
  const r = roundTrip(spec);
  const res = new Response(r, { method: spec.method, url: spec.url, headers, body: spec.body });
  if (params.responseType === 'none') res.body = null;

  const ok = res.status >= 200 && res.status < 400; // k6's default expected statuses
  const tags = {
    name: spec.url,
    method: spec.method,
    url: spec.url,
    status: String(res.status),
    expected_response: String(ok),
    ...params.tags,
  };
  reqs.add(1, tags);
  failed.add(!ok, tags);
  for (const [k, t] of Object.entries(trends)) {
    t.add(res.timings[k], tags);
  }
  return res;
}

export const get = (url, params) => request('GET', url, null, params);
export const post = (url, body, params) => request('POST', url, body, params);
export const put = (url, body, params) => request('PUT', url, body, params);
export const patch = (url, body, params) => request('PATCH', url, body, params);
export const del = (url, body, params) => request('DELETE', url, body, params);
export const head = (url, params) => request('HEAD', url, null, params);

export default { request, get, post, put, patch, del, head };
