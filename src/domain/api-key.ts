import { hash, timingSafeEqual } from 'node:crypto';
import { randomBase62 } from './ids.ts';

/** 16 base62 chars of key id; 43 of secret = 43·log2(62) ≈ 256.03 bits. */
export const KEY_ID_LENGTH = 16;
export const SECRET_LENGTH = 43;

export interface ParsedKey {
  keyId: string;
  secret: string;
}

export function generateApiKey(): { keyId: string; secret: string; token: string } {
  const keyId = randomBase62(KEY_ID_LENGTH);
  const secret = randomBase62(SECRET_LENGTH);
  return { keyId, secret, token: formatApiKey(keyId, secret) };
}

export function formatApiKey(keyId: string, secret: string): string {
  return `ak_${keyId}_${secret}`;
}

const KEY_PATTERN = /^ak_([A-Za-z0-9]{1,64})_([A-Za-z0-9]{1,256})$/;

export function parseApiKey(token: string): ParsedKey | null {
  const match = KEY_PATTERN.exec(token);
  if (!match) return null;
  return { keyId: match[1]!, secret: match[2]! };
}

/** Parses an `Authorization: Bearer …` header value. */
export function parseBearer(header: string | undefined): ParsedKey | null {
  if (!header || header.length > 400) return null;
  const match = /^Bearer +(\S+)\s*$/i.exec(header);
  return match ? parseApiKey(match[1]!) : null;
}

export function hashSecret(secret: string): Buffer {
  // The one-shot hash to hex, then bytes: under half the cost of a Hash object's digest (every
  // authenticated request pays it).
  return Buffer.from(hash('sha256', secret, 'hex'), 'hex');
}

// Compared against when the key id is unknown, so that path costs the same as a wrong secret.
const DUMMY_DIGEST = hashSecret(randomBase62(SECRET_LENGTH));

/** Constant-time check of a presented secret against a stored digest (or the dummy). */
export function secretMatches(secret: string, storedDigest: Uint8Array | null): boolean {
  const presented = hashSecret(secret);
  const expected: Uint8Array = storedDigest && storedDigest.length === presented.length ? storedDigest : DUMMY_DIGEST;
  const equal = timingSafeEqual(presented, expected);
  return equal && expected !== DUMMY_DIGEST;
}

export type KeyStatus = 'active' | 'inactive' | 'revoked' | 'expired';

/** What a stored key is at `now` (the store's shared clock): expiry is derived, never stored. */
export function effectiveKeyStatus(
  key: { status: 'active' | 'inactive' | 'revoked'; expires_at: string | null },
  now: Date,
): KeyStatus {
  if (key.status === 'revoked') return 'revoked';
  if (key.expires_at && Date.parse(key.expires_at) <= now.getTime()) return 'expired';
  return key.status;
}
