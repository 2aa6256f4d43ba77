import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkMessageText, findNulCharacter } from './problems.ts';

test('findNulCharacter names where a NUL sits, and copes with deep nesting', () => {
  assert.equal(findNulCharacter({ text: 'fine', list: ['a', { b: 'x\u0000y' }] }), 'list.1.b');
  assert.equal(findNulCharacter({ 'k\u0000': 1 }), 'k\u0000');
  assert.equal(findNulCharacter({ text: 'no nul here', n: 1, t: true, z: null }), null);
  let deep: unknown = 'bottom\u0000';
  for (let i = 0; i < 200_000; i++) deep = [deep];
  assert.equal(findNulCharacter(deep), `${'0.'.repeat(199_999)}0`);
});

test('checkMessageText: blank is text_empty, over 32,000 code points is text_too_long', () => {
  assert.throws(() => checkMessageText(' \n'), { code: 'text_empty' });
  assert.throws(() => checkMessageText(undefined), { code: 'text_empty' });
  assert.throws(() => checkMessageText('a'.repeat(32_001)), { code: 'text_too_long' });
  assert.equal(checkMessageText('😀'.repeat(32_000)).length, 64_000);
});
