import { execFile } from 'node:child_process';
import { join } from 'node:path';

/** The package's real binary, as `npm run cli` runs it. */
export const CLI_PATH = join(import.meta.dirname, '..', '..', 'bin', 'agent-channel.js');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `agent-channel <args>` in a child process with `env` added to this one's environment. */
export function runCli(env: Record<string, string>, ...args: string[]): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI_PATH, ...args], { env: { ...process.env, ...env }, timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}
