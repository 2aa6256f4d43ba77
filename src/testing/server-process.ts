import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { API, childEnv } from './harness.ts';

export const BIN = fileURLToPath(new URL('../../bin/agent-channel.js', import.meta.url));

export interface ServerProcess {
  child: ChildProcess;
  /** http://127.0.0.1:<port> */
  url: string;
  /** Everything the process printed (JSON log lines), for assertions about logs. */
  output(): string;
  /** Resolves with the exit code (or signal) once the process is gone. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts the real server (`agent-channel serve`) as a child process on a free port. */
export async function startServerProcess(env: Record<string, string>, timeoutMs = 20_000): Promise<ServerProcess> {
  const child = spawn(process.execPath, [BIN, 'serve'], {
    env: { ...childEnv(), PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', SCRYPT_COST_LOG2: '10', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })));
  const url = await new Promise<string>((resolve, reject) => {
    // A server that did not start in time is stopped: left running, it would hold the test process open.
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`server did not start:\n${output}`)); }, timeoutMs);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`server exited before listening:\n${output}`));
    });
  });
  return {
    child,
    url,
    output: () => output,
    exited,
    async kill(signal: NodeJS.Signals = 'SIGKILL') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** POST /messages to a server process with this API key: the status and the parsed body. */
export async function postMessage(server: ServerProcess, key: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${server.url}${API}/messages`, {
    method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() as any };
}

/** A session's transcript (its first 200 turns) from a server process; it must answer 200. */
export async function transcriptFrom(server: ServerProcess, key: string, sessionId: string) {
  const res = await fetch(`${server.url}${API}/sessions/${sessionId}/messages?limit=200`, { headers: { authorization: `Bearer ${key}` } });
  assert.equal(res.status, 200);
  return await res.json() as any;
}
