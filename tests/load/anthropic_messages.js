// k6 load test: the Anthropic Messages API, streamed (POST /v1/messages).
//
//   k6 run -e BASE_URL=http://127.0.0.1:8080 tests/load/anthropic_messages.js
//   k6 run -e VUS=8 -e DURATION=2m -e API_KEY=secret tests/load/anthropic_messages.js
//
// Each iteration sends {model, max_tokens, messages, stream: true} with the
// headers anthropic-version: 2023-06-01 and (when API_KEY is set) x-api-key,
// parses the event stream (message_start, content_block_start,
// content_block_delta, content_block_stop, message_delta, message_stop;
// ping and error may come too) and checks its shape and usage.
// Environment: see lib/llm.js; TTFT_PROBE=0 turns the TTFT probe off.
//
// Metrics (k6 sees a stream only once it has ended; chat_stream.js explains
// the method in full):
//   ttfb_ms         res.timings.waiting: request written -> response headers.
//                   A server that starts the stream (message_start) on
//                   admission answers before prefill: admission latency,
//                   not time to first token.
//   ttft_ms         duration of a separate non-streaming probe with
//                   max_tokens 1 and the same prompt text behind another
//                   unique tag: the client-visible time to a first token.
//   inter_token_ms  (streaming request's duration - ttft_ms) /
//                   (output_tokens - 1), floored at 0: an estimate of the
//                   mean interval between tokens.
//   output_tokens   Counter of message_delta's usage.output_tokens.
//   errors          Rate of failed streaming requests.
import http from 'k6/http';
import { check } from 'k6';
import { Counter, Rate } from 'k6/metrics';
import { BASE_URL, MAX_TOKENS, PROMPT, TEMPERATURE, anthropicHeaders, Latency, discoverModel, latencyThresholds, json, parseSSE, runOptions, tag } from './lib/llm.js';

export const options = runOptions(latencyThresholds());

const latency = new Latency();
const outputTokens = new Counter('output_tokens');
const errors = new Rate('errors');

export function setup() {
  return { model: discoverModel() };
}

function messagesBody(model, content, maxTokens, stream) {
  const b = { model: model, max_tokens: maxTokens, messages: [{ role: 'user', content: content }], stream: stream };
  if (TEMPERATURE !== undefined) b.temperature = TEMPERATURE;
  return JSON.stringify(b);
}

export default function (data) {
  const url = `${BASE_URL}/v1/messages`;
  const params = { headers: anthropicHeaders(), timeout: '120s' };

  const probeMs = latency.probe(url, messagesBody(data.model, `${tag('probe')} ${PROMPT}`, 1, false), params);

  const res = http.post(url, messagesBody(data.model, `${tag('stream')} ${PROMPT}`, MAX_TOKENS, true), Object.assign({ tags: { name: 'messages_stream' } }, params));
  const events = res.status === 200 ? parseSSE(res.body) : [];
  let deltas = 0;
  let inputTokens = 0;
  let outTokens = 0;
  let stopReason = null;
  let errorEvent = null;
  for (const ev of events) {
    const d = json(ev.data) || {};
    const type = ev.event !== 'message' ? ev.event : d.type;
    if (type === 'message_start' && d.message && d.message.usage) {
      inputTokens = d.message.usage.input_tokens || 0;
    } else if (type === 'content_block_delta' && d.delta) {
      if ((d.delta.type === 'text_delta' && d.delta.text) || (d.delta.type === 'thinking_delta' && d.delta.thinking)) deltas++;
    } else if (type === 'message_delta') {
      if (d.usage && d.usage.output_tokens !== undefined) outTokens = d.usage.output_tokens;
      if (d.delta) stopReason = d.delta.stop_reason || null;
    } else if (type === 'error') {
      errorEvent = d.error || d;
    }
  }
  const first = events.length ? events[0].event : '';
  const last = events.length ? events[events.length - 1].event : '';
  const ok = check(res, {
    'status is 200': (r) => r.status === 200,
    'no error event': () => errorEvent === null,
    'stream began with message_start': () => first === 'message_start',
    'at least one text_delta (or thinking_delta)': () => deltas > 0,
    'message_delta with stop_reason and usage.output_tokens': () => stopReason !== null && outTokens > 0,
    'message_start with usage.input_tokens': () => inputTokens > 0,
    'stream ended with message_stop': () => last === 'message_stop',
  });
  errors.add(!ok);
  if (errorEvent) console.error(`stream error: ${JSON.stringify(errorEvent)}`);
  if (res.status !== 200) console.error(`status ${res.status}: ${res.error || res.body}`);
  if (!ok) return;

  latency.record(res, probeMs, outTokens);
  outputTokens.add(outTokens);
}
