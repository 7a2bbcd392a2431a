// k6 load test: multi-turn conversations and prompt-cache reuse.
//
//   k6 run -e BASE_URL=http://127.0.0.1:8080 tests/load/multi_turn.js
//   k6 run -e VUS=4 -e DURATION=2m -e TURNS=6 tests/load/multi_turn.js
//
// Each iteration is one conversation of TURNS (default 4) non-streaming
// POST /v1/chat/completions: every turn sends the whole history, i.e. the
// earlier user messages and the assistant replies as the server gave them,
// plus a new user message. A server with a prompt cache reuses the earlier
// turns' prefix; usage.prompt_tokens_details.cached_tokens says how much.
// Environment: see lib/llm.js; TURNS; MAX_TOKENS defaults to 64 here too.
//
// Metrics:
//   cached_token_share  Trend of cached_tokens / prompt_tokens per turn, from
//                       turn 2 on (turn 1 has no history of its own to reuse),
//                       tagged turn=N. troupe gives about 0.7 at turn 2 and
//                       more after (only the new user message is computed when
//                       the warm-up after the previous turn has run); with the
//                       prompt cache off (--prompt-cache=false) it is 0.
//   cached_tokens       Counter of usage.prompt_tokens_details.cached_tokens
//                       over all turns.
//   prompt_tokens       Counter of usage.prompt_tokens over all turns.
//   errors              Rate of failed turns; a failed turn ends its conversation.
// http_req_duration is tagged name=multi_turn and turn=N, so a threshold such
// as 'http_req_duration{turn:4}' can watch the late, long-prompt turns.
import http from 'k6/http';
import { check } from 'k6';
import { Counter, Rate, Trend } from 'k6/metrics';
import { BASE_URL, MAX_TOKENS, TEMPERATURE, discoverModel, intEnv, openaiHeaders, runOptions, tag } from './lib/llm.js';

const TURNS = intEnv('TURNS', 4);

export const options = runOptions({
  cached_token_share: ['avg>0.5'],
  http_req_failed: ['rate<0.01'],
  errors: ['rate<0.01'],
  checks: ['rate>0.99'],
});

const share = new Trend('cached_token_share');
const cachedTokens = new Counter('cached_tokens');
const promptTokens = new Counter('prompt_tokens');
const errors = new Rate('errors');

const questions = [
  'What does a stage manager do during a performance?',
  'How are understudies prepared for a role?',
  'Why do actors warm up their voices before a show?',
  'What happens at a technical rehearsal?',
  'How is a touring set designed to travel?',
  'What is blocking, and who decides it?',
];

export function setup() {
  return { model: discoverModel() };
}

export default function (data) {
  const messages = [
    { role: 'system', content: 'You are a concise assistant who knows the theatre well.' },
    { role: 'user', content: `${tag('conversation')} ${questions[0]}` },
  ];
  for (let turn = 1; turn <= TURNS; turn++) {
    if (turn > 1) messages.push({ role: 'user', content: questions[(turn - 1) % questions.length] });
    const body = { model: data.model, messages: messages, max_tokens: MAX_TOKENS };
    if (TEMPERATURE !== undefined) body.temperature = TEMPERATURE;
    const res = http.post(`${BASE_URL}/v1/chat/completions`, JSON.stringify(body), {
      headers: openaiHeaders(),
      tags: { name: 'multi_turn', turn: String(turn) },
      timeout: '120s',
    });
    const out = res.status === 200 ? safeJSON(res) : null;
    const usage = out && out.usage;
    const details = usage && usage.prompt_tokens_details;
    const choice = out && out.choices && out.choices[0];
    const reply = choice && choice.message ? choice.message.content : null;
    const ok = check(res, {
      'status is 200': (r) => r.status === 200,
      'usage.prompt_tokens reported': () => !!usage && usage.prompt_tokens > 0,
      'usage.prompt_tokens_details.cached_tokens reported': () => !!details && typeof details.cached_tokens === 'number',
      'assistant reply present': () => typeof reply === 'string',
    });
    errors.add(!ok);
    if (!ok) {
      console.error(`turn ${turn}: status ${res.status}: ${res.error || res.body}`);
      return;
    }
    promptTokens.add(usage.prompt_tokens);
    cachedTokens.add(details.cached_tokens);
    if (turn > 1) share.add(details.cached_tokens / usage.prompt_tokens, { turn: String(turn) });
    messages.push({ role: 'assistant', content: reply });
  }
}

function safeJSON(res) {
  try {
    return res.json();
  } catch (e) {
    return null;
  }
}
