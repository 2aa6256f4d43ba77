/** What the OpenAPI document needs beyond what the routes' zod schemas give it. */
import { API_PREFIX } from '../api-prefix.ts';
import { problemExample, SUCCESS_EXAMPLES } from './examples.ts';

/**
 * The document's description (markdown, shown at the top of /docs): where the document itself
 * is, the way to follow a long turn, and the built-in agent's directives (contract §8) to try the
 * API with.
 */
export const API_DESCRIPTION = [
  'Send messages to AI agents, read transcripts, and settle what they are blocked on. Every request carries `Authorization: Bearer ak_<keyId>_<secret>` (create a key in the web app, under API keys). '
    + 'Errors are RFC 9457 problem details with a stable `code`. '
    + 'Every GET also answers HEAD (RFC 9110): the same status and headers with no body, counted against the key\'s rate limit like the GET. '
    + 'The same key also serves MCP clients (AI tools) at `/mcp` (Streamable HTTP, stateless; not a REST route, so not listed here): '
    + 'the tools list_agents, create_agent, send_message, get_messages, list_actions, decide_actions, list_questions, answer_questions and cancel call the routes\' services.',
  'This document: [/openapi.json](/openapi.json) (OpenAPI 3.1).',
  '## A turn that runs long',
  `1. \`POST ${API_PREFIX}/messages\` with \`{"text": "…"}\`. A reply within the wait (25 s unless the server says otherwise, or less with \`Prefer: wait=<seconds>\`) comes back at once: 200 \`completed\`.`,
  `2. Otherwise: 202 \`processing\` (or \`queued\`), with \`session_id\`, \`message_ts\` and \`Location: ${API_PREFIX}/sessions/{session_id}/messages\`. Nothing is lost: the turn goes on.`,
  '3. Long-poll the transcript: `GET {Location}?after={message_ts}` with `Prefer: wait=25` is held until the next turn is written (the reply, or an error turn with `error` set), then answered at once; on an empty page, ask again with the same `after`.',
  '4. When the session is `idle` and `awaiting` is not empty, the agent waits for a person: settle it with `POST /actions/decisions` or `POST /questions/answers`; the next turn follows in the transcript. `GET /events` (JSON or Server-Sent Events) follows every session at once.',
  '## The built-in agent',
  'With no model configured, agents answer with the built-in agent: `You said: <text>`, and these directives at the start of a message:',
  '- `!sleep <ms> [text]`: works for that long (at most 600000 ms), then handles the text (a way to see a 202).',
  '- `!fail [text]`: fails the turn (502 `agent_failed` within the wait, an error turn after it).',
  '- `!action <kind> <summary>`: drafts an action that needs permission (`awaiting`, `GET /actions`). Approved: `Done: <summary>`; rejected with a reason: `Re-planned: <reason>`; without one: `Stopped.`',
  '- `!ask <type> <question>`: asks you a question; `<type>` is `text`, `number`, `date` (YYYY-MM-DD), `email`, `yesno` or `choice:a|b|c`. A fitting answer gets `Noted: <answer>`.',
  '- `!ask-user <email> <type> <question>`: the same, put to another member of the agent\'s workspace.',
].join('\n\n');

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

type DocumentedResponse = { description?: string; content?: Record<string, { example?: unknown }> };
type DocumentedOperation = { operationId?: string; responses?: Record<string, DocumentedResponse> };

/**
 * The document with an example of every response body (examples.ts): without one, the explorer
 * makes one up from the schema (a 202 saying `completed`, a problem with status
 * -9007199254740991).
 */
export function withExamples<T extends object>(document: T): T {
  const paths = (document as { paths?: Record<string, Record<string, DocumentedOperation>> }).paths ?? {};
  const examplesOf = (operation: DocumentedOperation) => Object.fromEntries(Object.entries(operation.responses ?? {}).map(([status, response]) => {
    const content = Object.fromEntries(Object.entries(response.content ?? {}).map(([type, media]) => {
      const example = type === 'application/problem+json' ? problemExample(Number(status), response.description ?? '')
        : type === 'application/json' && operation.operationId ? SUCCESS_EXAMPLES[operation.operationId]?.[Number(status)]
        : undefined;
      return [type, example === undefined ? media : { ...media, example }];
    }));
    return [status, response.content ? { ...response, content } : response];
  }));
  const documented = Object.fromEntries(Object.entries(paths).map(([path, operations]) => [path,
    Object.fromEntries(Object.entries(operations).map(([method, operation]) =>
      [method, operation && typeof operation === 'object' && 'responses' in operation ? { ...operation, responses: examplesOf(operation) } : operation])),
  ]));
  return { ...document, paths: documented };
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
 * The document without the bounds zod gives every integer (JavaScript's safe range,
 * ±9007199254740991), which say nothing to a reader and which the explorer showed as values.
 */
export function withoutSafeIntegerBounds<T extends object>(document: T): T {
  const strip = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(strip);
    if (!node || typeof node !== 'object') return node;
    const entries = Object.entries(node).filter(([name, value]) =>
      !((name === 'minimum' && value === Number.MIN_SAFE_INTEGER) || (name === 'maximum' && value === Number.MAX_SAFE_INTEGER)));
    return Object.fromEntries(entries.map(([name, value]) => [name, strip(value)]));
  };
  return strip(document) as T;
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
