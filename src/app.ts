import { randomUUID } from 'node:crypto';
import { maxHeaderSize } from 'node:http';
import type { Socket } from 'node:net';
import pino from 'pino';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifySchemaValidationError } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { jsonSchemaTransform, jsonSchemaTransformObject, validatorCompiler } from 'fastify-type-provider-zod';
import { API_PREFIX, apiChannel } from './channels/api/index.ts';
import { clientErrorProblem, installErrorHandling } from './channels/api/plugins/errors.ts';
import {
  API_DESCRIPTION, withExamples, withExtraFieldsAllowed, withoutSafeIntegerBounds, withoutUnreferencedSchemas, withResponseHeaders, type RouteResponseHeaders,
} from './channels/api/openapi.ts';
import { webChannel } from './channels/web/index.ts';
import { mcpChannel } from './channels/mcp/index.ts';
import { RELEASE } from './release.ts';
import { findUnstorableText, Problem, unstorableTextProblem } from './domain/problems.ts';
import { sendProblem } from './channels/problem-reply.ts';
import { logAccess } from './observability/access-log.ts';
import { logDestination } from './observability/log-destination.ts';
import { lazyRequestLogger } from './observability/request-log.ts';
import { installMetrics } from './observability/metrics.ts';
import { BODY_LIMIT_BYTES, installJsonBodyParser } from './channels/json-body.ts';
import type { Config } from './config.ts';
import type { Runtime } from './runtime.ts';


/**
 * The most requests one connection may have whose answers are not yet written out (HTTP/1.1
 * pipelining). Node parses and runs every request a connection sends, and holds each answer
 * until the ones before it are written: a client that pipelines without reading made one
 * connection hold about 125 MB (119,000 requests) here. Past this many, the connection is closed
 * and the request not run. Ordinary clients, which wait for each answer, have one.
 */
export const MAX_PIPELINED_REQUESTS = 32;
const pendingAnswers = Symbol('requests of this connection not yet answered');
type CountedSocket = Socket & { [pendingAnswers]?: number };

/**
 * The server's log: JSON lines on stdout (see logDestination), secrets redacted. `serve` makes it
 * first, before the runtime opens, so that what goes wrong meanwhile (Redis out of reach, say)
 * is logged too.
 */
export function serverLog(config: Pick<Config, 'logLevel'>): pino.Logger {
  return pino({
    level: config.logLevel,
    redact: { paths: ['req.headers.authorization', 'req.headers.cookie', 'res.headers["set-cookie"]'], censor: '[redacted]' },
  }, logDestination());
}

/** How long /readyz waits for the database and the rate limit store to answer: a probe gets its answer within about a second. */
const READY_WITHIN_MS = 1000;

/** What `work` gives, or a failure once `ms` have passed without it. */
function answerWithin<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms); });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

export interface AppOptions {
  /** pino options, or false for silence (tests). Unset: `log`. */
  logger?: boolean | Record<string, unknown>;
  /** The server's log (serverLog), when it was made before the app; else the app makes one. */
  log?: pino.Logger;
}

/** The HTTP server of one instance: API channel, docs, health and metrics. */
export async function buildApp(runtime: Runtime, options: AppOptions = {}): Promise<FastifyInstance> {
  const log = options.logger === undefined ? (options.log ?? serverLog(runtime.config)) : null;
  const app = Fastify({
    // (As Fastify's own logger type, so that the app's type does not depend on which is given.)
    ...(log ? { loggerInstance: log as FastifyBaseLogger } : { logger: options.logger }),
    bodyLimit: BODY_LIMIT_BYTES,
    // A client has REQUEST_TIMEOUT_MS to send a whole request, its body included (Fastify's
    // default is no limit: a body that never arrives held its connection for ever); then 408.
    // Node looks for late ones at this interval (30 s by default).
    requestTimeout: runtime.config.requestTimeoutMs,
    http: {
      headersTimeout: Math.min(60_000, runtime.config.requestTimeoutMs),
      connectionsCheckingInterval: Math.min(30_000, Math.max(250, runtime.config.requestTimeoutMs / 4)),
    },
    genReqId: () => randomUUID(),
    childLoggerFactory: lazyRequestLogger,
    requestIdHeader: false,
    trustProxy: runtime.config.trustProxy,
    // Fastify's own 503 while closing is its JSON, not a problem: ours is below (onRequest).
    return503OnClosing: false,
    // Valid JSON is parsed, whatever its keys: `__proto__` and `constructor.prototype` are
    // dropped (they can never be a field of ours) instead of failing the body as unparseable.
    onProtoPoisoning: 'remove',
    onConstructorPoisoning: 'remove',
    clientErrorHandler: clientErrorProblem,
    // One access-log line per request (written in onResponse) instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    // Room for any id a client can send: no segment is longer than the request line Node accepts
    // (its header limit), so a wrong id, however long, is a 404 of its kind after auth.
    routerOptions: { maxParamLength: maxHeaderSize },
    // A URL the router cannot decode (bad percent-encoding) names no route: the contract's 404
    // problem, not Fastify's own JSON.
    frameworkErrors: (error, request, reply) => {
      reply.header('X-Request-Id', request.id);
      const why = error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'a path segment is too long' : 'it is not validly percent-encoded';
      return sendProblem(request, reply, new Problem('not_found', `No route for this URL: ${why}.`));
    },
  });
  // "Server listening at …" goes out at once, not with the next block of lines.
  if (log) app.addHook('onListen', (done) => { log.flush(); done(); });
  // No stored or queried text may hold U+0000 (PostgreSQL refuses it) or a lone surrogate (stored
  // altered): a clear 422 instead of a 500 or a changed text, for every channel. Checked where
  // the input is read, not in a hook of its own (one hook fewer on every request): a JSON body as
  // it is parsed (installJsonBodyParser), a route's query string and path parameters with their
  // schema, here, and the web app's forms in its own hook.
  app.setValidatorCompiler((route) => {
    const validate = validatorCompiler(route as Parameters<typeof validatorCompiler>[0]);
    if (route.httpPart !== 'querystring' && route.httpPart !== 'params') return validate;
    return (data: unknown) => {
      const result = validate(data) as { value?: unknown; error?: Error | FastifySchemaValidationError[] };
      if (result.error) {
        // A query parameter given twice arrives as an array: say so, not "must be a string, not an array".
        if (Array.isArray(result.error)) {
          for (const issue of result.error) {
            const name = issue.instancePath.split('/')[1];
            if (name !== undefined && Array.isArray((data as Record<string, unknown>)[name])) issue.message = 'must be given once';
          }
        }
        return result;
      }
      // Judged on what the schema kept: a parameter no route reads is ignored, whatever it holds.
      const path = findUnstorableText(result.value);
      return path === null ? result : { error: unstorableTextProblem(path) }; // an Error: Fastify passes it on as it is
    };
  });
  // Response schemas document the API; serialising with JSON.stringify keeps the hot path lean.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  app.removeContentTypeParser('text/plain');
  installJsonBodyParser(app);
  installErrorHandling(app);
  // From the moment the server starts closing (SIGTERM), a request that still arrives on an open
  // connection is refused at once, and its connection closed: the client retries elsewhere or
  // after the restart. (Idle connections are closed; requests already under way finish.)
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    // Node closes the connections idle when closing starts; one whose request is still being
    // answered would stay open after its answer until the keep-alive timeout (72 s), holding the
    // exit that long. So idle connections are closed again as answers go out, until none is left.
    // (Not `Connection: close` on the answers under way: Node then drops a request pipelined
    // behind one, which now gets its 503. As with Node's own closing, a client that sends just as
    // its idle connection closes gets a reset: nothing of that request was read or accepted.)
    const closeIdle = setInterval(() => app.server.closeIdleConnections(), 100).unref();
    app.server.once('close', () => clearInterval(closeIdle));
    done();
  });
  const { requestCache } = runtime.services;
  app.addHook('onRequest', async (request, reply) => {
    const socket = request.raw.socket as CountedSocket;
    const pending = (socket[pendingAnswers] ?? 0) + 1;
    socket[pendingAnswers] = pending;
    if (pending > MAX_PIPELINED_REQUESTS) {
      // The requests already read from the same packet still arrive here, one by one: logged once.
      if (!socket.destroyed) request.log.warn(`a connection sent over ${MAX_PIPELINED_REQUESTS} requests without reading the answers: closed`);
      socket.destroy();
      return reply.hijack();
    }
    reply.header('X-Request-Id', request.id);
    if (closing) {
      reply.header('Connection', 'close');
      throw new Problem('service_unavailable', 'The server is shutting down; send the request again (it will reach a running server).');
    }
    // Once per request, before anything reads keys or agents: another process's writes (the CLI's) are seen here.
    requestCache.dropIfWrittenElsewhere();
  });
  // Every answer written out: one hook for all that follows it (each hook costs more than its work).
  const { engine } = runtime;
  const metrics = installMetrics(app, {
    awaitingReply: () => engine.waiting,
    turnsRunning: () => engine.running,
    // A scrape is answered even while the database is frozen: the count is left out then.
    openJobs: () => answerWithin(engine.openJobs(), READY_WITHIN_MS),
    observeTurns: (observer) => engine.observe(observer),
    observeWebhooks: (observer) => runtime.webhookDeliveries.observe(observer),
    webhookBacklog: () => answerWithin(runtime.services.webhooks.backlog(), READY_WITHIN_MS),
  });
  app.addHook('onResponse', async (request, reply) => {
    const socket = request.raw.socket as CountedSocket; // this answer is written out (see MAX_PIPELINED_REQUESTS)
    if (socket[pendingAnswers]) socket[pendingAnswers] -= 1; // (an unroutable URL skips onRequest, not onResponse)
    logAccess(request, reply, 'request', reply.statusCode);
    metrics.observe(request, reply);
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'agent-channel API',
        version: '1.0.0',
        description: API_DESCRIPTION,
      },
      servers: [{ url: '/' }],
      components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: 'The whole key, `ak_<keyId>_<secret>`.' } } }, // (markdown: bare <…> would be read as HTML)
      security: [{ bearerAuth: [] }],
    },
    // The document describes the API channel only; the web app's pages are not part of it.
    transform: (input) => (input.url.startsWith(API_PREFIX)
      ? withResponseHeaders(jsonSchemaTransform(input), (input.route.config as { responseHeaders?: RouteResponseHeaders } | undefined)?.responseHeaders)
      : { schema: { ...input.schema, hide: true }, url: input.url }),
    // Emits the schemas named with .meta({ id }) under components, which the routes' $refs point
    // at; of the input twins it also emits (`AgentInput`, …), only those something refers to.
    // Responses are left open to fields they do not name (contract §0).
    transformObject: (input) => withExamples(withoutSafeIntegerBounds(withoutUnreferencedSchemas(withExtraFieldsAllowed(jsonSchemaTransformObject(input))))),
  });
  // The explorer lives on the web app's origin: no other site may frame it (clickjacking). A
  // scope of its own, so that the hook covers its static files too (uiHooks would not).
  await app.register(async (docs) => {
    docs.addHook('onRequest', async (_request, reply) => {
      reply.header('X-Frame-Options', 'DENY');
      reply.header('Content-Security-Policy', "frame-ancestors 'none'");
      reply.header('X-Content-Type-Options', 'nosniff');
    });
    await docs.register(swaggerUi, {
      routePrefix: '/docs', theme: { title: 'agent-channel API reference' }, uiConfig: { validatorUrl: null } as Record<string, unknown>,
    });
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
    // Both must answer for an API request to be served: the database, and the rate limit store
    // (Redis, when RATE_LIMIT_STORE=redis; the others live in the database or in memory).
    // An answer that has not come within READY_WITHIN_MS counts as none (a database that froze
    // accepts the connection and never answers); the ping itself goes on, bounded by the store.
    const [database, rateLimits] = await Promise.allSettled([
      answerWithin(runtime.store.ping(), READY_WITHIN_MS), answerWithin(runtime.rateLimiter.ping(), READY_WITHIN_MS)]);
    if (database.status === 'rejected') return reply.code(503).send({ status: 'unavailable', reason: 'database unreachable' });
    if (rateLimits.status === 'rejected') return reply.code(503).send({ status: 'unavailable', reason: 'rate limit store unreachable' });
    return { status: 'ready' };
  });

  await app.register(apiChannel(runtime.services, runtime.rateLimiter), { prefix: API_PREFIX });
  await app.register(mcpChannel({ services: runtime.services, rateLimiter: runtime.rateLimiter, version: RELEASE }));
  await app.register(webChannel({
    services: runtime.services, config: runtime.config, rateLimiter: runtime.rateLimiter, clock: runtime.store.clock,
  }));
  if (runtime.config.telegram) {
    // Loaded only here: a server without a bot does not carry grammY.
    const { telegramChannel } = await import('./channels/telegram/index.ts');
    await app.register(telegramChannel({
      settings: runtime.config.telegram, services: runtime.services, instanceId: runtime.config.instanceId,
      log: (level, message, fields = {}) => app.log[level](fields, message),
    }));
  }
  return app;
}
