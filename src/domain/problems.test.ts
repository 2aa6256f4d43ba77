import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkMessageText, findUnstorableText } from './problems.ts';

test('findUnstorableText names where a NUL sits, and copes with deep nesting', () => {
  assert.equal(findUnstorableText({ text: 'fine', list: ['a', { b: 'x\u0000y' }] }), 'list.1.b');
  assert.equal(findUnstorableText({ 'k\u0000': 1 }), 'k\u0000');
  assert.equal(findUnstorableText({ text: 'no nul here', n: 1, t: true, z: null }), null);
  let deep: unknown = 'bottom\u0000';
  for (let i = 0; i < 200_000; i++) deep = [deep];
  assert.equal(findUnstorableText(deep), `${'0.'.repeat(199_999)}0`);
});

test('findUnstorableText names a lone UTF-16 surrogate too, in a value or a key; a pair is fine', () => {
  assert.equal(findUnstorableText({ ok: 'emoji 😀 pair', list: ['x\ud800y'] }), 'list.0');
  assert.equal(findUnstorableText({ text: 'ends high \ud83d' }), 'text');
  assert.equal(findUnstorableText({ text: '\ude00 starts low' }), 'text');
  assert.equal(findUnstorableText({ 'k\udc00': 1 }), 'k\udc00');
  assert.equal(findUnstorableText({ text: '😀'.repeat(10), n: 1 }), null);
});

test('checkMessageText: blank is text_empty, over 32,000 code points is text_too_long', () => {
  assert.throws(() => checkMessageText(' \n'), { code: 'text_empty' });
  assert.throws(() => checkMessageText(undefined), { code: 'text_empty' });
  assert.throws(() => checkMessageText('a'.repeat(32_001)), { code: 'text_too_long' });
  assert.equal(checkMessageText('😀'.repeat(32_000)).length, 64_000);
});
