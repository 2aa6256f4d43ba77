import { parseArgs } from 'node:util';
import { loadConfig, type Config } from '../config.ts';
import { parseApiKey } from '../domain/api-key.ts';
import { Problem } from '../domain/problems.ts';
import { RELEASE } from '../release.ts';
import { createRuntime, type Runtime } from '../runtime.ts';
import { backupSqlite, restoreSqlite } from '../store/sqlite-backup.ts';
import { isStoreUnavailable } from '../store/unavailable.ts';
import type { Services } from '../services/services.ts';

const USAGE = `agent-channel <command> [flags]        (--help: this; --version: the release)

  serve                                             run the server (the default)
  users create --email E --password P [--plan free|pro]
  users set-plan --email E --plan free|pro
  users set-password --email E --password P         a forgotten password replaced; the account's web sessions end
  agents create --email E --name N [--workspace W]
  keys create --email E --label L [--rate-limit N] [--expires-in-days D]
  keys list --email E
  keys revoke --email E --key-id K
  keys disable --key-id K
  keys enable --key-id K
  workspaces list --email E
  workspaces add-member --workspace W --email E --role member|admin
  workspaces remove-member --workspace W --email E
  backup --to FILE                                  a consistent copy of the SQLite database, also while serving
  restore --from FILE                               the backup in the database's place (server stopped); prints where the old one was kept

DATABASE_URL selects the database (default sqlite:./data/agent-channel.db).
serve takes no flags: its settings are environment variables (PORT, HOST, LOG_LEVEL, …),
each described in docs/configuration.md, e.g. PORT=9000 agent-channel serve.`;

type Flags = Record<string, string | undefined>;
type Out = (line: string) => void;

/**
 * A command: the flags it takes (any other is a usage mistake), and what it does, through the
 * services, or (`onFiles`) on the database's files with no connection of the service's open.
 */
type Command =
  | { flags: readonly string[]; onFiles?: false; run(services: Services, flags: Flags, out: Out): Promise<void> }
  | { flags: readonly string[]; onFiles: true; run(config: Config, flags: Flags, out: Out): Promise<void> };

function required(flags: Flags, name: string): string {
  const value = flags[name];
  if (value === undefined || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

function optionalInt(flags: Flags, name: string): number | undefined {
  const value = flags[name];
  if (value === undefined) return undefined;
  if (!/^-?\d+$/.test(value)) throw new UsageError(`--${name} must be a whole number`);
  // Past 2^53 a number is not exact, and the service would call it no whole number beside saying
  // its range: such a number is past every range, and is refused as out of it alone.
  const number = Number(value);
  return Number.isSafeInteger(number) ? number : Math.sign(number) * Number.MAX_SAFE_INTEGER;
}

class UsageError extends Error {}

/**
 * parseArgs' own words for a flag no command takes advise `-- "--port"`, a positional argument,
 * which no command takes either: name the flag instead (for `serve`, as a flag it knows is named).
 */
function describeParseError(error: NodeJS.ErrnoException, argv: readonly string[]): string {
  const unknown = error.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? /^Unknown option '([^']+)'/.exec(error.message) : null;
  if (!unknown) return error.message;
  const flag = unknown[1]!.split('=')[0]!;
  if (argv[0] === 'serve') return `serve takes no flags (got ${flag})`; // (the usage that follows says where its settings are)
  return `unknown flag ${flag}`;
}

/**
 * A key's id as `keys list` prints it. `ak_<keyId>` and the whole key `ak_<keyId>_<secret>` name
 * the same key (a key id is base62, never `_`), so either is taken too.
 */
function keyIdFlag(flags: Flags): string {
  const value = required(flags, 'key-id');
  return parseApiKey(value)?.keyId ?? /^ak_([A-Za-z0-9]+)$/.exec(value)?.[1] ?? value;
}

/** Runs a command on one key; a key that is not there is said with where its id can be found. */
async function onKey(work: () => Promise<unknown>): Promise<void> {
  try {
    await work();
  } catch (error) {
    if (error instanceof Problem && error.code === 'not_found') {
      throw new Problem('not_found', 'No such key. --key-id takes the id that `keys list --email E` prints in its first column.');
    }
    throw error;
  }
}

/** The flag a service's field comes from, for its error messages. */
const FLAG_OF_FIELD: Record<string, string> = { agent_name: 'name', workspace_id: 'workspace' };
const flagOf = (field: string): string => `--${FLAG_OF_FIELD[field] ?? field.replaceAll('_', '-')}`;

/** A service's refusal as the CLI's user reads it: fields named by their flags. */
function describeProblem(problem: Problem): string {
  const errors = problem.extra.errors as { path: string; message: string }[] | undefined;
  if (problem.code !== 'validation_failed' || !errors?.length) return problem.message;
  return errors.map((e) => (e.path ? `${flagOf(e.path)} ${e.message}` : e.message)).join('; ');
}

const COMMANDS: Record<string, Command> = {
  'users create': {
    flags: ['email', 'password', 'plan'],
    async run(s, f, out) {
      const plan = f.plan ?? 'free';
      if (plan !== 'free' && plan !== 'pro') throw new UsageError('--plan must be free or pro');
      const user = await s.accounts.createUser({ email: required(f, 'email'), password: required(f, 'password'), plan });
      out(user.id);
    },
  },
  'users set-plan': {
    flags: ['email', 'plan'],
    async run(s, f) {
      const plan = required(f, 'plan');
      if (plan !== 'free' && plan !== 'pro') throw new UsageError('--plan must be free or pro');
      await s.accounts.setPlan(required(f, 'email'), plan);
    },
  },
  'users set-password': {
    flags: ['email', 'password'],
    async run(s, f) {
      // Locked out by failed guesses, it may log in at once: they are forgotten with the password set.
      const forgive = await s.loginThrottle.accountForgiver(required(f, 'email'));
      await s.accounts.setPassword(required(f, 'email'), required(f, 'password'), forgive);
    },
  },
  'agents create': {
    flags: ['email', 'name', 'workspace'],
    async run(s, f, out) {
      const user = await s.accounts.requireByEmail(required(f, 'email'));
      const agent = await s.agents.create(user.id, { agent_name: required(f, 'name'), workspace_id: f.workspace });
      out(agent.agent_id);
    },
  },
  'keys create': {
    flags: ['email', 'label', 'rate-limit', 'expires-in-days'],
    async run(s, f, out) {
      const user = await s.accounts.requireByEmail(required(f, 'email'));
      const { token } = await s.keys.create(user.id, {
        label: required(f, 'label'), rate_limit: optionalInt(f, 'rate-limit'), expires_in_days: optionalInt(f, 'expires-in-days'),
      });
      out(token);
    },
  },
  'keys list': {
    flags: ['email'],
    async run(s, f, out) {
      const user = await s.accounts.requireByEmail(required(f, 'email'));
      for (const key of await s.keys.list(user.id)) {
        // One key per line, tab-separated: a label can never break the line or add a column.
        const label = key.label.replace(/[\p{Cc}]/gu, ' ');
        out([key.key_id, label, key.status, key.last_used_at ?? 'never', key.expires_at ?? 'never'].join('\t'));
      }
    },
  },
  'keys revoke': {
    flags: ['email', 'key-id'],
    async run(s, f) {
      const user = await s.accounts.requireByEmail(required(f, 'email'));
      await onKey(() => s.keys.revoke(user.id, keyIdFlag(f)));
    },
  },
  'keys disable': {
    flags: ['key-id'],
    async run(s, f) {
      await onKey(() => s.keys.setEnabled(keyIdFlag(f), false));
    },
  },
  'keys enable': {
    flags: ['key-id'],
    async run(s, f) {
      await onKey(() => s.keys.setEnabled(keyIdFlag(f), true));
    },
  },
  'workspaces list': {
    flags: ['email'],
    async run(s, f, out) {
      const user = await s.accounts.requireByEmail(required(f, 'email'));
      // One workspace per line, tab-separated, the personal one first: the ids --workspace takes.
      for (const workspace of await s.accounts.workspacesOf(user.id)) {
        out([workspace.workspace_id, workspace.role, workspace.name.replace(/[\p{Cc}]/gu, ' ')].join('\t'));
      }
    },
  },
  'workspaces add-member': {
    flags: ['workspace', 'email', 'role'],
    async run(s, f) {
      const role = required(f, 'role');
      if (role !== 'member' && role !== 'admin') throw new UsageError('--role must be member or admin');
      await s.accounts.addMember({ workspaceId: required(f, 'workspace'), email: required(f, 'email'), role });
    },
  },
  'workspaces remove-member': {
    flags: ['workspace', 'email'],
    async run(s, f) {
      await s.accounts.removeMember({ workspaceId: required(f, 'workspace'), email: required(f, 'email') });
    },
  },
  backup: {
    flags: ['to'],
    onFiles: true,
    async run(config, f) {
      backupSqlite(config.databaseUrl, required(f, 'to'));
    },
  },
  restore: {
    flags: ['from'],
    onFiles: true,
    async run(config, f, out) {
      const keptAs = restoreSqlite(config.databaseUrl, required(f, 'from'));
      if (keptAs) out(keptAs);
    },
  },
};

const FLAG_NAMES = [...new Set(Object.values(COMMANDS).flatMap((command) => command.flags))];

/** Runs one CLI command; returns the exit code. Output on stdout, errors on stderr. */
export async function run(argv: string[]): Promise<number> {
  // Every mistake is one line in the same form as a failed start's (bin/agent-channel.js);
  // a usage mistake (exit 2) is followed by the usage.
  const fail = (message: string, code: 1 | 2): number => {
    process.stderr.write(`agent-channel: ${message}\n${code === 2 ? `\n${USAGE}\n` : ''}`);
    return code;
  };
  let flags: Flags;
  let words: string[];
  try {
    // A value that starts with "-" must be written --flag=value; parseArgs says so itself.
    const parsed = parseArgs({
      args: argv,
      options: {
        ...Object.fromEntries(FLAG_NAMES.map((n) => [n, { type: 'string' as const }])),
        help: { type: 'boolean', short: 'h' }, version: { type: 'boolean', short: 'v' },
      },
      strict: true,
      allowPositionals: true,
      tokens: true,
    });
    const { help, version, ...values } = parsed.values;
    const [first, ...after] = parsed.positionals;
    if ((first === 'help' || first === 'version') && (after.length > 0 || Object.keys(values).length > 0)) {
      throw new UsageError(`${first} takes nothing after it`);
    }
    if (help || first === 'help') {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    if (version || first === 'version') {
      process.stdout.write(`agent-channel ${RELEASE}\n`);
      return 0;
    }
    // parseArgs keeps a repeated flag's last value: a slip (which email was meant?), not a choice.
    const seen = new Set<string>();
    for (const token of parsed.tokens) {
      if (token.kind !== 'option') continue;
      if (seen.has(token.name)) throw new UsageError(`--${token.name} is given twice`);
      seen.add(token.name);
    }
    flags = values as Flags;
    words = parsed.positionals;
  } catch (error) {
    return fail(describeParseError(error as NodeJS.ErrnoException, argv), 2);
  }
  if (words.length === 0 || (words[0] === 'serve' && words.length === 1)) {
    const extra = Object.keys(flags)[0];
    if (extra) return fail(`serve takes no flags (got --${extra})`, 2);
    const { serve } = await import('../main.ts');
    await serve();
    return 0;
  }
  // A command is one word (backup) or two (keys create), and nothing follows it but flags.
  const name = COMMANDS[words[0]!] ? words[0]! : words.slice(0, 2).join(' ');
  const command = COMMANDS[name];
  if (!command || words.length > name.split(' ').length) {
    // A whole key typed where a flag was meant is not echoed: its secret part is left out.
    const shown = words.map((word) => { const key = parseApiKey(word); return key ? `ak_${key.keyId}_…` : word; });
    return fail(`unknown command "${shown.join(' ')}"`, 2);
  }
  // A flag of another command is a mistake too (keys list --label L lists every key, unlabelled).
  const foreign = Object.keys(flags).find((flag) => !command.flags.includes(flag));
  if (foreign) return fail(`${name} takes no --${foreign} (it takes ${command.flags.map((f) => `--${f}`).join(', ')})`, 2);
  const out: Out = (line) => process.stdout.write(`${line}\n`);
  const failure = (error: unknown): number => {
    if (error instanceof UsageError) return fail(error.message, 2);
    // "database is locked" alone (SQLite held by another process past its 5 s busy timeout) said
    // neither which database nor that it passes: the command changed nothing, and may run again.
    if (isStoreUnavailable(error)) {
      return fail(`the database could not be used just now (${(error as Error).message}); nothing was changed: run the command again in a moment`, 1);
    }
    return fail(error instanceof Problem ? describeProblem(error) : (error as Error).message, 1);
  };
  if (command.onFiles) return command.run(loadConfig(), flags, out).then(() => 0, failure);
  // The CLI shares the server's services but runs no turns and needs no shared rate limiter.
  let runtime: Runtime;
  try {
    runtime = await createRuntime({ config: { ...loadConfig(), rateLimitStore: 'memory' } });
  } catch (error) {
    // Opening runs the migrations (a write): a database held locked stops it here already. Any
    // other failure to start is said by bin/agent-channel.js, as serve's is.
    if (isStoreUnavailable(error)) return failure(error);
    throw error;
  }
  try {
    await command.run(runtime.services, flags, out);
    return 0;
  } catch (error) {
    return failure(error);
  } finally {
    await runtime.close();
  }
}
