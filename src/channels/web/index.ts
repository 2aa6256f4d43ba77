import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import type { FastifyError, FastifyInstance } from 'fastify';
import { randomBase62 } from '../../domain/ids.ts';
import { findUnstorableText, Problem, unstorableTextProblem } from '../../domain/problems.ts';
import { collapseRepeatedParameters, errorPage, formValue, tokensEqual, wantsJson, type WebContext } from './context.ts';
import { cookieOptions, PRE_COOKIE, SESSION_COOKIE } from './cookies.ts';
import { Sealer } from './flash.ts';
import { accountRoutes } from './pages/account.ts';
import { channelsRoutes } from './pages/channels.ts';
import { keysRoutes } from './pages/keys.ts';
import { webhooksRoutes } from './pages/webhooks.ts';
import { agentsRoutes } from './pages/agents.ts';
import { conversationsRoutes } from './pages/conversations.ts';
import { inboxRoutes } from './pages/inbox.ts';
import { chatRoutes } from './pages/chat.ts';
import { feedRoutes } from './pages/feed.ts';
import { installEventStreams, MAX_STREAMS_PER_HOLDER } from '../event-streams.ts';
import { isStoreUnavailable, storeOutageFields } from '../../store/unavailable.ts';
import { isCrossSite } from '../cross-site.ts';

const CSP = [
  "default-src 'self'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "connect-src 'self'",
  "form-action 'self'", "frame-ancestors 'none'", "base-uri 'none'", "object-src 'none'",
].join('; ');

const UNSAFE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

function loadAsset(name: string, type: string): Asset {
  const body = readFileSync(new URL(`./assets/${name}`, import.meta.url));
  return { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 16)}"` };
}

/**
 * The browser channel: server-rendered pages for account users. Registered at the root as an
 * encapsulated plugin; its cookie and form-body parsers, hooks and error pages stay inside it,
 * so the API channel keeps its own behaviour (e.g. 415 for form bodies).
 */
export function webChannel(deps: Omit<WebContext, 'sealer' | 'streams'>) {
  return async function register(scope: FastifyInstance): Promise<void> {
    const ctx: WebContext = {
      ...deps,
      // What one instance seals, another may open: its expiry is by the clock they share.
      sealer: new Sealer({ key: await deps.services.webSessions.sealingKey(), now: () => deps.clock.now() }),
      streams: await installEventStreams(scope, `You already have ${MAX_STREAMS_PER_HOLDER} pages following your conversations: close one.`),
    };
    await scope.register(cookie);
    // Room for the longest chat message the server accepts: 32,000 characters of up to 4 bytes,
    // percent-encoded (3 characters a byte), plus the other fields.
    await scope.register(formbody, { bodyLimit: 512 * 1024 });

    scope.decorateRequest('webSession', null);
    scope.decorateRequest('csrfToken', '');

    scope.addHook('onRequest', async (request, reply) => {
      reply.header('Content-Security-Policy', CSP);
      reply.header('X-Frame-Options', 'DENY');
      reply.header('X-Content-Type-Options', 'nosniff');
      reply.header('Referrer-Policy', 'same-origin');
      if (request.url.startsWith('/assets/')) return;
      reply.header('Cache-Control', 'no-store');

      // CSRF, first line: a state-changing request that the browser says comes from another site.
      if (UNSAFE_METHODS.has(request.method) && isCrossSite(request)) {
        return errorPage(request, reply, 403, 'Request refused',
          'This form was sent from another site, so it was not acted on. Open the page on this site and try again.');
      }

      const session = await ctx.services.webSessions.resolve(request.cookies[SESSION_COOKIE]);
      if (session) {
        request.webSession = session;
        request.csrfToken = session.csrfToken;
        return;
      }
      if (request.cookies[SESSION_COOKIE]) reply.clearCookie(SESSION_COOKIE, cookieOptions(request));
      // Before login, forms carry a token tied to a cookie of their own (log-in CSRF).
      const pre = request.cookies[PRE_COOKIE];
      if (pre && /^[A-Za-z0-9]{32}$/.test(pre)) {
        request.csrfToken = pre;
      } else {
        request.csrfToken = randomBase62(32);
        reply.setCookie(PRE_COOKIE, request.csrfToken, cookieOptions(request));
      }
    });

    // The stored-text rule for what the pages read (see setValidatorCompiler in app.ts), then
    // CSRF, second line: every unsafe request carries the session's token (a form field or a header).
    scope.addHook('preHandler', async (request, reply) => {
      collapseRepeatedParameters(request.query);
      const path = findUnstorableText(request.query) ?? findUnstorableText(request.params) ?? findUnstorableText(request.body);
      if (path !== null) throw unstorableTextProblem(path);
      if (!UNSAFE_METHODS.has(request.method)) return;
      // A client gone before its form is handled is not served: nothing is done for an answer
      // nobody can read. (Its socket may not say so yet; its address, which the log-in throttle
      // counts by, is gone already.)
      if (request.raw.socket.destroyed || !request.raw.socket.remoteAddress) return reply.code(400).send();
      const sent = formValue(request.body, '_csrf') || String(request.headers['x-csrf-token'] ?? '');
      if (!tokensEqual(sent, request.csrfToken)) {
        if (wantsJson(request)) return reply.code(403).send({ error: 'csrf', message: 'Reload the page and try again.' });
        return errorPage(request, reply, 403, 'Form expired',
          'This form could not be verified (it may have expired, or come from somewhere else). Reload the page and try again.');
      }
    });

    scope.setErrorHandler((error: FastifyError, request, reply) => {
      if (error instanceof Problem) {
        if (error.status >= 500) request.log.error({ err: error }, 'web page failed');
        return errorPage(request, reply, error.status, error.title, error.message);
      }
      const status = error.statusCode && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
      if (status === 500 && isStoreUnavailable(error)) {
        // The database is away for a moment: as the API says it (503, Retry-After), with no stack.
        request.log.warn(storeOutageFields(error), 'database unavailable');
        reply.header('Retry-After', '1');
        return errorPage(request, reply, 503, 'Try again in a moment', 'The service cannot reach its database just now. Reload the page in a moment.');
      }
      if (status === 500) {
        request.log.error({ err: error }, 'web page failed');
        return errorPage(request, reply, 500, 'Something went wrong', `Something went wrong on our side. Reference: ${request.id}.`);
      }
      const title = status === 413 ? 'Too large' : status === 415 ? 'Unsupported form' : 'Bad request';
      return errorPage(request, reply, status, title, 'The request could not be read. Go back and try again.');
    });

    const assets: Record<string, Asset> = {
      'app.css': loadAsset('app.css', 'text/css; charset=utf-8'),
      'app.js': loadAsset('app.js', 'text/javascript; charset=utf-8'),
      'favicon.svg': loadAsset('favicon.svg', 'image/svg+xml'),
    };
    scope.get<{ Params: { name: string } }>('/assets/:name', async (request, reply) => {
      const asset = Object.hasOwn(assets, request.params.name) ? assets[request.params.name] : undefined; // not `constructor` & co.
      if (!asset) return errorPage(request, reply, 404, 'Page not found', 'There is no such file.');
      reply.header('ETag', asset.etag).header('Cache-Control', 'public, max-age=300, must-revalidate');
      if (request.headers['if-none-match'] === asset.etag) return reply.code(304).send();
      return reply.type(asset.type).send(asset.body);
    });

    for (const routes of [accountRoutes, keysRoutes, webhooksRoutes, channelsRoutes, agentsRoutes, conversationsRoutes, inboxRoutes, chatRoutes, feedRoutes]) routes(scope, ctx);

    // Pages that do not exist: an HTML page for browsers; anything else keeps the problem+json 404
    // (unknown API URLs never get here: see installErrorHandling).
    scope.get('/*', async (request, reply) => {
      const accept = request.headers.accept ?? '';
      if (!accept.includes('text/html')) return reply.callNotFound();
      return errorPage(request, reply, 404, 'Page not found', 'There is no page at this address.');
    });
  };
}
