import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import type { FastifyBaseLogger } from 'fastify';
import { lazyRequestLogger } from './request-log.ts';

/** A pino logger writing into an array, with the clock stopped so that two lines can be compared. */
function memoryLogger(level = 'info') {
  const lines: Record<string, unknown>[] = [];
  const raw: string[] = [];
  const logger = pino({ level, timestamp: () => ',"time":0' }, { write: (line: string) => { raw.push(line); lines.push(JSON.parse(line)); } });
  return { logger, lines, raw };
}

const make = (parent: FastifyBaseLogger, options = {}) =>
  lazyRequestLogger.call(undefined as never, parent, { reqId: 'req-1' }, options, undefined as never);

test('a request logger writes what a child bound to the request id writes, at every level', () => {
  const { logger, lines } = memoryLogger('trace');
  const log = make(logger as FastifyBaseLogger);
  log.warn({ detail: 1 }, 'first');
  log.error(new Error('boom'));
  log.info('plain');
  log.trace('fine');
  assert.deepEqual(lines.map((line) => [line.reqId, line.msg]), [['req-1', 'first'], ['req-1', 'boom'], ['req-1', 'plain'], ['req-1', 'fine']]);
  assert.equal(lines[0]!.detail, 1);
  assert.equal((lines[1]!.err as { message: string }).message, 'boom', 'an error is serialised as pino does');
});

test('the child is made only when something is logged through it', () => {
  const { logger } = memoryLogger();
  let children = 0;
  const counting = Object.create(logger, { child: { value: (...args: Parameters<typeof logger.child>) => { children++; return logger.child(...args); } } });
  const log = make(counting);
  assert.equal(log.level, 'info', 'the level is the parent\'s, asked without making a child');
  assert.equal(children, 0);
  log.info('now');
  log.info('again');
  assert.equal(children, 1, 'one child, made at the first line and kept');
});

test('a line below the level is not written; a level set on the request logger applies to it alone', () => {
  const { logger, lines } = memoryLogger('info');
  const log = make(logger as FastifyBaseLogger);
  log.debug('hidden');
  assert.equal(lines.length, 0);
  log.level = 'debug';
  log.debug('shown');
  logger.debug('parent still at info');
  assert.deepEqual(lines.map((line) => line.msg), ['shown']);
  assert.equal(make(logger as FastifyBaseLogger, { level: 'warn' }).level, 'warn', 'a route\'s own level shows before any line');
});

test('a child of the request logger keeps the request id and adds its own bindings', () => {
  const { logger, lines } = memoryLogger();
  make(logger as FastifyBaseLogger).child({ part: 'judge' }).info('inner');
  assert.deepEqual([lines[0]!.reqId, lines[0]!.part], ['req-1', 'judge']);
});

test('the access line written through the server\'s logger with the id as a field is the line a request child writes', () => {
  const { logger, raw } = memoryLogger();
  logger.child({ reqId: 'req-1' }).info({ method: 'GET', url: '/x', ms: 0.5, status: 200 }, 'request');
  logger.info({ reqId: 'req-1', method: 'GET', url: '/x', ms: 0.5, status: 200 }, 'request');
  assert.equal(raw[0], raw[1]);
});
