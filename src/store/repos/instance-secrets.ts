import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { DB } from '../schema.ts';

/**
 * The deployment-wide secret called `name` (32 random bytes), made on first use. Instances
 * racing to make it all end up with the first one written.
 */
export async function instanceSecret(db: Kysely<DB>, name: string): Promise<Buffer> {
  await db.insertInto('instance_secrets')
    .values({ name, value: randomBytes(32).toString('base64'), created_at: new Date().toISOString() })
    .onConflict((oc) => oc.column('name').doNothing()).execute();
  const row = await db.selectFrom('instance_secrets').select('value').where('name', '=', name).executeTakeFirstOrThrow();
  return Buffer.from(row.value, 'base64');
}
