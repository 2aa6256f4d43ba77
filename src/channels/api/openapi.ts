/** What the OpenAPI document needs beyond what the routes' zod schemas give it. */

/**
 * The response headers of the API, for the OpenAPI document. A route's zod schemas cannot declare
 * headers (the zod transform keeps only a response's body and description), so they are added to
 * each route's transformed schema here: those every API response carries, by status, and a
 * route's own, named in its `config.responseHeaders`.
 */
export const HEADERS = {
  'X-Request-Id': { type: 'string', description: 'Identifies the request in the server\'s log; also `request_id` in a problem body.' },
  'RateLimit-Policy': { type: 'string', description: 'The key\'s limit: `"key";q=<requests>;w=60`.' },
  RateLimit: { type: 'string', description: 'What is left of it: `"key";r=<remaining>;t=<seconds until a request is next sure to be accepted>`.' },
  'Retry-After': { type: 'integer', description: 'Seconds to wait before sending the request again (on a 429: until one is next sure to be accepted).' },
  'WWW-Authenticate': { type: 'string', description: '`Bearer`.' },
  Location: { type: 'string', description: 'The transcript to poll, `/api/v1/api-channel/sessions/{session_id}/messages`: on a 202, and on a 200 `duplicate` whose original has no reply yet.' },
  'Preference-Applied': { type: 'string', description: 'With `Prefer: wait=N`: the wait applied, `wait=<seconds>`.' },
} as const;

export type HeaderName = keyof typeof HEADERS;

/** A route's own response headers by status, beside those every response carries. */
export type RouteResponseHeaders = Partial<Record<number, HeaderName[]>>;

/** The headers a response of this status carries on every API route (auth and rate limit run first). */
function commonHeaders(status: number): HeaderName[] {
  if (status === 401) return ['X-Request-Id', 'WWW-Authenticate'];
  if (status === 429) return ['X-Request-Id', 'RateLimit-Policy', 'RateLimit', 'Retry-After'];
  if (status === 503) return ['X-Request-Id', 'Retry-After'];
  // A fault may strike before the rate limit has answered, or after: only the id is certain;
  // 431 comes from Node's HTTP parser, before any route. A 408 carries the rate limit's headers
  // when the key had been checked (headers in time, the body not).
  if (status === 408) return ['X-Request-Id', 'RateLimit-Policy', 'RateLimit'];
  if (status === 500 || status === 431) return ['X-Request-Id'];
  return ['X-Request-Id', 'RateLimit-Policy', 'RateLimit'];
}

/** The transformed schema of one API route, each response given the headers it carries. */
export function withResponseHeaders<T extends { schema: object }>(transformed: T, own: RouteResponseHeaders = {}): T {
  const responses = (transformed.schema as { response?: Record<string, object> }).response;
  if (!responses) return transformed;
  const documented = Object.fromEntries(Object.entries(responses).map(([status, response]) => {
    const names = [...commonHeaders(Number(status)), ...(own[Number(status)] ?? [])];
    return [status, { ...response, headers: Object.fromEntries(names.map((name) => [name, HEADERS[name]])) }];
  }));
  return { ...transformed, schema: { ...transformed.schema, response: documented } };
}

/**
 * The document without component schemas that nothing in it refers to, until none is left
 * (a schema referred to only by one dropped goes too).
 */
export function withoutUnreferencedSchemas<T extends object>(document: T): T {
  const { components } = document as { components?: { schemas?: Record<string, unknown> } };
  if (!components?.schemas) return document;
  const text = JSON.stringify(document);
  const referenced = (name: string) => text.includes(`"#/components/schemas/${name}"`);
  const schemas = Object.fromEntries(Object.entries(components.schemas).filter(([name]) => referenced(name)));
  const slimmer = { ...document, components: { ...components, schemas } };
  return Object.keys(schemas).length < Object.keys(components.schemas).length ? withoutUnreferencedSchemas(slimmer) : slimmer;
}

/**
 * The document with every object open to fields it does not name. zod describes a response
 * object as closed (`additionalProperties: false`), but contract §0 allows extra response fields:
 * a client that validates against this document must not break when the server adds one. (Only
 * responses are closed: request bodies are described as zod reads them, extra fields ignored.)
 */
export function withExtraFieldsAllowed<T extends object>(document: T): T {
  const open = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(open);
    if (!node || typeof node !== 'object') return node;
    const entries = Object.entries(node).filter(([name, value]) => !(name === 'additionalProperties' && value === false));
    return Object.fromEntries(entries.map(([name, value]) => [name, open(value)]));
  };
  return open(document) as T;
}
