/**
 * The Brain port: what an agent does with one unit of work. The built-in agent implements it
 * now; a model-backed brain (tool calls, actions needing permission, questions) fits the same
 * shape: it returns a reply and, perhaps, an action to approve or a question to ask.
 */

export interface HistoryTurn {
  role: 'user' | 'agent';
  text: string;
}

/** One unit of work: a new message, or the continuation of a mission after a person acted. */
export type BrainInput =
  | { kind: 'message'; text: string }
  | { kind: 'action_approved'; action: ActionRef }
  | { kind: 'action_rejected'; action: ActionRef; reason: string | null }
  | { kind: 'question_answered'; question: QuestionRef; answer: string };

export interface ActionRef {
  operationId: string;
  kind: string;
  summary: string;
  details: Record<string, unknown>;
}

export interface QuestionRef {
  requestId: string;
  text: string;
  answerType: string;
}

export interface DraftAction {
  operationId: string;
  kind: string;
  summary: string;
  details: Record<string, unknown>;
}

export interface DraftQuestion {
  requestId: string;
  text: string;
  answerType: string;
  /** The user asked; the sender when absent. */
  askedOfUserId?: string;
}

export interface BrainResult {
  reply: string;
  /**
   * An action to run: when its tool needs permission the mission waits for a decision;
   * otherwise it is approved as it is recorded and runs at once, as an approved one would.
   */
  action?: DraftAction;
  /** A question to a person: the mission waits for an accepted answer. */
  question?: DraftQuestion;
  /** Approved action work that ran (its side effect is done). */
  executed?: boolean;
}

export interface BrainContext {
  /** The job running this unit of work (for logs). */
  jobId: number;
  agentId: string;
  sessionId: string;
  senderUserId: string;
  signal: AbortSignal;
  /** The session's latest turns, oldest first: a message's own turn included, messages queued behind this unit of work (a message or a continuation) not. */
  history(): Promise<HistoryTurn[]>;
  newOperationId(): string;
  newRequestId(): string;
  /** A member of the agent's workspace by email, or null when there is none. */
  findWorkspaceMember(email: string): Promise<{ userId: string } | null>;
  /** Runs an approved action's tool; `operationId` is its idempotency key. */
  runTool(action: ActionRef): Promise<void>;
  /**
   * What the tool registry says of a kind of action: whether it needs a person's permission
   * (otherwise a drafted action runs at once), or null when no tool can run it (then drafting
   * it is refused).
   */
  toolFor(kind: string): { needsPermission: boolean } | null;
}

export interface AnswerVerdict {
  accepted: boolean;
  /** Names what is missing when not accepted. */
  reason?: string;
}

export interface Brain {
  respond(input: BrainInput, context: BrainContext): Promise<BrainResult>;
  /** `signal`: aborted when the server stops (a judge that calls out must then give up, refusing the answer). */
  judgeAnswer(question: QuestionRef, answer: string, signal?: AbortSignal): Promise<AnswerVerdict>;
}

/** The agent could not process the unit of work (502 agent_failed / an error turn). */
export class BrainFailure extends Error {
  constructor(message = 'The agent could not process the message.') {
    super(message);
    this.name = 'BrainFailure';
  }
}
