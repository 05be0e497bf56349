// End-to-end tests of `shoal serve` through the official `openai` npm client: what users' code
// does, unchanged. Usage: node openai_test.mjs BASE_URL API_KEY BUSY_BASE_URL
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const [baseURL, apiKey, busyURL] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
let failures = 0;

async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e?.stack ?? e}`);
  }
}

const models = await client.models.list();
const model = models.data[0].id;

await check('models.list returns the served model', async () => {
  assert.equal(models.data.length, 1);
  assert.equal(models.data[0].object, 'model');
});

await check('chat.completions.create (non-stream)', async () => {
  const r = await client.chat.completions.create({
    model, messages: [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Hi' }],
    max_tokens: 8, temperature: 0,
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.ok(r.choices[0].message.content.length > 0);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 8);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 8);
});

await check('chat stream: content deltas equal the non-stream answer, usage chunk last', async () => {
  const body = { model, messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 12, temperature: 0 };
  const whole = await client.chat.completions.create(body);
  const stream = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
  let text = '', usage = null, finish = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta?.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(chunks >= 3);
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 12);
});

await check('completions.create (non-stream and stream agree)', async () => {
  const body = { model, prompt: 'Once upon a time', max_tokens: 10, temperature: 0 };
  const r = await client.completions.create(body);
  assert.equal(r.object, 'text_completion');
  let text = '';
  for await (const chunk of await client.completions.create({ ...body, stream: true })) text += chunk.choices[0]?.text ?? '';
  assert.equal(text, r.choices[0].text);
  assert.ok(r.choices[0].text.startsWith(', there was'));
});

await check('n=2 gives two choices; choice 0 equals the n=1 answer with the same seed', async () => {
  const body = { model, prompt: 'The dog', max_tokens: 10, temperature: 1.0, seed: 7 };
  const two = await client.completions.create({ ...body, n: 2 });
  const one = await client.completions.create(body);
  assert.equal(two.choices.length, 2);
  assert.deepEqual(two.choices.map((c) => c.index).sort(), [0, 1]);
  assert.equal(two.choices.find((c) => c.index === 0).text, one.choices[0].text);
  assert.equal(two.usage.completion_tokens, 20);
});

await check('stop strings end the text before the stop', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 30, temperature: 0, stop: [' girl', 'zzz'] });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(!r.choices[0].text.includes(' girl'));
});

await check('chat logprobs with top_logprobs', async () => {
  const r = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3, temperature: 0, logprobs: true, top_logprobs: 2 });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, 3);
  assert.equal(lp[0].top_logprobs.length, 2);
  assert.ok(lp[0].logprob <= 0);
});

await check('401: a wrong key raises AuthenticationError', async () => {
  const bad = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});

await check('404: an unknown model raises NotFoundError', async () => {
  await assert.rejects(client.completions.create({ model: 'no-such-model', prompt: 'x', max_tokens: 2 }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
});

await check('400: bad values raise BadRequestError with the message', async () => {
  await assert.rejects(client.completions.create({ model, prompt: 'x', temperature: 9 }),
    (e) => e instanceof OpenAI.BadRequestError && /temperature/.test(e.message));
  await assert.rejects(client.completions.create({ model, prompt: 'x', max_tokens: 100000 }),
    (e) => e instanceof OpenAI.BadRequestError && e.code === 'context_length_exceeded');
});

await check('429: a full queue raises RateLimitError', async () => {
  const busy = new OpenAI({ baseURL: busyURL, apiKey, maxRetries: 0 });
  await assert.rejects(busy.completions.create({ model, prompt: 'x', max_tokens: 2 }),
    (e) => e instanceof OpenAI.RateLimitError && e.status === 429);
});

console.log(`${failures} failure(s)`);
process.exit(failures === 0 ? 0 : 1);
