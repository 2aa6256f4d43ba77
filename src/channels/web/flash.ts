import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * Seals small values that a page hands to the next page through a cookie (the new API key on
 * its way to the page that shows it once; an inbox answer that was not accepted).
 *
 * AES-256-GCM with a random key that exists only in this process's memory: what the browser
 * holds is unreadable, cannot be forged or moved to another account (the user id is part of the
 * authenticated data), and says when it stops being valid. The cookies that carry sealed values
 * are session cookies, so Chromium keeps them in memory rather than on disk, and a restart of
 * the server makes every sealed value unreadable. With several instances, a value sealed on one
 * cannot be opened on another: pages must cope with `open` answering null.
 */
export class Sealer {
  private readonly key: Buffer;
  private readonly now: () => number;

  /** `key`: 32 bytes shared by every instance (a random one, for this process only, if absent). */
  constructor(options: { key?: Buffer; now?: () => number } = {}) {
    this.key = options.key ?? randomBytes(32);
    if (this.key.length !== 32) throw new Error('a sealing key is 32 bytes');
    this.now = options.now ?? Date.now;
  }

  /** The sealed value as a cookie-safe string (base64url). */
  seal(purpose: string, boundTo: string, value: unknown, ttlMs: number): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(`${purpose}\u0000${boundTo}`));
    const plain = Buffer.from(JSON.stringify({ v: value, exp: this.now() + ttlMs }));
    const sealed = Buffer.concat([cipher.update(plain), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString('base64url');
  }

  /** The value, or null when it is not one of ours, was sealed for something else, or ran out. */
  open(purpose: string, boundTo: string, sealed: string | undefined): unknown {
    if (!sealed || sealed.length > 8192 || !/^[A-Za-z0-9_-]+$/.test(sealed)) return null;
    const raw = Buffer.from(sealed, 'base64url');
    if (raw.length < 12 + 16 + 1) return null;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12));
      decipher.setAAD(Buffer.from(`${purpose}\u0000${boundTo}`));
      decipher.setAuthTag(raw.subarray(12, 28));
      const plain = Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]);
      const { v, exp } = JSON.parse(plain.toString('utf8')) as { v: unknown; exp: number };
      return typeof exp === 'number' && this.now() < exp ? v : null;
    } catch {
      return null;
    }
  }
}
