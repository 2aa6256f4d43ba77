import { z } from 'zod';
import { Problem } from '../domain/problems.ts';

/**
 * The body of a bulk request (POST /actions/decisions, POST /questions/answers): a JSON array of
 * entries, or `{ <key>: [...] }`. The envelope is the channel's to judge; each entry is then the
 * service's, on its own, so that one bad entry fails alone.
 */

/** Entries per bulk request (contract §5, §6). */
export const MAX_BULK_ENTRIES = 100;

/** A bulk body's entries: an array, or `{ <key>: [...] }`, of 1–100 entries; anything else is 422. */
export function bulkEntries(body: unknown, key: string): unknown[] {
  const list = Array.isArray(body) ? body
    : body !== null && typeof body === 'object' && Array.isArray((body as Record<string, unknown>)[key]) ? (body as Record<string, unknown[]>)[key]!
    : null;
  if (list === null) throw Problem.validation([{ path: '', message: `must be a JSON array of entries or an object { "${key}": [...] }` }]);
  if (list.length < 1 || list.length > MAX_BULK_ENTRIES) {
    throw Problem.validation([{ path: Array.isArray(body) ? '' : key, message: `must hold 1 to ${MAX_BULK_ENTRIES} entries` }]);
  }
  return list;
}

/**
 * A bulk body as documented in /openapi.json. Fastify only checks that a body is there: the
 * route reads it with bulkEntries, and the service checks each entry.
 */
export function bulkBody(key: string, entry: z.ZodType, description: string) {
  const entries = z.array(entry).min(1).max(MAX_BULK_ENTRIES);
  const { $schema: _dialect, ...documented } = z.toJSONSchema(z.union([entries, z.object({ [key]: entries })]), { io: 'input' }) as Record<string, unknown>;
  return z.unknown().meta({ ...documented, description });
}
