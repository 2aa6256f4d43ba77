import { z } from 'zod';

/** Shared OpenAPI pieces of the API channel. */
export const ProblemSchema = z.object({
  type: z.string(),
  title: z.string(),
  status: z.number().int(),
  code: z.string().meta({ description: 'Stable machine-readable code (see the contract\'s table).' }),
  detail: z.string(),
  request_id: z.string(),
  errors: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  session_id: z.string().optional(),
}).meta({ id: 'Problem', description: 'RFC 9457 problem details (application/problem+json).' });

/** The problem responses every authenticated route can give. */
export const COMMON_PROBLEMS = {
  401: ProblemSchema.describe('Missing, malformed, unknown, revoked, expired or inactive key.'),
  429: ProblemSchema.describe('The key\'s per-minute limit is used up; see Retry-After.'),
} as const;

export const BODY_PROBLEMS = {
  400: ProblemSchema.describe('The body is not valid JSON.'),
  413: ProblemSchema.describe('The body is larger than 1 MiB.'),
  415: ProblemSchema.describe('The body is not application/json.'),
  422: ProblemSchema.describe('A field is missing or invalid.'),
} as const;

export const AgentSchema = z.object({
  agent_id: z.string().meta({ example: 'agt_0VboFtAE4lG2abgDsV1zT30vqzjDmf' }),
  name: z.string(),
  workspace_id: z.string().meta({ example: 'wsp_0VboFtAFnwjuTVmIW1jNOX4mWMSB3X' }),
}).meta({ id: 'Agent' });
