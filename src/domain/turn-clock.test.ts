import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatTs, isValidTs, nextTs, parseTs } from './turn-clock.ts';

const at = (iso: string, micros: bigint) => BigInt(Date.parse(iso)) * 1000n + micros;

test('a ts has exactly six fractional digits, leading zeros kept, in UTC', () => {
  assert.equal(formatTs(at('2026-11-22T12:34:56.000Z', 789_012n)), '2026-11-22T12:34:56.789012Z');
  assert.equal(formatTs(at('2026-11-22T12:34:56.000Z', 7n)), '2026-11-22T12:34:56.000007Z');
  assert.equal(formatTs(at('2026-11-22T12:34:56.000Z', 0n)), '2026-11-22T12:34:56.000000Z');
  assert.equal(formatTs(at('2026-11-22T12:34:56.000Z', 99_999n)), '2026-11-22T12:34:56.099999Z');
  for (const micros of [0n, 7n, 99_999n, 999_999n]) {
    const ts = formatTs(at('2030-01-01T00:00:00.000Z', micros));
    assert.equal(parseTs(ts), at('2030-01-01T00:00:00.000Z', micros), ts);
  }
});

test('the next ts is the present, or one microsecond past the previous when the present is not later', () => {
  const previous = '2026-11-22T12:34:56.789012Z';
  const last = parseTs(previous)!;
  assert.equal(nextTs(previous, last + 5n), formatTs(last + 5n), 'the present, when it is later');
  assert.equal(nextTs(previous, last), '2026-11-22T12:34:56.789013Z', 'the same microsecond: never the same ts twice');
  assert.equal(nextTs(previous, last - 1_000_000n), '2026-11-22T12:34:56.789013Z', 'a clock set back: still later');
  assert.equal(nextTs('2026-11-22T12:34:56.999999Z', at('2026-11-22T12:34:56.000Z', 999_999n)), '2026-11-22T12:34:57.000000Z');
  assert.equal(nextTs(null, last), previous, 'a session with no turn yet: the present');
});

test('only the exact format is a ts: six digits, a Z, nothing around it, a real date', () => {
  assert.ok(isValidTs('2026-11-22T12:34:56.789012Z'));
  for (const bad of [
    '2026-11-22T12:34:56.7890123Z', '2026-11-22T12:34:56.78901Z', '2026-11-22T12:34:56.789012',
    '2026-11-22T12:34:56.789012z', '2026-11-22T12:34:56.789012+00:00', '2026-11-22T12:34:56.789012Zjunk',
    ' 2026-11-22T12:34:56.789012Z', '2026-11-22 12:34:56.789012Z', '2026-02-30T00:00:00.000000Z', '2026-11-22T24:00:00.000000Z',
  ]) {
    assert.equal(isValidTs(bad), false, bad);
    assert.equal(parseTs(bad), null, bad);
  }
});
