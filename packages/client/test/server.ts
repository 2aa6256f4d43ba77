import { after, before } from 'node:test';
import { AgentChannel, type AgentChannelOptions } from '../src/index.ts';
import type { Config } from '../../../src/config.ts';
import { listeningUrl, startTestApp, type TestApp, type TestUser } from '../../../src/testing/harness.ts';

/** A real app listening on a loopback port, over a fresh database of the pass (SQLite or PostgreSQL). */
export interface ListeningApp {
  t: TestApp;
  url: string;
  /** A pro user with `agents` agents, and a client acting as them. */
  account(agents?: number, options?: { rateLimit?: number; client?: Partial<AgentChannelOptions> }): Promise<Account>;
}

export interface Account {
  user: TestUser;
  agentIds: string[];
  client: AgentChannel;
}

/** Registers the app's start and close around the calling file's tests. */
export function listeningApp(overrides: Partial<Config> = {}): ListeningApp {
  const served = {} as ListeningApp;
  before(async () => {
    served.t = await startTestApp(overrides);
    served.url = await listeningUrl(served.t);
    served.account = async (agents = 1, options = {}) => {
      const user = await served.t.user({ plan: 'pro', ...(options.rateLimit ? { rateLimit: options.rateLimit } : {}) });
      const agentIds: string[] = [];
      for (let i = 0; i < agents; i++) {
        agentIds.push((await served.t.runtime.services.agents.create(user.id, { agent_name: `Agent ${i}` })).agent_id);
      }
      return { user, agentIds, client: new AgentChannel({ baseUrl: served.url, apiKey: user.key, ...options.client }) };
    };
  });
  after(async () => { await served.t?.close(); });
  return served;
}

/** A fetch that notes each request's method, path and answer status (what the client did on the wire). */
export function recordingFetch(): { fetch: typeof fetch; calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    fetch: async (input, init) => {
      const request = new Request(input, init);
      const response = await fetch(request);
      calls.push(`${request.method} ${new URL(request.url).pathname} ${response.status}`);
      return response;
    },
  };
}
