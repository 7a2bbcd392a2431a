// troupe's chat page: a client of the server's own OpenAI-compatible API.
// It streams /v1/chat/completions and reads /v1/models, sending the API key
// the user typed (kept in localStorage) as Authorization: Bearer. Model
// output is only ever written with textContent / text nodes, never as HTML.

const $ = (id) => document.getElementById(id);

const ui = {
  modelName: $('model-name'),
  modelDetails: $('model-details'),
  newChat: $('new-chat'),
  settings: $('settings'),
  system: $('system-prompt'),
  temperature: $('temperature'),
  maxTokens: $('max-tokens'),
  apiKey: $('api-key'),
  error: $('error'),
  messages: $('messages'),
  empty: $('empty'),
  form: $('composer'),
  prompt: $('prompt'),
  send: $('send'),
  stop: $('stop'),
  status: $('status'),
};

// Settings kept across page loads, by input element.
const saved = [
  [ui.system, 'troupe.system'],
  [ui.temperature, 'troupe.temperature'],
  [ui.maxTokens, 'troupe.maxTokens'],
  [ui.apiKey, 'troupe.apiKey'],
];

// The conversation as the API takes it (without the system prompt, which
// is read from its field at each send), the model to address, and the
// request in flight; epoch counts New chat presses, so a reply that ends
// after one is not put into the new conversation.
const chat = { history: [], model: '', controller: null, epoch: 0 };

function storage() {
  try {
    return window.localStorage;
  } catch {
    return null; // storage disabled: settings last for this page only
  }
}

function restoreSettings() {
  const store = storage();
  for (const [input, key] of saved) {
    const v = store?.getItem(key);
    if (v !== null && v !== undefined) input.value = v;
    input.addEventListener('change', () => {
      try {
        if (input.value === '') store?.removeItem(key);
        else store?.setItem(key, input.value);
      } catch {
        // quota or privacy mode: keep the value for this page only
      }
    });
  }
}

function headers() {
  const h = { 'Content-Type': 'application/json' };
  const key = ui.apiKey.value.trim();
  if (key) h.Authorization = 'Bearer ' + key;
  return h;
}

function showError(text) {
  ui.error.textContent = text;
  ui.error.hidden = !text;
}

const keyNeeded = 'This server needs an API key (401). Enter it under Settings → API key, then try again.';
const keyRejected = 'The server rejected the API key (401). Check the key under Settings → API key, then try again.';

function askForKey() {
  showError(ui.apiKey.value.trim() ? keyRejected : keyNeeded);
  ui.settings.open = true;
  ui.apiKey.focus();
}

// errorText is the message of an API error response (OpenAI's
// {"error":{"message"}} shape), or its status line.
async function errorText(resp) {
  let text = '';
  try {
    text = await resp.text();
    const body = JSON.parse(text);
    if (body?.error?.message) return `${body.error.message} (${resp.status})`;
  } catch {
    // not JSON: fall through to the raw text
  }
  text = text.trim().slice(0, 300);
  return `The server answered ${resp.status} ${resp.statusText}${text ? ': ' + text : ''}`;
}

function setBusy(busy) {
  document.body.dataset.state = busy ? 'generating' : 'ready';
  ui.send.disabled = busy;
  ui.stop.hidden = !busy;
}

// --- Model information ---------------------------------------------------

async function loadModels() {
  ui.modelDetails.replaceChildren();
  let resp;
  try {
    resp = await fetch('v1/models', { headers: headers() });
  } catch (e) {
    ui.modelName.textContent = 'model information unavailable: ' + e.message;
    return;
  }
  if (resp.status === 401) {
    ui.modelName.textContent = 'model information needs the API key';
    askForKey();
    return;
  }
  if (!resp.ok) {
    ui.modelName.textContent = 'model information unavailable: ' + (await errorText(resp));
    return;
  }
  let models = [];
  try {
    models = (await resp.json()).data || [];
  } catch {
    // an unparsable list: shown as no model below
  }
  if (models.length === 0) {
    ui.modelName.textContent = 'the server lists no model';
    return;
  }
  const first = models[0];
  chat.model = String(first.id ?? '');
  ui.modelName.textContent = chat.model;
  // Whatever else the server says about the model, as name: value.
  for (const [k, v] of Object.entries(first)) {
    if (k === 'id' || k === 'object' || v === null || typeof v === 'object' || (k === 'created' && !v)) continue;
    const dt = document.createElement('dt');
    dt.textContent = k.replaceAll('_', ' ');
    const dd = document.createElement('dd');
    dd.textContent = k === 'created' && typeof v === 'number' ? new Date(v * 1000).toLocaleString() : String(v);
    ui.modelDetails.append(dt, dd);
  }
  if (models.length > 1) {
    const dt = document.createElement('dt');
    dt.textContent = 'also served';
    const dd = document.createElement('dd');
    dd.textContent = models.slice(1).map((m) => m.id).join(', ');
    ui.modelDetails.append(dt, dd);
  }
  if (ui.error.textContent === keyNeeded || ui.error.textContent === keyRejected) showError('');
}

// --- Conversation view ---------------------------------------------------

function nearBottom() {
  const el = document.scrollingElement;
  return el.scrollHeight - el.scrollTop - el.clientHeight < 80;
}

function follow(wasNear) {
  if (wasNear) document.scrollingElement.scrollTop = document.scrollingElement.scrollHeight;
}

function addMessage(role, text) {
  const li = document.createElement('li');
  li.className = 'message ' + role;
  const who = document.createElement('span');
  who.className = 'role';
  who.textContent = role === 'user' ? 'You' : 'Assistant';
  li.append(who);
  ui.messages.append(li);
  ui.empty.hidden = true;
  if (role === 'user') {
    const body = document.createElement('div');
    body.className = 'content';
    body.textContent = text;
    li.append(body);
    return { li };
  }
  // An assistant turn: folded reasoning (shown once some arrives), the
  // answer, and a line of usage.
  const details = document.createElement('details');
  details.className = 'reasoning';
  details.hidden = true;
  const summary = document.createElement('summary');
  summary.textContent = 'Reasoning';
  const reasoning = document.createElement('div');
  reasoning.className = 'reasoning-text';
  const reasoningText = document.createTextNode('');
  reasoning.append(reasoningText);
  details.append(summary, reasoning);
  const body = document.createElement('div');
  body.className = 'content';
  const contentText = document.createTextNode('');
  body.append(contentText);
  const meta = document.createElement('p');
  meta.className = 'meta';
  li.append(details, body, meta);
  li.setAttribute('aria-busy', 'true');
  return { li, details, summary, reasoningText, contentText, meta };
}

function usageLine(usage, finish, seconds) {
  const prompt = usage.prompt_tokens ?? 0;
  const cached = usage.prompt_tokens_details?.cached_tokens ?? 0;
  const share = prompt > 0 ? Math.round((100 * cached) / prompt) : 0;
  const generated = usage.completion_tokens ?? 0;
  const parts = [
    `prompt ${prompt} tokens (${cached} cached, ${share}%)`,
    `reply ${generated} tokens`,
  ];
  if (seconds > 0 && generated > 0) parts.push(`${seconds.toFixed(1)} s, ${(generated / seconds).toFixed(1)} tokens/s`);
  if (finish) parts.push(`finish: ${finish}`);
  return parts.join(' · ');
}

// --- Streaming -----------------------------------------------------------

// events yields the data of each server-sent event in body.
async function* events(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value.replaceAll('\r\n', '\n');
      let end;
      while ((end = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, end);
        buf = buf.slice(end + 2);
        const data = [];
        for (const line of block.split('\n')) {
          if (line.startsWith('data:')) data.push(line.slice(line[5] === ' ' ? 6 : 5));
        }
        if (data.length > 0) yield data.join('\n');
      }
    }
  } finally {
    reader.cancel().catch(() => {}); // closes the connection when we stop early
  }
}

function numberSetting(input, name, min, max, integer) {
  const raw = input.value.trim();
  if (raw === '') return undefined;
  const v = Number(raw);
  if (!Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))) {
    throw new Error(`${name} must be ${integer ? 'a whole number' : 'a number'} from ${min} to ${max}, or empty for the server's default.`);
  }
  return v;
}

function requestBody() {
  const temperature = numberSetting(ui.temperature, 'Temperature', 0, 2, false);
  const maxTokens = numberSetting(ui.maxTokens, 'Max tokens', 1, 1e9, true);
  const messages = [];
  const system = ui.system.value.trim();
  if (system) messages.push({ role: 'system', content: system });
  messages.push(...chat.history);
  const body = { messages, stream: true, stream_options: { include_usage: true } };
  if (chat.model) body.model = chat.model;
  if (temperature !== undefined) body.temperature = temperature;
  if (maxTokens !== undefined) body.max_tokens = maxTokens;
  return body;
}

async function send(text) {
  let body;
  chat.history.push({ role: 'user', content: text });
  try {
    body = requestBody();
  } catch (e) {
    chat.history.pop();
    showError(e.message);
    return false;
  }
  showError('');
  const wasNear = nearBottom();
  const user = addMessage('user', text);
  const turn = addMessage('assistant');
  follow(wasNear);
  const controller = new AbortController();
  const epoch = chat.epoch;
  chat.controller = controller;
  setBusy(true);
  ui.status.textContent = 'Generating…';
  const started = performance.now();
  let content = '';
  let reasoning = '';
  let usage = null;
  let finish = '';
  let failure = '';
  let status = 0;
  try {
    const resp = await fetch('v1/chat/completions', {
      method: 'POST', headers: headers(), body: JSON.stringify(body), signal: controller.signal,
    });
    status = resp.status;
    if (!resp.ok) {
      failure = await errorText(resp);
    } else {
      for await (const data of events(resp.body)) {
        if (data === '[DONE]') break;
        let ev;
        try {
          ev = JSON.parse(data);
        } catch {
          continue; // not an event of this API
        }
        if (ev.error) {
          failure = ev.error.message || 'the server ended the stream with an error';
          break;
        }
        const choice = ev.choices?.[0];
        const near = nearBottom();
        if (choice?.delta?.reasoning_content) {
          reasoning += choice.delta.reasoning_content;
          turn.details.hidden = false;
          turn.reasoningText.appendData(choice.delta.reasoning_content);
        }
        if (choice?.delta?.content) {
          content += choice.delta.content;
          turn.contentText.appendData(choice.delta.content);
        }
        if (choice?.finish_reason) finish = choice.finish_reason;
        if (ev.usage) usage = ev.usage;
        follow(near);
      }
    }
  } catch (e) {
    if (e.name !== 'AbortError') failure = 'The connection failed: ' + e.message;
  }
  const stopped = controller.signal.aborted;
  chat.controller = null;
  if (epoch !== chat.epoch) {
    setBusy(false); // New chat was pressed: this turn is gone with its conversation
    return false;
  }
  turn.li.removeAttribute('aria-busy');
  const seconds = (performance.now() - started) / 1000;

  if (failure && !content && !reasoning) {
    // Nothing came back: take the turn back so the message can be resent.
    chat.history.pop();
    user.li.remove();
    turn.li.remove();
    ui.empty.hidden = ui.messages.children.length > 0;
    if (!ui.prompt.value) ui.prompt.value = text;
    if (status === 401) askForKey();
    else showError(failure);
    setBusy(false);
    ui.status.textContent = 'Ready';
    return false;
  }
  if (content || reasoning) chat.history.push({ role: 'assistant', content });
  if (stopped) {
    turn.li.classList.add('stopped');
    turn.meta.textContent = `stopped · ${content.length} characters kept`;
    ui.status.textContent = 'Stopped. Ready';
  } else if (failure) {
    turn.li.classList.add('failed');
    turn.meta.textContent = 'error: ' + failure;
    ui.status.textContent = 'The reply ended with an error. Ready';
  } else {
    if (usage) {
      turn.meta.textContent = usageLine(usage, finish, seconds);
      turn.meta.classList.add('usage');
    } else {
      turn.meta.textContent = finish ? `finish: ${finish}` : '';
    }
    ui.status.textContent = 'Reply complete. Ready';
  }
  setBusy(false);
  return true;
}

// --- Wiring --------------------------------------------------------------

function newChat() {
  chat.controller?.abort();
  chat.epoch++;
  chat.history = [];
  ui.messages.replaceChildren();
  ui.empty.hidden = false;
  showError('');
  ui.status.textContent = 'New chat. Ready';
  ui.prompt.focus();
}

ui.form.addEventListener('submit', async (e) => {
  e.preventDefault();
  const text = ui.prompt.value;
  if (chat.controller || text.trim() === '') return;
  ui.prompt.value = '';
  await send(text);
  ui.prompt.focus();
});

ui.prompt.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    ui.form.requestSubmit();
  } else if (e.key === 'Escape' && chat.controller) {
    chat.controller.abort();
  }
});

ui.stop.addEventListener('click', () => chat.controller?.abort());
ui.newChat.addEventListener('click', newChat);
ui.apiKey.addEventListener('change', loadModels);

restoreSettings();
setBusy(false);
ui.status.textContent = 'Ready';
loadModels();
ui.prompt.focus();
