import type { FastifyInstance, FastifyBaseLogger, RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Services } from '../../services/services.ts';

/** A Fastify instance typed by our zod schemas. */
export type ApiApp = FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, FastifyBaseLogger, ZodTypeProvider>;

/** The services the API channel's key check and routes reach: keys, agents, conversations and missions. */
export type ApiContext = Pick<Services, 'keys' | 'agents' | 'conversations' | 'missions'>;
