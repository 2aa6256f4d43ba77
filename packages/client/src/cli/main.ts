import { parseArgs } from 'node:util';
import { AgentChannel } from '../index.ts';
import { chat } from './chat.ts';
import { actions, cancel, events, questions, send, transcript, type Invocation } from './commands.ts';
import { EXIT, report, UsageError, type Io } from './output.ts';
import { isUserCommand, USER_COMMANDS, USER_USAGE } from './usage.ts';

const RUN: Record<(typeof USER_COMMANDS)[number], (invocation: Invocation) => Promise<number>> = {
  send, chat, transcript, actions, questions, cancel, events,
};


/**
 * Runs one user command (`send "hi" --json`…) against the server at AGENT_CHANNEL_URL with the
 * key AGENT_CHANNEL_KEY (or --url, --key); returns the exit code. Output on stdout, errors on stderr.
 */
export async function runUserCli(argv: string[], env: Record<string, string | undefined> = process.env): Promise<number> {
  const io: Io = { out: (line) => process.stdout.write(`${line}\n`), err: (line) => process.stderr.write(`${line}\n`), json: argv.includes('--json') };
  const stop = new AbortController();
  const interrupted = () => stop.abort(new Error('interrupted'));
  process.once('SIGINT', interrupted);
  try {
    const { values, positionals } = parseArgs({
      args: argv, allowPositionals: true, strict: true,
      options: {
        json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' }, url: { type: 'string' }, key: { type: 'string' },
        session: { type: 'string' }, agent: { type: 'string' }, reason: { type: 'string' }, after: { type: 'string' },
        timeout: { type: 'string' }, 'no-wait': { type: 'boolean' }, follow: { type: 'boolean' },
      },
    });
    const [name, ...words] = positionals as [keyof typeof RUN, ...string[]];
    if (values.help || !isUserCommand(name)) {
      (values.help ? io.out : io.err)(`agent-channel <command> [flags]\n\n${USER_USAGE}`);
      return values.help ? EXIT.ok : EXIT.usage;
    }
    const baseUrl = values.url ?? env.AGENT_CHANNEL_URL;
    const apiKey = values.key ?? env.AGENT_CHANNEL_KEY;
    if (!baseUrl) throw new UsageError('no server: set AGENT_CHANNEL_URL (e.g. http://127.0.0.1:8080) or give --url');
    if (!apiKey) throw new UsageError('no key: set AGENT_CHANNEL_KEY (ak_…) or give --key');
    const client = new AgentChannel({ baseUrl, apiKey });
    return await RUN[name]({ words, flags: values, io, client, signal: stop.signal });
  } catch (error) {
    if (stop.signal.aborted) return 130;
    const parseError = (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') ? new UsageError((error as Error).message) : error;
    return report(io, parseError);
  } finally {
    process.off('SIGINT', interrupted);
  }
}
