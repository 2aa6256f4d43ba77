import crypto from 'node:crypto';
import { syncBuiltinESMExports } from 'node:module';
import { mock, type Mock } from 'node:test';

/**
 * The calls to node's `crypto.timingSafeEqual` made while `fn` runs. The spy still does the
 * real comparison; it only watches a Node built-in, never our own code.
 */
export async function timingSafeEqualCallsDuring(fn: () => unknown): Promise<Array<[Buffer, Buffer]>> {
  const spy = mock.method(crypto, 'timingSafeEqual') as Mock<typeof crypto.timingSafeEqual>;
  syncBuiltinESMExports(); // so that modules' named imports (`import { timingSafeEqual }`) see the spy
  try {
    await fn();
    return spy.mock.calls.map((call) => call.arguments as unknown as [Buffer, Buffer]);
  } finally {
    spy.mock.restore();
    syncBuiltinESMExports();
  }
}
