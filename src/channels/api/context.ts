import type { FastifyInstance, FastifyBaseLogger, RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Services } from '../../services/services.ts';
import type { EventStreams } from '../event-streams.ts';

/** A Fastify instance typed by our zod schemas. */
export type ApiApp = FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, FastifyBaseLogger, ZodTypeProvider>;

/** The services the API channel's key check and routes reach. */
export type ApiServices = Pick<Services, 'keys' | 'agents' | 'conversations' | 'missions' | 'feed'>;

/** What every route is given: the services, and the event streams open on this instance. */
export type ApiContext = ApiServices & { streams: EventStreams };
