import type { Services } from '../../services/services.ts';

/** The services the MCP channel's key check and tools reach: the same as the API's routes. */
export type McpServices = Pick<Services, 'keys' | 'agents' | 'conversations' | 'missions'>;
