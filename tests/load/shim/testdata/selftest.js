// Exercises the shim itself (k6_test.go TestShim): metric kinds, tags and
// submetric thresholds, checks in a group, setup data, __ITER, sleep.
// One VU, iterations 1..4 add the values 1..4.
//   TREND_THRESHOLD  replaces the trend's threshold (to make one fail)
//   FAIL_CHECK=1     makes a check fail; THROW=1 makes every iteration throw
import http from 'k6/http';
import { check, group, sleep } from 'k6';
import { Counter, Gauge, Rate, Trend } from 'k6/metrics';

const trend = new Trend('selftest_trend');
const counter = new Counter('selftest_counter');
const rate = new Rate('selftest_rate');
const gauge = new Gauge('selftest_gauge');

export const options = {
  vus: 1,
  iterations: 4,
  thresholds: {
    selftest_trend: [__ENV.TREND_THRESHOLD || 'p(95)<=4', 'avg==2.5'],
    'selftest_trend{even:yes}': ['avg==3'],
    selftest_counter: ['count==10'],
    selftest_rate: ['rate==0.5'],
    selftest_gauge: ['value==4'],
    'http_req_duration{name:health}': ['max<10000'],
  },
};

export function setup() {
  return { from: 'setup' };
}

export default function (data) {
  if (__ENV.THROW === '1') throw new Error('thrown on purpose');
  const v = __ITER + 1;
  trend.add(v, { even: v % 2 === 0 ? 'yes' : 'no' });
  counter.add(v);
  rate.add(v % 2 === 0);
  gauge.add(v);
  sleep(0.001);
  group('selftest', () => {
    const res = http.get(`${__ENV.BASE_URL}/health`, { tags: { name: 'health' } });
    check(res, {
      'health is 200': (r) => r.status === 200,
      'body is json': (r) => r.json('status') === 'ok',
      'header canonical': (r) => r.headers['Content-Type'] === 'application/json',
      'setup data arrived': () => data.from === 'setup',
      'FAIL_CHECK unset': () => __ENV.FAIL_CHECK !== '1',
    });
  });
}
