import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';

const scryptAsync = promisify(scrypt) as (
  password: string, salt: Buffer, keylen: number, options: { N: number; r: number; p: number; maxmem: number },
) => Promise<Buffer>;

/** OWASP's scrypt parameters: N=2^17, r=8, p=1 (about 128 MiB and a few hundred ms per hash). */
export const SCRYPT_DEFAULTS = { costLog2: 17, r: 8, p: 1 } as const;

/**
 * The memory scrypt needs for these parameters (what OpenSSL checks against `maxmem`):
 * 128·r·(N+2) bytes for V plus 128·r·p for B, with a little room on top. Computed, not fixed,
 * so that a higher cost (SCRYPT_COST_LOG2 of 18 to 20) works instead of failing every hash.
 */
export function scryptMaxmem(N: number, r: number, p: number): number {
  return 128 * r * (N + 2) + 128 * r * p + 1024 * 1024;
}

/** The most memory a stored hash may ask for: what the highest cost setting (SCRYPT_COST_LOG2=20) needs. */
const SCRYPT_MAXMEM_CEILING = scryptMaxmem(2 ** 20, SCRYPT_DEFAULTS.r, SCRYPT_DEFAULTS.p);

/** scrypt with OWASP's parameters (N=2^17, r=8, p=1); the cost is lowered only in tests. */
export async function hashPassword(password: string, costLog2: number = SCRYPT_DEFAULTS.costLog2): Promise<string> {
  const { r, p } = SCRYPT_DEFAULTS;
  const salt = randomBytes(16);
  const N = 2 ** costLog2;
  const hash = await scryptAsync(password.normalize('NFKC'), salt, 32, { N, r, p, maxmem: scryptMaxmem(N, r, p) });
  return `scrypt$${costLog2}$${r}$${p}$${salt.toString('base64')}$${hash.toString('base64')}`;
}

/**
 * Parameters a stored hash of ours can have: whole, positive, and asking for no more memory than
 * the highest cost setting needs (N, r and p bounded together, not one by one). scrypt itself
 * refuses N ≥ 2^(16·r) (it would throw): such a hash matches nothing.
 */
export function scryptParamsAllowed(costLog2: number, r: number, p: number): boolean {
  if (!Number.isInteger(costLog2) || costLog2 < 1) return false;
  if (!Number.isInteger(r) || r < 1 || !Number.isInteger(p) || p < 1) return false;
  if (costLog2 >= 16 * r) return false;
  return scryptMaxmem(2 ** costLog2, r, p) <= SCRYPT_MAXMEM_CEILING;
}

/** Checks a password against a stored hash, whatever parameters the hash was made with. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, costText, rText, pText, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return false;
  const costLog2 = Number(costText);
  const r = Number(rText);
  const p = Number(pText);
  if (!scryptParamsAllowed(costLog2, r, p)) return false;
  const N = 2 ** costLog2;
  const expected = Buffer.from(hash, 'base64');
  if (expected.length < 16) return false;
  const actual = await scryptAsync(password.normalize('NFKC'), Buffer.from(salt, 'base64'), expected.length, {
    N, r, p, maxmem: scryptMaxmem(N, r, p),
  });
  return timingSafeEqual(actual, expected);
}
