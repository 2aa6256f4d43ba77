import { randomBytes } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Uniform random base62 string (rejection sampling, so no modulo bias). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
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
} as const;

export type IdKind = keyof typeof ID_PREFIXES;

/** Opaque id with a type prefix; 22 base62 chars is ~131 bits, enough to be unguessable. */
export function newId(kind: IdKind): string {
  return ID_PREFIXES[kind] + randomBase62(22);
}

/** Cheap shape check so that absurd ids never reach the database. */
export function looksLikeId(kind: IdKind, value: string): boolean {
  const prefix = ID_PREFIXES[kind];
  return value.startsWith(prefix) && value.length <= 64 && /^[A-Za-z0-9]+$/.test(value.slice(prefix.length));
}
