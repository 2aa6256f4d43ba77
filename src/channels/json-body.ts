import { isUtf8 } from 'node:buffer';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { Problem } from '../domain/problems.ts';
import { bodyNotJson, bodyTooLarge } from './api/plugins/errors.ts';

/** Fastify's own JSON parser (prototype poisoning removed, as the app is configured). */
type JsonParser = ReturnType<FastifyInstance['getDefaultJsonParser']>;
const jsonParserOf = (app: FastifyInstance): JsonParser => app.getDefaultJsonParser('remove', 'remove');

/**
 * What Fastify's parser does not check of a JSON body, only how it was sent (RFC 8259 §8.1,
 * RFC 9110 §8.4): a compressed body is an unsupported media type (415) rather than unparseable,
 * and bytes that are not UTF-8 are malformed (400) rather than stored with U+FFFD in their place.
 */
function refusal(headers: IncomingHttpHeaders, body: Buffer): Problem | null {
  const coding = headers['content-encoding']?.trim().toLowerCase();
  if (coding && coding !== 'identity') return new Problem('unsupported_media_type', 'Send the body uncompressed (no Content-Encoding).');
  if (!isUtf8(body)) return new Problem('malformed_json', 'The body is not valid JSON: it is not UTF-8.');
  return null;
}

/** The app's parser of `application/json` bodies: Fastify's, after the checks above. */
export function installJsonBodyParser(app: FastifyInstance): void {
  const parseJson = jsonParserOf(app);
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const refused = refusal(request.headers, body as Buffer);
    if (refused) return done(refused, undefined);
    return parseJson(request, body as unknown as string, done); // secure-json-parse reads a Buffer as UTF-8
  });
}

/** Whether a request's framing announces a body (as Fastify judges it: a length above 0, or chunks). */
const carriesBody = (headers: IncomingHttpHeaders): boolean =>
  headers['transfer-encoding'] !== undefined || (headers['content-length'] !== undefined && headers['content-length'] !== '0');

/**
 * A GET needs no body, and Fastify leaves one unread; contract §0 still judges every body, so
 * in this scope a GET's body is judged as a POST's would be (413 over the body limit, 415 not
 * JSON, 400 unparseable), after auth and the rate limit (preValidation), and a valid one is then
 * ignored. A GET with no body (or an empty one) passes whatever Content-Type it names: many
 * clients send one with every request.
 */
export function judgeBodiesOfGets(scope: FastifyInstance): void {
  const parseJson = jsonParserOf(scope);
  const limit = scope.initialConfig.bodyLimit ?? 1024 * 1024;
  scope.addHook('preValidation', (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
    if (request.method !== 'GET' || !carriesBody(request.headers)) return done();
    readAtMost(request.raw, limit).then((body) => {
      if (body.length === 0) return done(); // framed as a body (chunked, say), yet empty: none
      if (request.mediaType !== 'application/json') return done(bodyNotJson());
      const refused = refusal(request.headers, body);
      if (refused) return done(refused);
      // Parsed only to be judged: request.body stays unset.
      return parseJson(request, body as unknown as string, (error) => done(error ?? undefined));
    }, done);
  });
}

/** A request's whole body, or a 413 once it is past `limit` bytes (announced or read). */
async function readAtMost(stream: IncomingMessage, limit: number): Promise<Buffer> {
  if (Number(stream.headers['content-length']) > limit) throw bodyTooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += (chunk as Buffer).length;
    if (size > limit) throw bodyTooLarge();
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
