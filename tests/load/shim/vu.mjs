// One virtual user of the shim, in its own worker thread: imports the
// script (its init code runs once per VU, as in k6), then runs the default
// function until the shared iteration count or the deadline is reached, and
// posts its metric samples and check results back to run.mjs.
import { register } from 'node:module';
import { parentPort, workerData } from 'node:worker_threads';
import { checkResults } from './k6.mjs';
import { Counter, Trend, registry } from './metrics.mjs';

register('./hooks.mjs', import.meta.url);
console.log = console.info = console.debug = console.error; // stdout is the summary's

const { scriptURL, vu, env, data, counter, iterations, deadline } = workerData;
Object.assign(globalThis, { __ENV: env, __VU: vu, __ITER: 0 });
const iterationCount = new Counter('iterations');
const iterationDuration = new Trend('iteration_duration', true);

const mod = await import(scriptURL);
let interrupted = 0;
for (let i = 0; ; i++) {
  if (deadline !== null && Date.now() >= deadline) break;
  if (iterations !== null && Atomics.add(counter, 0, 1) >= iterations) break;
  globalThis.__ITER = i;
  const t0 = performance.now();
  try {
    await mod.default(data);
    iterationCount.add(1);
    iterationDuration.add(performance.now() - t0);
  } catch (e) {
    // k6 logs the exception and goes on with the next iteration.
    interrupted++;
    console.error(`VU ${vu} iteration ${i} interrupted: ${(e && e.stack) || e}`);
  }
}
parentPort.postMessage({
  metrics: [...registry].map(([name, m]) => ({ name, ...m })),
  checks: [...checkResults.values()],
  interrupted,
});
