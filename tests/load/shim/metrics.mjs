// k6/metrics for the shim: Trend, Counter, Rate, Gauge. Each thread (the
// runner and every VU worker) keeps its samples in `registry`; the runner
// merges them and computes the aggregates (see summary.mjs).
export const registry = new Map(); // name -> { type, contains, samples: [{ value, tags }] }

const nameRE = /^[a-zA-Z_][a-zA-Z0-9_]{0,127}$/;

export function define(name, type, isTime) {
  if (!nameRE.test(name)) {
    throw new Error(`invalid metric name ${JSON.stringify(name)}`);
  }
  let m = registry.get(name);
  if (!m) {
    m = { type, contains: isTime ? 'time' : 'default', samples: [] };
    registry.set(name, m);
  } else if (m.type !== type) {
    throw new Error(`metric ${name} is already a ${m.type}, not a ${type}`);
  }
  return m;
}

class Metric {
  constructor(name, type, isTime) {
    this.name = name;
    this._m = define(name, type, isTime);
  }

  add(value, tags) {
    let v;
    if (this._m.type === 'rate') {
      v = value ? 1 : 0; // k6: true or non-zero counts as a pass
    } else {
      v = typeof value === 'boolean' ? Number(value) : value;
      if (typeof v !== 'number' || !Number.isFinite(v)) {
        throw new TypeError(`${this.name}.add: ${value} is not a finite number`);
      }
    }
    this._m.samples.push(tags ? { value: v, tags: { ...tags } } : { value: v });
    return true;
  }
}

export class Trend extends Metric {
  constructor(name, isTime = false) {
    super(name, 'trend', isTime);
  }
}

export class Counter extends Metric {
  constructor(name, isTime = false) {
    super(name, 'counter', isTime);
  }
}

export class Rate extends Metric {
  constructor(name) {
    super(name, 'rate', false);
  }
}

export class Gauge extends Metric {
  constructor(name, isTime = false) {
    super(name, 'gauge', isTime);
  }
}
