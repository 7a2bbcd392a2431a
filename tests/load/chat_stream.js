// k6 load test: streaming chat completions.
//
//   k6 run -e BASE_URL=http://127.0.0.1:8080 tests/load/chat_stream.js
//   k6 run -e VUS=8 -e DURATION=2m -e MAX_TOKENS=128 tests/load/chat_stream.js
//
// Each iteration sends POST /v1/chat/completions with stream: true and
// stream_options.include_usage, parses the server-sent events and checks
// that the stream had content, reported usage and ended with data: [DONE].
// Environment: see lib/llm.js; TTFT_PROBE=0 turns the TTFT probe off.
//
// What the metrics measure. k6's http.post returns once the whole stream
// has ended and k6 has no streaming reader, so the arrival time of single
// tokens is invisible to the script. Therefore:
//
//   ttfb_ms         res.timings.waiting of the streaming request: request
//                   written -> response headers. troupe sends the headers
//                   and an empty role chunk as soon as it accepts the
//                   request, before prefill, so this is admission latency,
//                   NOT time to first token. (On a server that holds its
//                   headers back until the first token it would equal TTFT.)
//   ttft_ms         the duration of a separate probe before the streaming
//                   request: same prompt text behind a different unique tag
//                   (so a prompt cache helps neither), max_tokens 1, not
//                   streamed. It is the time to a one-token completion:
//                   queueing + prefill + the first token + framing, i.e. the
//                   client-visible TTFT of a prompt like the streamed one.
//   inter_token_ms  (streaming request's duration - ttft_ms) /
//                   (completion_tokens - 1): the mean interval between
//                   tokens of that request, an estimate that assumes its
//                   TTFT equals the probe's. Floored at 0; not recorded for
//                   a one-token reply.
//   completion_tokens  Counter of usage.completion_tokens (its rate is the
//                   generated tokens/s of the whole run).
//   errors          Rate of failed streaming requests (not 200, an error
//                   event, no content delta, no usage, or no [DONE]).
//
// The probe doubles the requests per iteration; http_req_duration is tagged
// name=chat_stream or name=ttft_probe to tell them apart. For true
// per-token timings use a streaming client (e.g. `troupe bench`, or k6 built
// with an SSE extension); the server's own view is troupe_time_to_first_token_seconds
// and troupe_inter_token_latency_seconds on GET /metrics.
import http from 'k6/http';
import { check } from 'k6';
import { Counter, Rate } from 'k6/metrics';
import { BASE_URL, MAX_TOKENS, PROMPT, TEMPERATURE, Latency, discoverModel, latencyThresholds, json, openaiHeaders, parseSSE, runOptions, tag } from './lib/llm.js';

export const options = runOptions(latencyThresholds());

const latency = new Latency();
const completionTokens = new Counter('completion_tokens');
const errors = new Rate('errors');

export function setup() {
  return { model: discoverModel() };
}

function chatBody(model, content, maxTokens, stream) {
  const b = { model: model, messages: [{ role: 'user', content: content }], max_tokens: maxTokens, stream: stream };
  if (stream) b.stream_options = { include_usage: true };
  if (TEMPERATURE !== undefined) b.temperature = TEMPERATURE;
  return JSON.stringify(b);
}

export default function (data) {
  const url = `${BASE_URL}/v1/chat/completions`;
  const params = { headers: openaiHeaders(), timeout: '120s' };

  const probeMs = latency.probe(url, chatBody(data.model, `${tag('probe')} ${PROMPT}`, 1, false), params);

  const res = http.post(url, chatBody(data.model, `${tag('stream')} ${PROMPT}`, MAX_TOKENS, true), Object.assign({ tags: { name: 'chat_stream' } }, params));
  const events = res.status === 200 ? parseSSE(res.body) : [];
  let deltas = 0;
  let usage = null;
  let errorEvent = null;
  for (const ev of events) {
    if (ev.data === '[DONE]') continue;
    const chunk = json(ev.data);
    if (!chunk) continue;
    if (chunk.error) errorEvent = chunk.error;
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices && chunk.choices[0];
    const delta = choice && choice.delta;
    if (delta && (delta.content || delta.reasoning_content)) deltas++;
  }
  const ok = check(res, {
    'status is 200': (r) => r.status === 200,
    'no error event': () => errorEvent === null,
    'at least one content delta': () => deltas > 0,
    'usage reported': () => usage !== null && usage.completion_tokens > 0,
    'stream ended with data: [DONE]': () => events.length > 0 && events[events.length - 1].data === '[DONE]',
  });
  errors.add(!ok);
  if (errorEvent) console.error(`stream error: ${JSON.stringify(errorEvent)}`);
  if (res.status !== 200) console.error(`status ${res.status}: ${res.error || res.body}`);
  if (!ok) return;

  latency.record(res, probeMs, usage.completion_tokens);
  completionTokens.add(usage.completion_tokens);
}
