import type { FastifyRequest } from 'fastify';

/** The web app's cookies: the signed-in session, the pre-login CSRF token, and the new key on its way to be shown. */
export const SESSION_COOKIE = 'ac_session';
export const PRE_COOKIE = 'ac_pre';
export const FLASH_KEY_COOKIE = 'ac_new_key';
export const FLASH_WEBHOOK_COOKIE = 'ac_new_webhook';

/** Every cookie of the web app: out of scripts' reach, never sent from another site, Secure over TLS. */
export function cookieOptions(request: FastifyRequest, extra: { maxAge?: number; path?: string } = {}) {
  return {
    httpOnly: true,
    sameSite: 'strict' as const,
    secure: request.protocol === 'https',
    path: extra.path ?? '/',
    ...(extra.maxAge !== undefined ? { maxAge: extra.maxAge } : {}),
  };
}
