import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { cookieOptions } from './cookies.ts';

/**
 * Seals small values that a page hands to the next page through a cookie (the new API key on
 * its way to the page that shows it once; an inbox answer that was not accepted).
 *
 * AES-256-GCM with the deployment's sealing key (kept in the shared instance_secrets table, see
 * WebSessionsService.sealingKey): what the browser holds is unreadable, cannot be forged or moved
 * to another account (the user id is part of the authenticated data), and says when it stops
 * being valid. Every instance, and this one after a restart, opens what another sealed. The
 * cookies that carry sealed values are session cookies, so Chromium keeps them in memory rather
 * than on disk. A value that ran out or was tampered with does not open: pages must cope with
 * `open` answering null.
 */
export class Sealer {
  private readonly key: Buffer;
  private readonly now: () => number;

  /** `key`: the deployment's 32-byte sealing key, the same on every instance. */
  constructor(options: { key: Buffer; now?: () => number }) {
    this.key = options.key;
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

/** Where a value handed to the next page travels: its cookie (on `path` only), purpose and lifetime. */
export interface Flash {
  cookie: string;
  path: string;
  purpose: string;
  ttlMs: number;
}

/**
 * Hands `value` to the next page: sealed for `flash.purpose` and the user, in a session cookie.
 * `clear` goes before it readable (`<clear>.<sealed>`), for the next page to use when the sealed
 * part does not open.
 */
export function setFlash(
  sealer: Sealer, request: FastifyRequest, reply: FastifyReply, flash: Flash, userId: string, value: unknown, clear = '',
): void {
  const sealed = sealer.seal(flash.purpose, userId, value, flash.ttlMs);
  reply.setCookie(flash.cookie, clear ? `${clear}.${sealed}` : sealed, cookieOptions(request, { path: flash.path }));
}

/**
 * Takes what the previous page handed over, clearing the cookie (shown once: a reload shows
 * nothing). null when there was no cookie; else its readable part and the value, which is null
 * when it does not open (ran out, tampered with, or sealed for someone or something else).
 */
export function takeFlash(
  sealer: Sealer, request: FastifyRequest, reply: FastifyReply, flash: Flash, userId: string,
): { clear: string; value: unknown } | null {
  const cookie = request.cookies[flash.cookie];
  if (!cookie) return null;
  reply.clearCookie(flash.cookie, cookieOptions(request, { path: flash.path }));
  const dot = cookie.indexOf('.');
  return { clear: cookie.slice(0, Math.max(0, dot)), value: sealer.open(flash.purpose, userId, cookie.slice(dot + 1)) };
}
