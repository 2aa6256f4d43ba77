import assert from 'node:assert/strict';
import { test } from 'node:test';
import { shownUrl } from './shown-url.ts';

test('a URL is shown without its password or any query parameter that names a secret', () => {
  assert.equal(shownUrl('postgres://app:s3cret@db.internal:5432/agents?schema=prod&sslmode=require'),
    'postgres://app:***@db.internal:5432/agents?schema=prod&sslmode=require');
  assert.equal(shownUrl('postgres://app@db/agents?password=s3cret&sslkey=/k.pem&sslpassword=x'),
    'postgres://app@db/agents?password=***&sslkey=***&sslpassword=***');
  assert.equal(shownUrl('postgres://app@db/agents?options=-c%20password%3Ds3cret&application_name=x'),
    'postgres://app@db/agents?options=***&application_name=x');
  assert.equal(shownUrl('rediss://:s3cret@cache:6380/0'), 'rediss://:***@cache:6380/0');
  assert.equal(shownUrl('redis://127.0.0.1:6379'), 'redis://127.0.0.1:6379');
});

test('what does not parse as a URL is shown as its scheme alone', () => {
  assert.equal(shownUrl('postgres://app:s3cret@[bad'), 'postgres:…');
  assert.equal(shownUrl('s3cret'), '…');
});
