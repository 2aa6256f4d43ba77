import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { GENERATED_TYPES_PATH, generatedClientTypes } from '../../../scripts/client-types.ts';
import { TEST_DB } from '../../../src/testing/harness.ts';

test('the client\'s generated types are those of the server\'s OpenAPI document as it is now', { skip: TEST_DB === 'postgres' && 'the document does not depend on the database' }, async () => {
  const checkedIn = readFileSync(GENERATED_TYPES_PATH, 'utf8');
  const fresh = await generatedClientTypes();
  assert.ok(checkedIn === fresh, 'packages/client/src/generated/openapi.ts is stale: run `node scripts/client-types.ts` and commit the result');
});
