import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startFakeModelProvider } from './testing/fake-model-provider.ts';
import { databaseEnv, freshDatabase } from './testing/harness.ts';
import { startServerProcess, type ServerProcess } from './testing/server-process.ts';

const UNREACHABLE = 'the model cannot be reached: agents\' turns fail until it can (MODEL_BASE_URL)';

const logLines = (server: ServerProcess) => server.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);

async function serving(server: ServerProcess): Promise<void> {
  for (let i = 0; i < 600 && !server.output().includes(' serving"'); i++) await new Promise((r) => setTimeout(r, 50));
}

test('a model configured but out of reach is said once at start, as a warning; the server serves and is ready all the same', { timeout: 60_000 }, async () => {
  const gone = await startFakeModelProvider();
  await gone.close(); // its port now refuses connections
  const database = await freshDatabase();
  const server = await startServerProcess({
    ...databaseEnv(database), MODEL_PROVIDER: 'openai-compatible', MODEL_NAME: 'm', MODEL_BASE_URL: gone.baseUrl, MODEL_API_KEY: 'sk-probe-secret-123',
  });
  try {
    await serving(server);
    for (let i = 0; i < 600 && !server.output().includes(UNREACHABLE); i++) await new Promise((r) => setTimeout(r, 50));
    const warnings = logLines(server).filter((l) => l.msg === UNREACHABLE);
    assert.equal(warnings.length, 1, server.output());
    assert.equal(warnings[0]!.level, 40, 'a warning');
    assert.equal(warnings[0]!.failure, 'network_error');
    assert.equal(warnings[0]!.baseUrl, gone.baseUrl);
    assert.equal((await fetch(`${server.url}/readyz`)).status, 200, 'readiness is about the database');
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(logLines(server).filter((l) => l.msg === UNREACHABLE).length, 1, 'once');
    assert.ok(!server.output().includes('sk-probe-secret-123'));
  } finally {
    await server.kill('SIGTERM');
    await database.drop();
  }
});

test('a model that answers is not warned about at start', { timeout: 60_000 }, async () => {
  const provider = await startFakeModelProvider();
  const database = await freshDatabase();
  const server = await startServerProcess({ ...databaseEnv(database), MODEL_PROVIDER: 'openai-compatible', MODEL_NAME: 'm', MODEL_BASE_URL: provider.baseUrl });
  try {
    await serving(server);
    await new Promise((r) => setTimeout(r, 1_000));
    assert.equal(logLines(server).filter((l) => l.msg === UNREACHABLE).length, 0, server.output());
  } finally {
    await server.kill('SIGTERM');
    await database.drop();
    await provider.close();
  }
});
