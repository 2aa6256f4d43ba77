import type { Kysely } from 'kysely';
import { z } from 'zod';
import { EXAMPLE_IDS, looksLikeId, newId } from '../domain/ids.ts';
import { parseOrThrow, Problem } from '../domain/problems.ts';
import type { Agent, DB, Plan } from '../store/schema.ts';
import { prepared } from '../store/prepared.ts';
import type { Store } from '../store/store.ts';
import { isoNowOf } from '../store/shared-clock.ts';
import type { AccountsService } from './accounts.ts';
import type { CachedReads } from './cached-reads.ts';

export const CreateAgentSchema = z.object({
  agent_name: z.string().trim().min(1, 'is required').max(100, 'must be at most 100 characters')
    .meta({ description: 'The name, 1–100 characters once surrounding whitespace is trimmed (it is stored trimmed).' }),
  // No length bound of its own (the body's bounds it): an id that cannot be one is not found.
  workspace_id: z.string().min(1).optional().meta({
    description: 'Default: your personal workspace. `GET /agents` shows the workspace of each agent you can message; every workspace you belong to, those without agents too, is listed by the operator CLI\'s `workspaces list --email E`.',
  }),
});

/** An agent as channels show it (§2, §3). */
export const AgentSchema = z.object({
  agent_id: z.string().meta({ example: EXAMPLE_IDS.agent }),
  name: z.string(),
  workspace_id: z.string().meta({ example: EXAMPLE_IDS.workspace }),
}).meta({ id: 'Agent' });

export type AgentView = z.infer<typeof AgentSchema>;

export interface AgentsDeps {
  store: Store;
  /** Shared with the services that write what it keeps (see RequestCache). */
  agentListCache: CachedReads<AgentView[]>;
  accounts: AccountsService;
  freeAgentLimit: number;
  proAgentLimit: number;
}

export const toAgentView = (agent: Pick<Agent, 'id' | 'name' | 'workspace_id'>): AgentView => ({
  agent_id: agent.id, name: agent.name, workspace_id: agent.workspace_id,
});

// Behind GET /agents and every message, when the list is not kept: built once (see store/prepared.ts).
const agentsOfUser = prepared((db, userId: string) => db.selectFrom('agents')
  .innerJoin('memberships', 'memberships.workspace_id', 'agents.workspace_id')
  .select(['agents.id', 'agents.name', 'agents.workspace_id'])
  .where('memberships.user_id', '=', userId)
  .orderBy('agents.created_at').orderBy('agents.id'));

// One agent of the user's, when the lists are not kept (a user may have thousands of agents).
const agentOfUser = prepared((db, userId: string, agentId: string) => db.selectFrom('agents')
  .innerJoin('memberships', 'memberships.workspace_id', 'agents.workspace_id')
  .select(['agents.id', 'agents.name', 'agents.workspace_id'])
  .where('memberships.user_id', '=', userId).where('agents.id', '=', agentId));

// Each kept list's agents by id, made once a list (lists are frozen and replaced, never changed).
const listIndexes = new WeakMap<readonly AgentView[], Map<string, AgentView>>();

export class AgentsService {
  private readonly deps: AgentsDeps;

  constructor(deps: AgentsDeps) {
    this.deps = deps;
  }

  /** Every agent of every workspace the user belongs to, oldest first (frozen: it may be shared). */
  async listForUser(userId: string): Promise<AgentView[]> {
    return this.deps.agentListCache.get(userId, async () => Object.freeze((await agentsOfUser(this.deps.store.db, userId))
      .map((row) => Object.freeze(toAgentView(row)))) as AgentView[]);
  }

  /** The agent if the user may message it (member of its workspace), else undefined. */
  async findAvailable(userId: string, agentId: string): Promise<AgentView | undefined> {
    if (!looksLikeId('agent', agentId)) return undefined;
    if (!this.deps.agentListCache.keeps) {
      const [row] = await agentOfUser(this.deps.store.db, userId, agentId);
      return row && toAgentView(row);
    }
    const list = await this.listForUser(userId);
    let index = listIndexes.get(list);
    if (!index) listIndexes.set(list, (index = new Map(list.map((agent) => [agent.agent_id, agent]))));
    return index.get(agentId);
  }

  /** How many agents a plan allows (FREE_PLAN_AGENT_LIMIT, PRO_PLAN_AGENT_LIMIT). */
  agentLimitOf(plan: Plan): number {
    return plan === 'pro' ? this.deps.proAgentLimit : this.deps.freeAgentLimit;
  }

  /** How many agents count against the user's plan: those in the workspaces the user owns (contract §3). */
  async ownedAgentCount(userId: string, db: Kysely<DB> = this.deps.store.db): Promise<number> {
    const { count } = await db.selectFrom('agents')
      .innerJoin('memberships', 'memberships.workspace_id', 'agents.workspace_id')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('memberships.user_id', '=', userId).where('memberships.role', '=', 'owner')
      .executeTakeFirstOrThrow();
    return Number(count);
  }

  /** Checks in the contract's order: body (422), workspace (404), role (403), plan (403). */
  async create(userId: string, input: { agent_name: string; workspace_id?: string | undefined }): Promise<AgentView> {
    const parsed = parseOrThrow(CreateAgentSchema, input);
    const db = this.deps.store.db;
    const workspaceId = parsed.workspace_id ?? (await this.deps.accounts.personalWorkspaceId(userId));
    const role = looksLikeId('workspace', workspaceId) ? await this.deps.accounts.roleIn(userId, workspaceId) : null;
    if (!role) throw new Problem('workspace_not_found', 'No such workspace, or you are not a member of it.');
    if (role === 'member') throw new Problem('forbidden', 'Only an owner or admin of the workspace can create agents there.');

    const created = await db.transaction().execute(async (trx) => {
      // The contract's rule: the caller's plan, counting agents in the workspaces the caller owns.
      // Locking the caller's row serialises concurrent creations on PostgreSQL (SQLite already is).
      const caller = await trx.selectFrom('users').select(['plan']).where('id', '=', userId)
        .$if(this.deps.store.dialect === 'postgres', (q) => q.forUpdate()).executeTakeFirstOrThrow();
      const limit = this.agentLimitOf(caller.plan);
      if ((await this.ownedAgentCount(userId, trx)) >= limit) {
        throw new Problem('agent_limit_reached', `The ${caller.plan} plan allows ${limit} agent${limit === 1 ? '' : 's'}; this account has reached it.`);
      }
      // By the shared clock: agents are listed oldest first, whichever instance made them.
      const agent = { id: newId('agent'), workspace_id: workspaceId, name: parsed.agent_name, created_by: userId, created_at: isoNowOf(this.deps.store.clock) };
      await trx.insertInto('agents').values(agent).execute();
      return toAgentView(agent);
    });
    // Every member of the workspace may message it now: all lists are read again (agents are seldom made).
    this.deps.agentListCache.clear();
    return created;
  }
}
