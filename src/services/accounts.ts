import { z } from 'zod';
import type { Kysely, Transaction } from 'kysely';
import { newId, randomBase62 } from '../domain/ids.ts';
import { hashPassword, verifyPassword } from '../domain/password.ts';
import { EmailSchema } from '../domain/email.ts';
import { parseOrThrow, Problem } from '../domain/problems.ts';
import type { DB, Plan, Role, User } from '../store/schema.ts';
import { isUniqueViolation, type Store } from '../store/store.ts';
import { localIsoNow } from './clock.ts';
import { isoNowOf } from '../store/shared-clock.ts';
import type { CachedReads } from './cached-reads.ts';

export interface WorkspaceView {
  workspace_id: string;
  name: string;
  role: Role;
  personal: boolean;
}

export const PasswordSchema = z.string().min(8, 'must be at least 8 characters').max(256);
export const PlanSchema = z.enum(['free', 'pro']);
export const RoleSchema = z.enum(['member', 'admin']);

export interface AccountsDeps {
  store: Store;
  /** Memberships decide the agents a user may message (RequestCache.agentLists). */
  agentListCache: Pick<CachedReads<unknown>, 'forget'>;
  scryptCostLog2: number;
}

export class AccountsService {
  // A hash at the configured cost, verified against when the email is unknown (same work).
  private dummyHash: Promise<string> | undefined;

  private readonly deps: AccountsDeps;

  constructor(deps: AccountsDeps) {
    this.deps = deps;
  }

  private get db(): Kysely<DB> {
    return this.deps.store.db;
  }

  /** A user with a personal workspace that they own. */
  async createUser(input: { email: string; password: string; plan?: Plan }): Promise<User> {
    const email = parseOrThrow(EmailSchema, input.email, 'email');
    const password = parseOrThrow(PasswordSchema, input.password, 'password');
    const plan = parseOrThrow(PlanSchema, input.plan ?? 'free', 'plan');
    const passwordHash = await hashPassword(password, this.deps.scryptCostLog2);
    const now = isoNowOf(this.deps.store.clock); // workspaces are listed oldest first
    const user: User = { id: newId('user'), email, password_hash: passwordHash, plan, created_at: now };
    try {
      await this.db.transaction().execute(async (trx) => {
        await trx.insertInto('users').values(user).execute();
        const workspaceId = newId('workspace');
        await trx.insertInto('workspaces').values({ id: workspaceId, name: 'Personal', personal_of: user.id, created_at: now }).execute();
        await trx.insertInto('memberships').values({ workspace_id: workspaceId, user_id: user.id, role: 'owner', created_at: now }).execute();
      });
    } catch (error) {
      if (isUniqueViolation(error)) throw Problem.validation([{ path: 'email', message: 'is already registered' }]);
      throw error;
    }
    this.deps.agentListCache.forget(user.id);
    return user;
  }

  async findByEmail(email: string): Promise<User | undefined> {
    return this.db.selectFrom('users').selectAll().where('email', '=', email.trim().toLowerCase()).executeTakeFirst();
  }

  async findById(id: string): Promise<User | undefined> {
    return this.db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
  }

  async requireByEmail(email: string): Promise<User> {
    const user = await this.findByEmail(email);
    if (!user) throw new Problem('not_found', `No user with email ${email.trim().toLowerCase()}.`);
    return user;
  }

  /**
   * Moves an account to another plan (an operator's act). The plan is read when an agent is
   * created: agents the account already has stay, whatever the new plan allows.
   */
  async setPlan(email: string, plan: Plan): Promise<void> {
    const user = await this.requireByEmail(email);
    await this.db.updateTable('users').set({ plan: parseOrThrow(PlanSchema, plan, 'plan') }).where('id', '=', user.id).execute();
  }

  /**
   * Gives an account a new password (an operator's act: the web app has no reset by email). Its
   * web sessions end with the old password, so that whoever held one must log in with the new one.
   * `alsoInTransaction` runs in the same transaction (the failed log-ins forgotten): all or nothing.
   */
  async setPassword(email: string, password: string, alsoInTransaction?: (trx: Transaction<DB>) => Promise<void>): Promise<User> {
    const user = await this.requireByEmail(email);
    const passwordHash = await hashPassword(parseOrThrow(PasswordSchema, password, 'password'), this.deps.scryptCostLog2);
    await this.db.transaction().execute(async (trx) => {
      await trx.updateTable('users').set({ password_hash: passwordHash }).where('id', '=', user.id).execute();
      await trx.deleteFrom('web_sessions').where('user_id', '=', user.id).execute();
      await alsoInTransaction?.(trx);
    });
    return { ...user, password_hash: passwordHash };
  }

  /** Checks a password; the same work is done when the user does not exist. */
  async checkCredentials(email: string, password: string): Promise<User | null> {
    const user = await this.findByEmail(email);
    this.dummyHash ??= hashPassword(randomBase62(24), this.deps.scryptCostLog2);
    const ok = await verifyPassword(password, user?.password_hash ?? (await this.dummyHash));
    return user && ok ? user : null;
  }

  /** The workspaces a user belongs to, personal first, with the user's role in each. */
  async workspacesOf(userId: string): Promise<WorkspaceView[]> {
    const rows = await this.db.selectFrom('memberships')
      .innerJoin('workspaces', 'workspaces.id', 'memberships.workspace_id')
      .leftJoin('users', 'users.id', 'workspaces.personal_of')
      .select(['workspaces.id', 'workspaces.name', 'workspaces.personal_of', 'memberships.role', 'users.email as personal_email'])
      .where('memberships.user_id', '=', userId)
      .orderBy('workspaces.created_at').orderBy('workspaces.id').execute();
    return rows
      .map((r) => ({
        workspace_id: r.id,
        // Everyone's personal workspace is called "Personal": say whose it is when it is not yours.
        name: r.personal_of === userId ? 'Personal' : r.personal_of && r.personal_email ? `${r.personal_email}'s personal workspace` : r.name,
        role: r.role,
        personal: r.personal_of === userId,
      }))
      .sort((a, b) => Number(b.personal) - Number(a.personal));
  }

  async personalWorkspaceId(userId: string): Promise<string> {
    const row = await this.db.selectFrom('workspaces').select('id').where('personal_of', '=', userId).executeTakeFirstOrThrow();
    return row.id;
  }

  async addMember(input: { workspaceId: string; email: string; role: Role }): Promise<void> {
    const role = parseOrThrow(RoleSchema, input.role, 'role');
    const user = await this.requireByEmail(input.email);
    const workspace = await this.db.selectFrom('workspaces').select('id').where('id', '=', input.workspaceId).executeTakeFirst();
    if (!workspace) throw new Problem('workspace_not_found', `No workspace ${input.workspaceId}.`);
    // One statement, not a read then a write: two runs at once (two operators) add the person once.
    const result = await this.db.insertInto('memberships').values({ workspace_id: workspace.id, user_id: user.id, role, created_at: localIsoNow() })
      .onConflict((oc) => oc.columns(['workspace_id', 'user_id']).doUpdateSet({ role }).where('memberships.role', '!=', 'owner'))
      .executeTakeFirst();
    this.deps.agentListCache.forget(user.id);
    if (Number(result.numInsertedOrUpdatedRows ?? 0n) === 0) throw new Problem('forbidden', 'The owner of a workspace keeps that role.');
  }

  /**
   * Takes a person out of a workspace (an operator's act): from then on they can neither see nor
   * message its agents, through the API or the web app, and their missions there are closed by the
   * housekeeping's next sweep, as when an agent is gone. The owner stays.
   */
  async removeMember(input: { workspaceId: string; email: string }): Promise<void> {
    const user = await this.requireByEmail(input.email);
    const workspace = await this.db.selectFrom('workspaces').select('id').where('id', '=', input.workspaceId).executeTakeFirst();
    if (!workspace) throw new Problem('workspace_not_found', `No workspace ${input.workspaceId}.`);
    const result = await this.db.deleteFrom('memberships')
      .where('workspace_id', '=', workspace.id).where('user_id', '=', user.id).where('role', '!=', 'owner')
      .executeTakeFirst();
    this.deps.agentListCache.forget(user.id);
    if (Number(result.numDeletedRows) > 0) return;
    if (await this.roleIn(user.id, workspace.id)) throw new Problem('forbidden', 'The owner of a workspace stays in it.');
    throw new Problem('not_found', `${user.email} is not a member of workspace ${workspace.id}.`);
  }

  async roleIn(userId: string, workspaceId: string): Promise<Role | null> {
    const row = await this.db.selectFrom('memberships').select('role')
      .where('workspace_id', '=', workspaceId).where('user_id', '=', userId).executeTakeFirst();
    return row?.role ?? null;
  }
}
