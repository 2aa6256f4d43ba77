import { randomFillSync } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

// Random bytes are drawn from the CSPRNG in blocks: one call per id costs more than the id.
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;

function randomByte(): number {
  if (poolOffset === pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  return pool[poolOffset++]!;
}

/** Uniform random base62 string (rejection sampling, so no modulo bias). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    const byte = randomByte();
    if (byte < 248) out += BASE62[byte % 62];
  }
  return out;
}

/** The time in milliseconds as 8 base62 digits: sorts as the time does, until the year 8888. */
function timeBase62(ms: number): string {
  let out = '';
  for (let i = 0; i < 8; i++) {
    out = BASE62[ms % 62]! + out;
    ms = Math.floor(ms / 62);
  }
  return out;
}

export const ID_PREFIXES = {
  user: 'usr_',
  workspace: 'wsp_',
  agent: 'agt_',
  session: 'ses_',
  action: 'op_',
  question: 'req_',
  mission: 'msn_',
  webhook: 'whk_',
} as const;

export type IdKind = keyof typeof ID_PREFIXES;

/**
 * Opaque id with a type prefix: the creation time (8 base62 chars), then 22 random base62 chars
 * (~131 bits, enough to be unguessable). Leading with the time makes new rows land at the end of
 * their indexes instead of on a random page each, so a commit writes a few pages, not one a row.
 */
export function newId(kind: IdKind): string {
  return ID_PREFIXES[kind] + timeBase62(Date.now()) + randomBase62(22);
}

/** Cheap shape check so that absurd ids never reach the database. */
export function looksLikeId(kind: IdKind, value: string): boolean {
  const prefix = ID_PREFIXES[kind];
  return value.startsWith(prefix) && value.length <= 64 && /^[A-Za-z0-9]+$/.test(value.slice(prefix.length));
}

/**
 * One id of each kind that documentation shows as an example, in newId's format. Literal
 * strings, so that the OpenAPI document is the same on every start (openapi.coverage.test.ts
 * checks each against looksLikeId).
 */
export const EXAMPLE_IDS = {
  agent: 'agt_0VboFtAE4lG2abgDsV1zT30vqzjDmf',
  workspace: 'wsp_0VboFtAFnwjuTVmIW1jNOX4mWMSB3X',
  action: 'op_0VboFtAFBFGWZQD0TrNfT45Uwgwj7W',
  question: 'req_0VboFtAFsgk9ihiaLL9jttD7OTSj3X',
} as const satisfies Partial<Record<IdKind, string>>;
