import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HttpError } from 'grammy';
import { describeBotError } from './bot-api.ts';
import { callbackData, parseCallbackData, splitMessage } from './render.ts';

test('splitMessage: pieces of at most 4,096 UTF-16 units, cut at a line break or space, a surrogate pair never split, nothing lost', () => {
  const text = `${'a'.repeat(3000)}\n${'b '.repeat(1000)}${'😀'.repeat(3000)}`;
  const pieces = splitMessage(text);
  assert.equal(pieces.join(''), text);
  for (const piece of pieces) {
    assert.ok(piece.length <= 4096);
    assert.ok(!/[\ud800-\udbff]$/.test(piece), 'no piece ends inside a surrogate pair');
  }
  assert.ok(pieces[0]!.endsWith('\n'));
  assert.deepEqual(splitMessage(''), ['']);
  // A break just past the limit is not a place to cut: the piece would be one longer than Telegram takes.
  for (const at of ['\n', ' ']) {
    const exact = `${'a'.repeat(4096)}${at}${'b'.repeat(10)}`;
    assert.ok(splitMessage(exact).every((piece) => piece.length <= 4096), JSON.stringify(at));
    assert.equal(splitMessage(exact).join(''), exact);
  }
});

test('callback data: every intent fits 64 bytes and reads back as itself; data the bot never made is refused', () => {
  const op = `op_${'A'.repeat(30)}`;
  const req = `req_${'B'.repeat(30)}`;
  const agent = `agt_${'C'.repeat(30)}`;
  for (const intent of [
    { do: 'approve', operationId: op }, { do: 'approve_same_type', operationId: op }, { do: 'reject', operationId: op },
    { do: 'answer', requestId: req, choice: 12 }, { do: 'choose_agent', agentId: agent },
  ] as const) {
    const data = callbackData(intent);
    assert.ok(Buffer.byteLength(data) <= 64, data);
    assert.deepEqual(parseCallbackData(data), intent);
  }
  for (const bad of ['', 'x:op_1', 'a:op_1:2', 'q:req_1', 'a:op_1; drop', `a:${'x'.repeat(60)}`]) assert.equal(parseCallbackData(bad), null, bad);
});

test('a network error is described without the token its URL holds', () => {
  const error = new HttpError('Network request failed', new Error('request to https://api.telegram.org/bot123456:AAEsecretTOKEN_-x/getMe failed'));
  const text = describeBotError(error);
  assert.ok(!text.includes('AAEsecretTOKEN'), text);
  assert.match(text, /bot<token>\/getMe/);
});
