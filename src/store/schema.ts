import type { ColumnType, Generated, Insertable, Selectable } from 'kysely';

/**
 * The whole database, one interface (Kysely types every query from it).
 * Timestamps are ISO-8601 UTC strings in both dialects so rows compare and sort alike;
 * turn `ts` strings carry microseconds (see domain/turn-clock.ts).
 */
export interface DB {
  users: UsersTable;
  workspaces: WorkspacesTable;
  memberships: MembershipsTable;
  agents: AgentsTable;
  api_keys: ApiKeysTable;
  audit_log: AuditLogTable;
  sessions: SessionsTable;
  turns: TurnsTable;
  jobs: JobsTable;
  idempotency_keys: IdempotencyKeysTable;
  recent_messages: RecentMessagesTable;
  login_attempts: LoginAttemptsTable;
  missions: MissionsTable;
  actions: ActionsTable;
  questions: QuestionsTable;
  web_sessions: WebSessionsTable;
  instance_secrets: InstanceSecretsTable;
  events: EventsTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  telegram_link_codes: TelegramLinkCodesTable;
  telegram_chats: TelegramChatsTable;
  telegram_updates: TelegramUpdatesTable;
  telegram_messages: TelegramMessagesTable;
  telegram_lease: TelegramLeaseTable;
}

/** An account's webhook endpoint (contract §9.5; repos/webhooks.ts). */
export interface WebhookEndpointsTable {
  id: string; // whk_…
  owner_user_id: string;
  url: string;
  events: string; // JSON array of event types
  sealed_secret: string; // the whsec_ secret, sealed with the deployment's key
  enabled: number; // 0 or 1
  disabled_reason: string | null;
  created_at: string;
  last_attempt_at: string | null;
  last_outcome: string | null; // "200", "HTTP 500", "timed out", …
}

export type WebhookDeliveryState = 'pending' | 'delivered' | 'failed';

/** One event to one endpoint, until it is delivered or given up (repos/webhooks.ts). */
export interface WebhookDeliveriesTable {
  id: Generated<number>;
  endpoint_id: string;
  event_id: string; // evt_…: the webhook-id
  event_type: string;
  payload: string; // the event's JSON, as POSTed
  state: WebhookDeliveryState;
  attempts: number;
  next_attempt_at: string;
  lease_owner: string | null;
  lease_until: string | null;
  last_status: number | null;
  last_error: string | null;
  last_duration_ms: number | null;
  created_at: string;
  finished_at: string | null;
}

/** The event feed's outbox: one row per event and person who may see it (see repos/events.ts). */
export interface EventsTable {
  id: Generated<number>; // the event's position in the feed
  recipient_user_id: string;
  type: string;
  session_id: string;
  agent_id: string;
  data: string; // JSON
  created_at: string;
}

export type Plan = 'free' | 'pro';
export type Role = 'owner' | 'admin' | 'member';
export type StoredKeyStatus = 'active' | 'inactive' | 'revoked';

export interface UsersTable {
  id: string;
  email: string; // lower-cased
  password_hash: string;
  plan: Plan;
  created_at: string;
}

export interface WorkspacesTable {
  id: string;
  name: string;
  personal_of: string | null; // user id whose personal workspace this is
  created_at: string;
}

export interface MembershipsTable {
  workspace_id: string;
  user_id: string;
  role: Role;
  created_at: string;
}

export interface AgentsTable {
  id: string;
  workspace_id: string;
  name: string;
  created_by: string;
  created_at: string;
}

export interface ApiKeysTable {
  id: string; // the public key id
  user_id: string;
  label: string;
  secret_hash: ColumnType<Buffer, Buffer, never>;
  rate_limit: number;
  status: StoredKeyStatus;
  expires_at: string | null;
  created_at: string;
  revoked_at: string | null;
  last_used_at: string | null;
}

export interface AuditLogTable {
  id: Generated<number>;
  at: string;
  actor_user_id: string | null;
  action: string; // key.created, key.revoked, key.disabled, key.enabled, …
  subject_id: string;
  details: string | null; // JSON
}

export interface SessionsTable {
  id: string;
  user_id: string;
  agent_id: string;
  channel: string; // api, web, …
  last_ts: string | null; // ts of the newest turn, the clock's high-water mark
  created_at: string;
}

export type TurnRole = 'user' | 'agent';

export interface TurnsTable {
  id: Generated<number>;
  session_id: string;
  role: TurnRole;
  text: string;
  ts: string;
  error: string | null;
  job_id: number | null; // for a user turn: the job it enqueued; for an agent turn: the job that wrote it
}

export type JobStatus = 'queued' | 'running' | 'done' | 'failed';
export const JOB_KINDS = ['message', 'continuation'] as const;
export type JobKind = typeof JOB_KINDS[number];

export interface JobsTable {
  id: Generated<number>; // FIFO order per agent
  agent_id: string;
  session_id: string;
  user_id: string;
  kind: JobKind;
  payload: string; // JSON, brain input of this unit of work
  status: JobStatus;
  attempts: ColumnType<number, number | undefined, number>;
  lease_owner: string | null;
  lease_expires_at: string | null;
  user_turn_id: number | null;
  reply_turn_id: number | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

export interface IdempotencyKeysTable {
  user_id: string;
  key: string;
  body_hash: string;
  state: 'pending' | 'accepted';
  session_id: string | null;
  job_id: number | null;
  created_at: string;
}

/** One log-in or sign-up attempt, counted against `key` (an account's or a client's digest). */
export interface LoginAttemptsTable {
  key: string;
  attempt: string;
  at: ColumnType<number, number, never>; // ms by the store's clock; a bigint (string) from PostgreSQL
}

export interface RecentMessagesTable {
  user_id: string;
  target: string; // session id, or "agent:<id>" for a new session
  text_hash: string;
  session_id: string | null;
  job_id: number | null;
  created_at: string;
}

export type MissionStatus = 'active' | 'waiting' | 'done' | 'stopped' | 'closed';

export interface MissionsTable {
  id: string;
  session_id: string;
  agent_id: string;
  owner_user_id: string;
  status: MissionStatus;
  created_at: string;
  updated_at: string;
}

/** `closed`: its mission could no longer be settled (orphaned); `cancelled`: its session was cancelled (§9.4). */
export type ActionStatus = 'pending' | 'approved' | 'executing' | 'done' | 'failed' | 'rejected' | 'closed' | 'cancelled';

export interface ActionsTable {
  id: string;
  mission_id: string;
  session_id: string;
  agent_id: string;
  owner_user_id: string;
  kind: string;
  summary: string;
  details: string; // JSON
  status: ActionStatus;
  decision: string | null;
  reason: string | null;
  created_at: string;
  decided_at: string | null;
}

export type QuestionStatus = 'open' | 'answered' | 'closed' | 'cancelled';

export interface QuestionsTable {
  id: string;
  mission_id: string;
  session_id: string;
  agent_id: string;
  owner_user_id: string;
  asked_of: string;
  text: string;
  answer_type: string; // text, number, date, email, yesno, choice:a|b|c
  status: QuestionStatus;
  answer: string | null;
  created_at: string;
  answered_at: string | null;
}

export interface WebSessionsTable {
  id: string; // SHA-256 of the cookie token, hex
  user_id: string;
  csrf_token: string;
  created_at: string;
  last_seen_at: string;
  expires_at: string;
}

export type User = Selectable<UsersTable>;
export type Agent = Selectable<AgentsTable>;
export type ApiKey = Selectable<ApiKeysTable>;
export type Session = Selectable<SessionsTable>;
export type Turn = Selectable<TurnsTable>;
export type Job = Selectable<JobsTable>;
export type NewJob = Insertable<JobsTable>;
export type Mission = Selectable<MissionsTable>;
export type Action = Selectable<ActionsTable>;
export type Question = Selectable<QuestionsTable>;

/** Deployment-wide secrets (repos/instance-secrets.ts). */
export interface InstanceSecretsTable {
  name: string;
  value: string; // base64
  created_at: string;
}

/** A one-time code that links a Telegram chat to an account (its SHA-256, hex). */
export interface TelegramLinkCodesTable {
  code_hash: string;
  user_id: string;
  expires_at: string;
  used_at: string | null;
  created_at: string;
}

/** A linked Telegram chat: whose it is, the agent and session it talks to, and the event position delivered up to. */
export interface TelegramChatsTable {
  chat_id: string;
  user_id: string;
  agent_id: string | null;
  session_id: string | null;
  event_cursor: ColumnType<number, number, number>; // a bigint (string) from PostgreSQL
  linked_at: string;
}

/** An update received from Telegram, kept until handled: its update_id drops a redelivery. */
export interface TelegramUpdatesTable {
  update_id: number;
  payload: string; // JSON
  status: 'pending' | 'done';
  received_at: string;
}

/** A message of the bot's that settles an action or a question (its buttons, or a force-reply). */
export interface TelegramMessagesTable {
  chat_id: string;
  message_id: number;
  item_id: string;
  purpose: 'action' | 'question' | 'reject_reason';
  open: number;
  choices: string | null; // JSON: a question's answers offered as buttons
}

/** Which instance polls Telegram and delivers to it, until when (ms by the store's clock). */
export interface TelegramLeaseTable {
  name: string;
  owner: string;
  expires_at: number;
}
