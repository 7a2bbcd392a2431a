// Module hooks for the k6 shim (registered by run.mjs and vu.mjs with
// module.register): map k6's built-in module names to the shim's files, and
// load plain .js files as ES modules, as k6 does (Node would otherwise treat
// a .js file outside a "type": "module" package as CommonJS).
import { readFile } from 'node:fs/promises';

const builtins = {
  k6: 'k6.mjs',
  'k6/http': 'http.mjs',
  'k6/metrics': 'metrics.mjs',
};

export async function resolve(specifier, context, next) {
  const file = builtins[specifier];
  if (file) {
    return { url: new URL(file, import.meta.url).href, shortCircuit: true };
  }
  if (specifier.startsWith('k6/')) {
    throw new Error(`the k6 shim does not implement ${specifier} (only k6, k6/http, k6/metrics)`);
  }
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (url.startsWith('file:') && url.endsWith('.js') && !url.includes('/node_modules/')) {
    return { format: 'module', source: await readFile(new URL(url)), shortCircuit: true };
  }
  return next(url, context);
}
