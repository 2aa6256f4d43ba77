import { timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest, RouteGenericInterface } from 'fastify';
import type { Services } from '../../services/services.ts';
import type { WebSession } from '../../services/web-sessions.ts';
import { html, type SafeHtml } from './html.ts';
import { page, type NavKey } from './layout.ts';
import type { Sealer } from './flash.ts';
import type { RateLimiter } from '../../ratelimit/rate-limiter.ts';
import type { SharedClock } from '../../store/shared-clock.ts';
import type { EventStreams } from '../event-streams.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The signed-in web session, or null. */
    webSession: WebSession | null;
    /** The CSRF token forms on this page must carry (the session's, or the pre-login one). */
    csrfToken: string;
  }
}

/** The deployment's settings the pages read (the server's Config holds them). */
export interface WebSettings {
  defaultRateLimitPerMinute: number;
  maxRateLimitPerMinute: number;
  waitCeilingMs: number;
  webChatRateLimitPerMinute: number;
  /** The Telegram channel's settings; null: off (Account → Channels says how to turn it on). */
  telegram: object | null;
  /** Where people reach this server (PUBLIC_URL); null: as each request says. */
  publicUrl: string | null;
  /** The model agents answer with; null: the built-in agent (contract §8), whose directives the chat lists. */
  model: object | null;
}

/** What every web page reaches services through. */
export interface WebContext {
  services: Services;
  config: WebSettings;
  /** The API keys' limiter (shared by instances like theirs), which also counts web chat messages per person. */
  rateLimiter: RateLimiter;
  /** Seals what one page hands to the next through a cookie (see flash.ts). */
  sealer: Sealer;
  /** The store's clock, which every instance shares: for times another instance wrote. */
  clock: SharedClock;
  /** The feed streams the pages hold open on this instance (see pages/feed.ts). */
  streams: EventStreams;
}

export interface RenderOptions {
  title: string;
  nav?: NavKey;
  body: SafeHtml;
  status?: number;
  narrow?: boolean;
  /** A form came back with errors: see PageOptions.error. */
  error?: boolean | undefined;
}

export function render(request: FastifyRequest, reply: FastifyReply, options: RenderOptions): FastifyReply {
  const session = request.webSession;
  return reply
    .code(options.status ?? 200)
    .type('text/html; charset=utf-8')
    .send(page({
      title: options.title,
      nav: options.nav,
      user: session ? { email: session.email, plan: session.plan } : null,
      csrfToken: request.csrfToken,
      body: options.body,
      narrow: options.narrow ?? false,
      error: options.error,
    }));
}

// A path of printable ASCII URL characters (RFC 3986's unreserved, sub-delims, ":", "@", "/", "?",
// "#" and percent-escapes): no controls, spaces or backslashes (which browsers drop or read as "/"),
// and nothing outside Latin-1 (which cannot go into a Location header).
const LOCAL_PATH = /^\/[A-Za-z0-9\-._~!$&'()*+,;=:@/?#%]*$/;
const PROBE_ORIGIN = 'http://next.invalid';

/**
 * Only paths on this site are followed after login (no open redirect); anything else gives the
 * start page. The path must also resolve, as a browser resolves it, to this origin.
 */
export function safeNext(value: unknown): string {
  if (typeof value !== 'string' || value.length > 512 || !LOCAL_PATH.test(value) || value.startsWith('//')) return '/';
  try {
    if (new URL(value, PROBE_ORIGIN).origin !== PROBE_ORIGIN) return '/';
  } catch {
    return '/';
  }
  return value;
}

type AuthedHandler<G extends RouteGenericInterface> = (request: FastifyRequest<G>, reply: FastifyReply, session: WebSession) => Promise<unknown> | unknown;

/** Wraps a handler that needs a signed-in user: others go to the login page and come back. */
export function authed<G extends RouteGenericInterface = RouteGenericInterface>(handler: AuthedHandler<G>) {
  return async (request: FastifyRequest<G>, reply: FastifyReply) => {
    const session = request.webSession;
    if (!session) {
      if (wantsJson(request)) return reply.code(401).send({ error: 'not_signed_in', message: 'Log in again.' });
      return reply.redirect(`/login?next=${encodeURIComponent(request.url)}`, 303);
    }
    return handler(request, reply, session);
  };
}

export function wantsJson(request: FastifyRequest): boolean {
  const accept = request.headers.accept ?? '';
  return accept.includes('application/json') && !accept.includes('text/html');
}

/**
 * A query parameter sent twice (`?session=a&session=b`) counts by its first value, as a form
 * field does (formValue): the pages read every parameter as one string.
 */
export function collapseRepeatedParameters(query: unknown): void {
  if (!query || typeof query !== 'object') return;
  const parameters = query as Record<string, unknown>;
  for (const name of Object.keys(parameters)) {
    const value = parameters[name];
    if (Array.isArray(value)) parameters[name] = value[0];
  }
}

/** A form field as one string (first value if repeated), or ''. */
export function formValue(body: unknown, name: string): string {
  if (!body || typeof body !== 'object') return '';
  const value = (body as Record<string, unknown>)[name];
  const first = Array.isArray(value) ? value[0] : value;
  return typeof first === 'string' ? first : typeof first === 'number' ? String(first) : '';
}

export function tokensEqual(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && left.length > 0 && timingSafeEqual(left, right);
}

export function errorPage(request: FastifyRequest, reply: FastifyReply, status: number, title: string, message: SafeHtml | string) {
  return render(request, reply, {
    title,
    status,
    narrow: true,
    body: html`<section class="card center">
      <p class="status-code" aria-hidden="true">${status}</p>
      <h1>${title}</h1>
      <p>${message}</p>
      <p><a class="btn" href="/">Go to the start page</a></p>
    </section>`,
  });
}
