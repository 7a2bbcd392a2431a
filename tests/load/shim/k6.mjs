// The `k6` module for the shim: check, group, sleep, fail.
import { Rate } from './metrics.mjs';

const checksMetric = new Rate('checks');
const groups = [];

// checkResults: "group::name" (or "name" outside groups) -> { name, path, passes, fails }
export const checkResults = new Map();

export function check(value, sets, tags) {
  let all = true;
  const path = groups.length ? '::' + groups.join('::') : '';
  for (const [name, fn] of Object.entries(sets)) {
    // As in k6, an exception thrown by a check function ends the iteration.
    const ok = Boolean(typeof fn === 'function' ? fn(value) : fn);
    const key = path ? `${path}::${name}` : name;
    let r = checkResults.get(key);
    if (!r) {
      r = { name, path, passes: 0, fails: 0 };
      checkResults.set(key, r);
    }
    if (ok) r.passes++;
    else r.fails++;
    checksMetric.add(ok, { check: name, group: path, ...tags });
    all = all && ok;
  }
  return all;
}

export function group(name, fn) {
  groups.push(name);
  try {
    return fn();
  } finally {
    groups.pop();
  }
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));

export function sleep(seconds) {
  Atomics.wait(sleeper, 0, 0, Math.max(0, Number(seconds) * 1000));
}

export function fail(message) {
  throw new Error(message);
}

export default { check, group, sleep, fail };
