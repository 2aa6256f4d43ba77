import createClient, { type Client } from 'openapi-fetch';
import { API_BASE, unwrap } from './api.ts';
import { WaitTimeoutError } from './errors.ts';
import type { paths } from './generated/openapi.ts';
import { bulkActions, bulkQuestions, type ActionsApi, type QuestionsApi } from './bulk.ts';
import { followEvents, type EventsOptions } from './events.ts';
import { retryingFetch, type FetchFunction, type RetryOptions } from './retrying-fetch.ts';
import type { Agent, CancelResult, EventPage, FeedEvent, SendResult, Transcript } from './types.ts';

/** The longest a held request asks to wait; the server caps it at its own ceiling (25 s by default). */
const LONG_POLL_SECONDS = 25;
/** A turn `ts` older than any: the `after` that waits for a session's first turn. */
const BEFORE_EVERY_TURN = '1970-01-01T00:00:00.000000Z';

export interface AgentChannelOptions {
  /** The server's origin, e.g. `https://agents.example.com` (the API path is added). */
  baseUrl: string;
  /** The whole key, `ak_<keyId>_<secret>`. */
  apiKey: string;
  retry?: RetryOptions;
  /** A fetch of your own (a proxy agent, a test double); the global fetch by default. */
  fetch?: typeof fetch;
}

export interface SendOptions {
  /** Continue this session (it keeps its agent). */
  sessionId?: string;
  /** For a new session: the agent to talk to (optional when you can message only one). */
  agentId?: string;
  /** Sent as `Idempotency-Key`; a random one when not given, so that a retry never starts a second turn. */
  idempotencyKey?: string;
  /** `Prefer: wait=<seconds>`: how long the server may hold the request for the reply. */
  waitSeconds?: number;
  signal?: AbortSignal;
}

export interface SendAndWaitOptions extends Omit<SendOptions, 'waitSeconds'> {
  /** Give up after this long with a WaitTimeoutError (the turn goes on). No limit by default. */
  timeoutMs?: number;
}

/** The finished turn: `reply` and `reply_ts` are always there (`error: "cancelled"` after a cancel). */
export type Reply = SendResult & { status: 'completed' | 'duplicate'; reply: string; reply_ts: string };

export interface TranscriptOptions {
  /** Only turns after this `ts`. */
  after?: string;
  /** Turns per page, 1–200 (default 200). */
  limit?: number;
  /** After the last page, keep waiting for new turns (long-poll) until the signal aborts. */
  follow?: boolean;
  signal?: AbortSignal;
}

/** A client of one agent-channel server, acting as the account of its API key. */
export class AgentChannel {
  readonly #api: Client<paths>;
  readonly #fetch: FetchFunction;
  readonly #baseUrl: string;
  readonly #apiKey: string;
  readonly agents: {
    list(options?: { signal?: AbortSignal }): Promise<Agent[]>;
    create(name: string, options?: { workspaceId?: string; signal?: AbortSignal }): Promise<Agent>;
  };
  readonly actions: ActionsApi;
  readonly questions: QuestionsApi;

  constructor(options: AgentChannelOptions) {
    this.#baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.#apiKey = options.apiKey;
    this.#fetch = retryingFetch(options.fetch ?? ((input, init) => fetch(input, init)), options.retry);
    this.#api = createClient<paths>({ baseUrl: this.#baseUrl, fetch: this.#fetch, headers: { authorization: `Bearer ${options.apiKey}` } });
    const api = this.#api;
    this.agents = {
      list: async ({ signal } = {}) => (await unwrap(api.GET(`${API_BASE}/agents`, { signal }))).agents,
      create: async (name, { workspaceId, signal } = {}) =>
        unwrap(api.POST(`${API_BASE}/agents`, { body: { agent_name: name, ...(workspaceId ? { workspace_id: workspaceId } : {}) }, signal })),
    };
    this.actions = bulkActions(api);
    this.questions = bulkQuestions(api);
  }

  /** `POST /messages`: the send result as the server gave it (`completed`, `processing`, `queued` or `duplicate`). */
  async send(text: string, options: SendOptions = {}): Promise<SendResult> {
    const header: { 'idempotency-key': string; prefer?: string } = { 'idempotency-key': options.idempotencyKey ?? crypto.randomUUID() };
    if (options.waitSeconds !== undefined) header.prefer = `wait=${Math.max(0, Math.floor(options.waitSeconds))}`;
    return unwrap(this.#api.POST(`${API_BASE}/messages`, {
      body: { text, ...(options.sessionId ? { session_id: options.sessionId } : {}), ...(options.agentId ? { agent_id: options.agentId } : {}) },
      params: { header },
      signal: options.signal,
    }));
  }

  /**
   * Sends and resolves with the reply, however long the turn takes: a 202 is followed by a
   * long-poll of the transcript (§9.1) and, once a turn is written, the same send again with the
   * same Idempotency-Key (which starts nothing and says whether this message's turn is done).
   * Rejects with ApiError `agent_failed` when the agent failed, WaitTimeoutError at `timeoutMs`.
   */
  async sendAndWait(text: string, options: SendAndWaitOptions = {}): Promise<Reply> {
    const { timeoutMs, signal: callerSignal, ...sendOptions } = options;
    const timeout = new AbortController();
    const timer = timeoutMs === undefined ? undefined : setTimeout(() => timeout.abort(), timeoutMs);
    const signal = callerSignal ? AbortSignal.any([callerSignal, timeout.signal]) : timeout.signal;
    const idempotencyKey = sendOptions.idempotencyKey ?? crypto.randomUUID();
    let sessionId = sendOptions.sessionId;
    try {
      // Held no longer than the timeout leaves, so that a timeout can name the session.
      const waitSeconds = timeoutMs === undefined ? undefined : Math.max(0, Math.floor(timeoutMs / 1000) - 1);
      let result = await this.send(text, { ...sendOptions, idempotencyKey, waitSeconds, signal });
      sessionId = result.session_id;
      let after = result.message_ts;
      while (!isReply(result)) {
        const page = await this.#readTranscript(result.session_id, { after, limit: 200, waitSeconds: LONG_POLL_SECONDS, signal });
        if (page.messages.length === 0) continue;
        after = page.messages.at(-1)!.ts;
        result = await this.send(text, { ...sendOptions, idempotencyKey, waitSeconds: 0, signal });
      }
      return result;
    } catch (error) {
      if (timeout.signal.aborted && !callerSignal?.aborted) throw new WaitTimeoutError(timeoutMs!, sessionId);
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  /** The session's transcript, page by page (oldest first); with `follow`, then every new turn as it is written. */
  async *transcript(sessionId: string, options: TranscriptOptions = {}): AsyncGenerator<Transcript> {
    let after = options.after;
    let waiting = false;
    for (;;) {
      const page = await this.#readTranscript(sessionId, {
        after, limit: options.limit ?? 200, waitSeconds: waiting ? LONG_POLL_SECONDS : undefined, signal: options.signal,
      });
      if (page.messages.length > 0 || !waiting) yield page;
      if (page.messages.length > 0) after = page.messages.at(-1)!.ts;
      if (page.has_more) continue;
      if (!options.follow) return;
      after ??= BEFORE_EVERY_TURN; // an empty session: wait for its first turn
      waiting = true;
    }
  }

  /** One page of the event feed as JSON (`GET /events`), held up to `waitSeconds` when nothing is newer. */
  async eventsPage(options: { after?: string; limit?: number; sessionId?: string; waitSeconds?: number; signal?: AbortSignal } = {}): Promise<EventPage> {
    return unwrap(this.#api.GET(`${API_BASE}/events`, {
      params: {
        query: { after: options.after, limit: options.limit, session_id: options.sessionId },
        header: options.waitSeconds === undefined ? {} : { prefer: `wait=${options.waitSeconds}` },
      },
      signal: options.signal,
    }));
  }

  /**
   * The event feed as a Server-Sent Events stream: every event after `after` (or from now on),
   * once each and in order; a dropped connection or a server restart is resumed with
   * `Last-Event-ID`. Ends when the signal aborts or the loop breaks.
   */
  events(options: EventsOptions = {}): AsyncGenerator<FeedEvent> {
    return followEvents({ fetch: this.#fetch, url: `${this.#baseUrl}${API_BASE}/events`, apiKey: this.#apiKey }, options);
  }

  /** `POST /sessions/{id}/cancel`: stops the session's queued and running work; closes its actions and questions. */
  async cancel(sessionId: string, options: { signal?: AbortSignal } = {}): Promise<CancelResult> {
    return unwrap(this.#api.POST(`${API_BASE}/sessions/{session_id}/cancel`, { params: { path: { session_id: sessionId } }, signal: options.signal }));
  }

  async #readTranscript(sessionId: string, options: { after?: string | undefined; limit?: number; waitSeconds?: number | undefined; signal?: AbortSignal | undefined }): Promise<Transcript> {
    const held = options.waitSeconds !== undefined && options.after;
    return unwrap(this.#api.GET(`${API_BASE}/sessions/{session_id}/messages`, {
      params: {
        path: { session_id: sessionId },
        query: { ...(options.after ? { after: options.after } : {}), limit: options.limit },
        header: held ? { prefer: `wait=${options.waitSeconds}` } : {},
      },
      signal: options.signal,
    }));
  }
}

function isReply(result: SendResult): result is Reply {
  return (result.status === 'completed' || result.status === 'duplicate') && result.reply !== undefined;
}

