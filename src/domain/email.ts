import { z } from 'zod';

/**
 * An email address as the service takes one, wherever it comes from (sign-up, the CLI, an
 * answer to an agent's `email` question): trimmed, lower-cased, at most 254 characters.
 */
export const EmailSchema = z.string().trim().toLowerCase().max(254).pipe(z.email({ message: 'must be an email address' }));
