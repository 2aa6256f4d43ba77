import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { webhookSignature } from '../../domain/webhooks.ts';
import { guardedLookup, hostOf, isPrivateAddress, RefusedAddressError } from './url-safety.ts';

/** A 2xx within this is a delivery (contract §9.5). */
export const DELIVERY_TIMEOUT_MS = 10_000;
/** The most of a response body read; the rest is dropped, and none of it is kept. */
const RESPONSE_READ_LIMIT = 16 * 1024;

export interface SendResult {
  /** The response's status; null when none came (refused, timed out, connection failed). */
  status: number | null;
  /** Why it was not a delivery, in a few words (no URL, no body, no secret); null for a 2xx. */
  error: string | null;
  durationMs: number;
}

export interface Attempt {
  url: string;
  secret: string;
  webhookId: string;
  body: string;
  timestampSeconds: number;
}

/**
 * POSTs one attempt with the Standard Webhooks headers. Redirects are not followed (a 3xx is an
 * answer that is not 2xx); the response body is read up to a small bound, then dropped.
 * Keep-alive connections were checked when they were opened.
 */
export class WebhookSender {
  private readonly allowPrivate: boolean;
  private readonly httpAgent: http.Agent;
  private readonly httpsAgent: https.Agent;

  constructor(options: { allowPrivate: boolean; maxSocketsPerHost: number }) {
    this.allowPrivate = options.allowPrivate;
    const lookup = guardedLookup(options.allowPrivate) as unknown as http.AgentOptions['lookup'];
    this.httpAgent = new http.Agent({ keepAlive: true, maxSockets: options.maxSocketsPerHost, lookup });
    this.httpsAgent = new https.Agent({ keepAlive: true, maxSockets: options.maxSocketsPerHost, lookup });
  }

  async send(attempt: Attempt, signal?: AbortSignal): Promise<SendResult> {
    const started = performance.now();
    const done = (status: number | null, error: string | null): SendResult => ({ status, error, durationMs: performance.now() - started });
    let url: URL;
    try {
      url = new URL(attempt.url);
    } catch {
      return done(null, 'invalid URL');
    }
    // An address written in the URL is connected to without a lookup: judged here.
    if (isIP(hostOf(url)) && !this.allowPrivate && isPrivateAddress(hostOf(url))) return done(null, 'refused: private address');
    if (url.protocol !== 'https:' && !(this.allowPrivate && url.protocol === 'http:')) return done(null, 'refused: not https');
    const timeout = AbortSignal.timeout(DELIVERY_TIMEOUT_MS);
    const requestSignal = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const body = Buffer.from(attempt.body);
    const isHttps = url.protocol === 'https:';
    return new Promise<SendResult>((resolve) => {
      let settled = false;
      const finish = (status: number | null, error: string | null) => {
        if (settled) return;
        settled = true;
        resolve(done(status, error));
      };
      const request = (isHttps ? https : http).request(url, {
        method: 'POST',
        agent: isHttps ? this.httpsAgent : this.httpAgent,
        signal: requestSignal,
        headers: {
          'content-type': 'application/json',
          'content-length': String(body.length),
          'user-agent': 'agent-channel-webhooks',
          'webhook-id': attempt.webhookId,
          'webhook-timestamp': String(attempt.timestampSeconds),
          'webhook-signature': webhookSignature(attempt.secret, attempt.webhookId, attempt.timestampSeconds, attempt.body),
        },
      }, (response) => {
        const status = response.statusCode ?? 0;
        let read = 0;
        response.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > RESPONSE_READ_LIMIT) {
            response.destroy();
            finish(status, status >= 200 && status < 300 ? null : `HTTP ${status}`);
          }
        });
        response.on('end', () => finish(status, status >= 200 && status < 300 ? null : `HTTP ${status}`));
        response.on('error', () => finish(status, status >= 200 && status < 300 ? null : `HTTP ${status}`));
      });
      request.on('error', (error: NodeJS.ErrnoException) => finish(null, describeError(error, timeout.aborted)));
      request.end(body);
    });
  }

  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}

/** A few words for a failed request (never its URL: it may carry a token). */
function describeError(error: NodeJS.ErrnoException, timedOut: boolean): string {
  if (timedOut) return `timed out after ${DELIVERY_TIMEOUT_MS / 1000} s`;
  if (error instanceof RefusedAddressError || error.code === 'EWEBHOOKADDRESS') return 'refused: private address';
  if (error.name === 'AbortError') return 'aborted';
  return error.code ? `connection failed (${error.code})` : 'connection failed';
}
