import { parseArgs } from 'node:util';
import { loadConfig } from '../config.ts';
import { parseApiKey } from '../domain/api-key.ts';
import { Problem } from '../domain/problems.ts';
import { RELEASE } from '../release.ts';
import { createRuntime, type Runtime } from '../runtime.ts';
import { isStoreUnavailable } from '../store/unavailable.ts';
import { describeProblem, UsageError, type Commands, type Flags, type Out } from './command.ts';
import { FILE_COMMANDS } from './commands/files.ts';
import { KEY_COMMANDS } from './commands/keys.ts';
import { TELEGRAM_COMMANDS } from './commands/telegram.ts';
import { USER_COMMANDS } from './commands/users.ts';
import { WEBHOOK_COMMANDS } from './commands/webhooks.ts';
import { WORKSPACE_COMMANDS } from './commands/workspaces.ts';
import { USER_USAGE } from '../../packages/client/src/cli/usage.ts';

/**
 * The operator's commands, by group: each group's file holds its commands with their usage lines.
 * A new group is one file and one line here.
 */
const COMMANDS: Commands = {
  ...USER_COMMANDS,
  ...KEY_COMMANDS,
  ...WORKSPACE_COMMANDS,
  ...FILE_COMMANDS,
  ...WEBHOOK_COMMANDS,
  ...TELEGRAM_COMMANDS,
};

const USAGE = `agent-channel <command> [flags]        (--help: this; --version: the release)

Operator commands (on the server's machine; they use the database itself):
  serve                                             run the server (the default)
${Object.values(COMMANDS).map((command) => `  ${command.usage}`).join('\n')}

DATABASE_URL selects the database (default sqlite:./data/agent-channel.db).
serve takes no flags: its settings are environment variables (PORT, HOST, LOG_LEVEL, …),
each described in docs/configuration.md, e.g. PORT=9000 agent-channel serve.

User commands (anywhere; they talk to a server over HTTP with an API key, docs/cli-client.md;
bin/agent-channel.js hands them to the client package before this file is loaded):
${USER_USAGE}`;

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
