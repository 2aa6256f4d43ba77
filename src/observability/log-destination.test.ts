import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { test } from 'node:test';

/**
 * The log destination in a process of its own, writing to a file: what it holds when the process
 * exits (lines not yet a block, a block not yet written) must reach the file all the same.
 */
async function linesWrittenBy(script: string): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'log-destination-'));
  try {
    const file = join(dir, 'log');
    const destination = new URL('./log-destination.ts', import.meta.url).href;
    await promisify(execFile)(process.execPath, ['--input-type=module', '-e', `
      import { openSync } from 'node:fs';
      import { logDestination } from ${JSON.stringify(destination)};
      const log = logDestination(openSync(${JSON.stringify(file)}, 'w'));
      ${script}
    `]); // rejects, with the child's stderr, unless it exits 0
    return readFileSync(file, 'utf8').split('\n').filter((line) => line !== '');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('lines still gathering when the process exits are written out', async () => {
  const lines = await linesWrittenBy(`for (let i = 0; i < 5; i++) log.write('line ' + i + '\\n'); process.exit(0);`);
  assert.deepEqual(lines, ['line 0', 'line 1', 'line 2', 'line 3', 'line 4']);
});

test('many blocks, the last one partial, arrive whole and in order at exit', async () => {
  const lines = await linesWrittenBy(`for (let i = 0; i < 5000; i++) log.write(JSON.stringify({ i, pad: 'x'.repeat(i % 300) }) + '\\n'); process.exit(0);`);
  assert.equal(lines.length, 5000);
  lines.forEach((line, i) => assert.equal((JSON.parse(line) as { i: number }).i, i));
});

test('a process that ends by itself, without exit(), writes out what it held too', async () => {
  // Sixteen at once: sonic-boom closes the file at 'beforeExit', and whether a line held until
  // 'exit' was lost depended on the machine's load (one process in three, sixteen at once).
  const outputs = await Promise.all(Array.from({ length: 16 }, () => linesWrittenBy(`log.write('only line\\n');`)));
  assert.deepEqual(outputs, Array.from({ length: 16 }, () => ['only line']));
});
