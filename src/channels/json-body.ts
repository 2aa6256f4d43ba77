import { isUtf8 } from 'node:buffer';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { findUnstorableText, Problem, unstorableTextProblem } from '../domain/problems.ts';

/** The largest body any request may carry (contract §0: 413 past it); the app's Fastify bodyLimit. */
export const BODY_LIMIT_BYTES = 1024 * 1024;

/** The body problems, whichever check finds them (Fastify's reader, or the API's judge of a GET's body). */
export const bodyTooLarge = () => new Problem('payload_too_large', 'The body is larger than 1 MiB.');
export const bodyNotJson = () => new Problem('unsupported_media_type', 'Send the body as application/json.');

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

/**
 * The app's parser of `application/json` bodies: Fastify's, after the checks above, and then the
 * stored-text rule (UNSTORABLE_TEXT_RULE: 422 naming the field). Bulk routes judge their entries'
 * text one by one instead (one bad entry never fails the others): `config.perEntryTextCheck`.
 */
export function installJsonBodyParser(app: FastifyInstance): void {
  const parseJson = jsonParserOf(app);
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const refused = refusal(request.headers, body as Buffer);
    if (refused) return done(refused, undefined);
    // secure-json-parse reads a Buffer as UTF-8.
    return parseJson(request, body as unknown as string, (error, value) => {
      if (error) return done(error, undefined);
      const perEntry = (request.routeOptions.config as { perEntryTextCheck?: boolean } | undefined)?.perEntryTextCheck === true;
      const path = perEntry ? null : findUnstorableText(value);
      return path === null ? done(null, value) : done(unstorableTextProblem(path), undefined);
    });
  });
}

/** Whether a request's framing announces a body (as Fastify judges it: a length above 0, or chunks). */
const carriesBody = (headers: IncomingHttpHeaders): boolean =>
  headers['transfer-encoding'] !== undefined || (headers['content-length'] !== undefined && headers['content-length'] !== '0');

/** Judges a GET's body (a promise), or says there is none to judge (null: no promise made on the hot path). */
export type GetBodyJudge = (request: FastifyRequest) => Promise<void> | null;

/**
 * A GET needs no body, and Fastify leaves one unread; contract §0 still judges every body, so
 * the API judges a GET's body as a POST's would be (413 over the body limit, 415 not JSON, 400
 * unparseable), once auth and the rate limit have admitted the request, and ignores a valid one.
 * A GET with no body (or an empty one) passes whatever Content-Type it names: many clients send
 * one with every request. (Called from the API's auth hook rather than from a hook of its own:
 * one hook fewer on every API request.)
 */
export function getBodyJudge(scope: FastifyInstance): GetBodyJudge {
  const parseJson = jsonParserOf(scope);
  const limit = scope.initialConfig.bodyLimit ?? BODY_LIMIT_BYTES;
  const judge = async (request: FastifyRequest): Promise<void> => {
    const body = await readAtMost(request.raw, limit);
    if (body.length === 0) return; // framed as a body (chunked, say), yet empty: none
    if (request.mediaType !== 'application/json') throw bodyNotJson();
    const refused = refusal(request.headers, body);
    if (refused) throw refused;
    // Parsed only to be judged: request.body stays unset.
    await new Promise<void>((resolve, reject) => parseJson(request, body as unknown as string, (error) => (error ? reject(error) : resolve())));
  };
  // A HEAD is a GET without the answer's body (RFC 9110): its request's body is judged alike.
  return (request) => ((request.method === 'GET' || request.method === 'HEAD') && carriesBody(request.headers) ? judge(request) : null);
}

/** A request's whole body, or a 413 once it is past `limit` bytes (announced or read). */
async function readAtMost(stream: IncomingMessage, limit: number): Promise<Buffer> {
  if (Number(stream.headers['content-length']) > limit) throw bodyTooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of stream) {
      size += (chunk as Buffer).length;
      if (size > limit) break;
      chunks.push(chunk as Buffer);
    }
  } catch {
    // The client hung up mid-body: its mistake (Fastify's own reader says 400 too), not ours.
    throw new Problem('malformed_request', 'The body ended before its announced length.');
  }
  if (size > limit) throw bodyTooLarge();
  return Buffer.concat(chunks);
}
