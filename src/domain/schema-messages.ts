import { z } from 'zod';

/**
 * What a schema with no message of its own says of a field, in the client's terms: what to send
 * ("is required", "must be a string, not a number", "must not be empty"), not zod's account of
 * its types ("Invalid input: expected string, received undefined"). Undefined leaves zod's own.
 */
export function clientIssueMessage(issue: z.core.$ZodRawIssue): string | undefined {
  const value = issue.input;
  switch (issue.code) {
    case 'invalid_type':
      return value === undefined ? 'is required' : `must be ${withArticle(issue.expected)}, not ${kindOf(value)}`;
    case 'invalid_value': {
      const choices = issue.values.map((choice) => String(choice)).join(', ');
      return value === undefined ? `is required: one of ${choices}` : `must be one of ${choices}`;
    }
    case 'too_small':
    case 'too_big': {
      const bound = issue.code === 'too_small' ? issue.minimum : issue.maximum;
      const most = issue.code === 'too_small' ? 'at least' : 'at most';
      if (issue.origin === 'string') return issue.code === 'too_small' && bound === 1 ? 'must not be empty' : `must be ${most} ${String(bound)} characters`;
      if (issue.origin === 'array') return `must hold ${most} ${String(bound)} entries`;
      if (issue.origin === 'number' || issue.origin === 'int') return `must be ${most} ${String(bound)}`;
      return undefined;
    }
    default:
      return undefined;
  }
}

const withArticle = (noun: string) => (/^[aeiou]/.test(noun) ? `an ${noun}` : `a ${noun}`);

/** A JSON value's kind, as a message names it ("a number", "an array", "null"). */
function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return withArticle(typeof value);
}

// zod's process-wide error map, set as this module loads (problems.ts, which every parser of
// input imports, imports it): the API's validator, the services and the CLI then all say the
// same. A message a schema gives itself ("must be at most 100 characters") still wins.
z.config({ customError: clientIssueMessage });
