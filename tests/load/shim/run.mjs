#!/usr/bin/env node
// A minimal stand-in for `k6 run`, so the k6 scripts in tests/load can be
// exercised where k6 is not installed (go test ./tests/load runs them).
//
//   node tests/load/shim/run.mjs [-i N|--iterations N] [-u N|--vus N]
//        [-d 30s|--duration 30s] [-e KEY=VALUE]... [--summary-export FILE] SCRIPT.js
//
// It implements only what the scripts use: the modules k6 (check, group,
// sleep, fail), k6/http (synchronous requests with k6's timings) and
// k6/metrics (Trend, Counter, Rate, Gauge); the globals __ENV (the process
// environment plus -e values), __VU and __ITER; options.vus, .iterations
// (shared by the VUs), .duration and .thresholds; setup() and teardown().
// Each VU runs in its own worker thread (vu.mjs). Thresholds support
// avg, min, max, med, p(N) on trends, count and rate on counters, rate on
// rates and value on gauges, compared with < <= > >= == != ===, on a metric
// or a tag-filtered submetric (`http_req_duration{name:chat}`).
//
// Output: a JSON summary on stdout, shaped like k6's handleSummary data
// (metrics[name] = {type, contains, values, thresholds}; checks[]), plus
// state, interrupted_iterations and ok. Script console output goes to stderr.
//
// Exit status: 0 when everything passed; 99 when a threshold failed (as
// k6); 1 when a check failed, an iteration threw or a VU crashed (stricter
// than k6, which leaves those to thresholds); 107 when the script's init
// code, setup() or teardown() threw (as k6); 2 for a usage error. A
// threshold on a metric without samples fails (k6 may skip it).
import { writeFileSync } from 'node:fs';
import { register } from 'node:module';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { checkResults } from './k6.mjs';
import { define, registry } from './metrics.mjs';

function die(code, msg) {
  console.error(`k6 shim: ${msg}`);
  process.exit(code);
}

function parseArgs(argv) {
  const a = { env: {} };
  const value = (i, flag) => {
    if (i >= argv.length) die(2, `${flag} needs a value`);
    return argv[i];
  };
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i];
    let inline;
    const eq = arg.indexOf('=');
    if (arg.startsWith('--') && eq > 0) {
      inline = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    }
    const next = () => (inline !== undefined ? inline : value(++i, arg));
    switch (arg) {
      case '-i':
      case '--iterations':
        a.iterations = positive(next(), arg);
        break;
      case '-u':
      case '--vus':
        a.vus = positive(next(), arg);
        break;
      case '-d':
      case '--duration':
        a.duration = next();
        break;
      case '-e':
      case '--env': {
        const kv = next();
        const j = kv.indexOf('=');
        if (j <= 0) die(2, `-e wants KEY=VALUE, got ${kv}`);
        a.env[kv.slice(0, j)] = kv.slice(j + 1);
        break;
      }
      case '--summary-export':
        a.summaryExport = next();
        break;
      default:
        if (arg.startsWith('-') || a.script) die(2, `unexpected argument ${argv[i]}`);
        a.script = arg;
    }
  }
  if (!a.script) die(2, 'usage: run.mjs [-i N] [-u N] [-d DURATION] [-e KEY=VALUE]... [--summary-export FILE] SCRIPT.js');
  return a;
}

function positive(v, what) {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) die(2, `${what}: want a positive integer, got ${v}`);
  return n;
}

function durationMs(v) {
  if (typeof v === 'number') return v;
  const s = String(v);
  let total = 0;
  let rest = s;
  const re = /^(\d+(?:\.\d+)?)(ms|s|m|h)/;
  while (rest) {
    const m = re.exec(rest);
    if (!m) die(2, `bad duration ${s}`);
    total += Number(m[1]) * { ms: 1, s: 1000, m: 60000, h: 3600000 }[m[2]];
    rest = rest.slice(m[0].length);
  }
  return total;
}

// --- thresholds -----------------------------------------------------------

const allowed = {
  trend: ['avg', 'min', 'max', 'med', 'p'],
  counter: ['count', 'rate'],
  rate: ['rate'],
  gauge: ['value'],
};

function parseThresholds(thresholds, metrics) {
  const out = [];
  for (const [key, list] of Object.entries(thresholds || {})) {
    const km = /^([a-zA-Z_][a-zA-Z0-9_]*)(?:\{(.*)\})?$/.exec(key);
    if (!km) die(2, `bad threshold key ${key}`);
    const m = metrics.get(km[1]);
    if (!m) die(2, `threshold on undefined metric ${km[1]}`);
    const tags = {};
    for (const part of km[2] ? km[2].split(',') : []) {
      const j = part.indexOf(':');
      if (j <= 0) die(2, `bad tag filter in ${key}`);
      tags[part.slice(0, j).trim()] = part.slice(j + 1).trim().replace(/^["']|["']$/g, '');
    }
    for (const item of Array.isArray(list) ? list : [list]) {
      const expr = typeof item === 'string' ? item : item && item.threshold;
      const em = /^\s*(avg|min|max|med|count|rate|value|p\((\d+(?:\.\d+)?)\))\s*(<=|>=|===|==|!=|<|>)\s*(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*$/.exec(
        String(expr),
      );
      if (!em) die(2, `unsupported threshold ${JSON.stringify(expr)} on ${key}`);
      const agg = em[2] !== undefined ? 'p' : em[1];
      if (!allowed[m.type].includes(agg)) die(2, `${em[1]} is not an aggregation of ${m.type} ${km[1]}`);
      out.push({ key, metric: km[1], tags, expr, stat: em[1], op: em[3], limit: Number(em[4]) });
    }
  }
  return out;
}

function compare(v, op, limit) {
  switch (op) {
    case '<':
      return v < limit;
    case '<=':
      return v <= limit;
    case '>':
      return v > limit;
    case '>=':
      return v >= limit;
    case '!=':
      return v !== limit;
    default:
      return v === limit;
  }
}

// --- aggregation ----------------------------------------------------------

function percentile(sorted, p) {
  if (!sorted.length) return 0;
  const r = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(r);
  const hi = Math.ceil(r);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (r - lo);
}

function aggregate(type, samples, seconds, extra = []) {
  const vals = samples.map((s) => s.value);
  const n = vals.length;
  const sum = vals.reduce((a, b) => a + b, 0);
  switch (type) {
    case 'trend': {
      const sorted = [...vals].sort((a, b) => a - b);
      const v = {
        count: n,
        avg: n ? sum / n : 0,
        min: n ? sorted[0] : 0,
        med: percentile(sorted, 50),
        max: n ? sorted[n - 1] : 0,
        'p(90)': percentile(sorted, 90),
        'p(95)': percentile(sorted, 95),
      };
      for (const s of extra) {
        const pm = /^p\((.+)\)$/.exec(s);
        if (pm) v[s] = percentile(sorted, Number(pm[1]));
      }
      return v;
    }
    case 'counter':
      return { count: sum, rate: seconds > 0 ? sum / seconds : 0 };
    case 'rate':
      return { rate: n ? sum / n : 0, passes: sum, fails: n - sum };
    default:
      return { value: n ? vals[n - 1] : 0, min: n ? Math.min(...vals) : 0, max: n ? Math.max(...vals) : 0 };
  }
}

function matches(sample, tags) {
  for (const [k, v] of Object.entries(tags)) {
    if (!sample.tags || String(sample.tags[k]) !== v) return false;
  }
  return true;
}

// --- run ------------------------------------------------------------------

const args = parseArgs(process.argv.slice(2));
register('./hooks.mjs', import.meta.url);
console.log = console.info = console.debug = console.error; // stdout is the summary's

const env = { ...process.env, ...args.env };
Object.assign(globalThis, { __ENV: env, __VU: 0, __ITER: 0 });
define('iterations', 'counter', false);
define('iteration_duration', 'trend', true);

const scriptURL = pathToFileURL(resolve(args.script)).href;
let mod;
try {
  mod = await import(scriptURL);
} catch (e) {
  die(107, `loading ${args.script}: ${(e && e.stack) || e}`);
}
const opts = mod.options || {};
for (const k of ['scenarios', 'stages']) {
  if (opts[k]) die(2, `options.${k} is not supported by the shim`);
}
if (typeof mod.default !== 'function') die(107, `${args.script} has no default function`);

const thresholds = parseThresholds(opts.thresholds, registry);
let iterations = args.iterations ?? opts.iterations ?? null;
const duration = args.duration ?? opts.duration ?? null;
if (iterations === null && duration === null) iterations = 1;
let vus = args.vus ?? opts.vus ?? 1;
if (iterations !== null) vus = Math.min(vus, iterations);

let data;
if (typeof mod.setup === 'function') {
  try {
    data = await mod.setup();
  } catch (e) {
    die(107, `setup: ${(e && e.stack) || e}`);
  }
  // k6 hands setup's result to the VUs as JSON.
  data = data === undefined ? undefined : JSON.parse(JSON.stringify(data));
}

const started = performance.now();
const counter = new Int32Array(new SharedArrayBuffer(4));
const deadline = duration !== null ? Date.now() + durationMs(duration) : null;
const results = await Promise.all(
  Array.from({ length: vus }, (_, i) => {
    const vu = i + 1;
    return new Promise((done) => {
      const w = new Worker(new URL('./vu.mjs', import.meta.url), {
        workerData: { scriptURL, vu, env, data, counter, iterations, deadline },
      });
      let result = null;
      w.once('message', (m) => (result = m));
      w.once('error', (e) => console.error(`k6 shim: VU ${vu} crashed: ${(e && e.stack) || e}`));
      w.once('exit', () => done(result));
    });
  }),
);
const seconds = (performance.now() - started) / 1000;

let teardownFailed = false;
if (typeof mod.teardown === 'function') {
  try {
    await mod.teardown(data);
  } catch (e) {
    teardownFailed = true;
    console.error(`k6 shim: teardown: ${(e && e.stack) || e}`);
  }
}

// Merge the samples of setup/teardown (this thread) and of every VU.
const metrics = new Map();
const checks = new Map();
const mergeChecks = (list) => {
  for (const c of list) {
    const key = `${c.path}::${c.name}`;
    const r = checks.get(key) || { name: c.name, path: c.path, passes: 0, fails: 0 };
    r.passes += c.passes;
    r.fails += c.fails;
    checks.set(key, r);
  }
};
const mergeMetric = (name, m) => {
  const cur = metrics.get(name);
  if (cur) cur.samples.push(...m.samples);
  else metrics.set(name, { type: m.type, contains: m.contains, samples: [...m.samples] });
};
for (const [name, m] of registry) mergeMetric(name, m);
mergeChecks(checkResults.values());
let interrupted = 0;
let crashed = 0;
for (const r of results) {
  if (!r) {
    crashed++;
    continue;
  }
  for (const m of r.metrics) mergeMetric(m.name, m);
  mergeChecks(r.checks);
  interrupted += r.interrupted;
}

const summary = { metrics: {}, checks: [...checks.values()], state: {} };
for (const [name, m] of metrics) {
  const wanted = thresholds.filter((t) => t.key === name).map((t) => t.stat);
  summary.metrics[name] = { type: m.type, contains: m.contains, values: aggregate(m.type, m.samples, seconds, wanted) };
}
let thresholdsOK = true;
for (const t of thresholds) {
  const m = metrics.get(t.metric);
  const samples = Object.keys(t.tags).length ? m.samples.filter((s) => matches(s, t.tags)) : m.samples;
  let entry = summary.metrics[t.key];
  if (!entry) {
    entry = { type: m.type, contains: m.contains, values: aggregate(m.type, samples, seconds, [t.stat]) };
    summary.metrics[t.key] = entry;
  } else if (!(t.stat in entry.values)) {
    Object.assign(entry.values, aggregate(m.type, samples, seconds, [t.stat]));
  }
  const actual = entry.values[t.stat];
  const ok = samples.length > 0 && compare(actual, t.op, t.limit);
  entry.thresholds = entry.thresholds || {};
  entry.thresholds[t.expr] = samples.length ? { ok, value: actual } : { ok, samples: 0 };
  thresholdsOK = thresholdsOK && ok;
}
const checksOK = summary.checks.every((c) => c.fails === 0);
summary.state = { vus, testRunDurationMs: seconds * 1000 };
summary.interrupted_iterations = interrupted;
summary.crashed_vus = crashed;
summary.ok = thresholdsOK && checksOK && !interrupted && !crashed && !teardownFailed;

const text = JSON.stringify(summary, null, 2);
process.stdout.write(text + '\n');
if (args.summaryExport) writeFileSync(args.summaryExport, text + '\n');

const nChecks = summary.checks.reduce((a, c) => a + c.passes + c.fails, 0);
const nPassed = summary.checks.reduce((a, c) => a + c.passes, 0);
const failedThresholds = thresholds.filter((t) => !summary.metrics[t.key].thresholds[t.expr].ok);
console.error(
  `k6 shim: ${args.script}: ${summary.metrics.iterations.values.count} iterations (${interrupted} interrupted, ${crashed} VUs crashed), ` +
    `checks ${nPassed}/${nChecks}, thresholds ${thresholds.length - failedThresholds.length}/${thresholds.length}` +
    failedThresholds.map((t) => `; FAILED ${t.key}: ${t.expr}`).join(''),
);
if (!thresholdsOK) process.exit(99);
if (!summary.ok) process.exit(teardownFailed ? 107 : 1);
