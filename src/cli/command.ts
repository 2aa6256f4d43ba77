import { Problem } from '../domain/problems.ts';
import type { Config } from '../config.ts';
import type { Services } from '../services/services.ts';

export type Flags = Record<string, string | undefined>;
export type Out = (line: string) => void;

/**
 * A command: the flags it takes (any other is a usage mistake), its usage line, and what it does,
 * through the services, or (`onFiles`) on the database's files with no connection of the service's open.
 */
export type Command =
  | { usage: string; flags: readonly string[]; onFiles?: false; run(services: Services, flags: Flags, out: Out): Promise<void> }
  | { usage: string; flags: readonly string[]; onFiles: true; run(config: Config, flags: Flags, out: Out): Promise<void> };

/** A group of commands by name: one word (backup) or two (keys create). */
export type Commands = Record<string, Command>;

/** A mistake in how the command was called: said with the usage, exit 2. */
export class UsageError extends Error {}

export function required(flags: Flags, name: string): string {
  const value = flags[name];
  if (value === undefined || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

export function optionalInt(flags: Flags, name: string): number | undefined {
  const value = flags[name];
  if (value === undefined) return undefined;
  if (!/^-?\d+$/.test(value)) throw new UsageError(`--${name} must be a whole number`);
  // Past 2^53 a number is not exact, and the service would call it no whole number beside saying
  // its range: such a number is past every range, and is refused as out of it alone.
  const number = Number(value);
  return Number.isSafeInteger(number) ? number : Math.sign(number) * Number.MAX_SAFE_INTEGER;
}

/** Text of the user's (a label, a name) on one line of tab-separated output: it never breaks the line or adds a column. */
export const oneLine = (text: string): string => text.replace(/[\p{Cc}]/gu, ' ');

/** The flag a service's field comes from, for its error messages. */
const FLAG_OF_FIELD: Record<string, string> = { agent_name: 'name', workspace_id: 'workspace' };
const flagOf = (field: string): string => `--${FLAG_OF_FIELD[field] ?? field.replaceAll('_', '-')}`;

/** A service's refusal as the CLI's user reads it: fields named by their flags. */
export function describeProblem(problem: Problem): string {
  const errors = problem.extra.errors as { path: string; message: string }[] | undefined;
  if (problem.code !== 'validation_failed' || !errors?.length) return problem.message;
  return errors.map((e) => (e.path ? `${flagOf(e.path)} ${e.message}` : e.message)).join('; ');
}
