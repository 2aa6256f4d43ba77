import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';

const scryptAsync = promisify(scrypt) as (
  password: string, salt: Buffer, keylen: number, options: { N: number; r: number; p: number; maxmem: number },
) => Promise<Buffer>;

/** scrypt with OWASP's parameters (N=2^17, r=8, p=1); the cost is lowered only in tests. */
export async function hashPassword(password: string, costLog2 = 17): Promise<string> {
  const salt = randomBytes(16);
  const N = 2 ** costLog2;
  const hash = await scryptAsync(password.normalize('NFKC'), salt, 32, { N, r: 8, p: 1, maxmem: 256 * 1024 * 1024 });
  return `scrypt$${costLog2}$8$1$${salt.toString('base64')}$${hash.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, costLog2, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64');
  const actual = await scryptAsync(password.normalize('NFKC'), Buffer.from(salt, 'base64'), expected.length, {
    N: 2 ** Number(costLog2), r: Number(r), p: Number(p), maxmem: 256 * 1024 * 1024,
  });
  return timingSafeEqual(actual, expected);
}
