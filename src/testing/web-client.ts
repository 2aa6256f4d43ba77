import type { LightMyRequestResponse } from 'fastify';
import type { TestApp } from './harness.ts';

// Each client is its own machine unless told otherwise: a loopback address of its own, so that
// the per-IP sign-up and log-in throttles of one test file do not add up across its tests.
let clientCount = 0;
const nextAddress = (): string => {
  clientCount += 1;
  return `127.1.${Math.floor(clientCount / 250) % 250}.${(clientCount % 250) + 1}`;
};

/**
 * A tiny browser stand-in over Fastify inject for the web channel's route tests: keeps
 * cookies, and sends the CSRF token of the last page it read with each form, as a page would.
 */
export class WebClient {
  readonly cookies = new Map<string, string>();
  csrf = '';
  private readonly t: TestApp;
  private readonly ip: string;

  constructor(t: TestApp, options: { ip?: string } = {}) {
    this.t = t;
    this.ip = options.ip ?? nextAddress();
  }

  cookieHeader(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  async get(url: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
    const res = await this.t.inject({
      method: 'GET', url, remoteAddress: this.ip,
      headers: { accept: 'text/html', cookie: this.cookieHeader(), ...headers },
    });
    this.absorb(res);
    return res;
  }

  async post(url: string, form: Record<string, string> = {}, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
    const body = new URLSearchParams({ _csrf: this.csrf, ...form }).toString();
    const res = await this.t.inject({
      method: 'POST', url, remoteAddress: this.ip, payload: body,
      headers: { accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded', cookie: this.cookieHeader(), ...headers },
    });
    this.absorb(res);
    return res;
  }

  /** Signs up a new account (reading the form first for its token); returns the email. */
  async signup(email = `w-${Math.random().toString(36).slice(2, 10)}@example.test`, password = 'correct horse battery'): Promise<string> {
    await this.get('/signup');
    const res = await this.post('/signup', { email, password });
    if (res.statusCode !== 303) throw new Error(`signup failed: ${res.statusCode} ${res.body.slice(0, 500)}`);
    await this.get('/');
    return email;
  }

  async login(email: string, password = 'correct horse battery'): Promise<LightMyRequestResponse> {
    await this.get('/login');
    const res = await this.post('/login', { email, password });
    await this.get('/');
    return res;
  }

  private absorb(res: LightMyRequestResponse): void {
    const raw = res.headers['set-cookie'];
    for (const line of Array.isArray(raw) ? raw : raw ? [raw] : []) {
      const [pair] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      if (/max-age=0/i.test(line) || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    const match = /name="_csrf" value="([^"]+)"/.exec(res.body);
    if (match) this.csrf = match[1]!;
  }
}

/** A person signed up in the browser who created one agent there. */
export async function signedUpWithAgent(t: TestApp, name = 'Chatty'): Promise<{ web: WebClient; email: string; agentId: string }> {
  const web = new WebClient(t);
  const email = await web.signup();
  await web.get('/agents');
  const res = await web.post('/agents', { agent_name: name });
  const agentId = /created=(agt_[A-Za-z0-9]+)/.exec(String(res.headers.location))![1]!;
  return { web, email, agentId };
}

export function setCookieLines(res: LightMyRequestResponse): string[] {
  const raw = res.headers['set-cookie'];
  return Array.isArray(raw) ? raw : raw ? [raw] : [];
}
