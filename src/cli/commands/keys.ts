import { parseApiKey } from '../../domain/api-key.ts';
import { Problem } from '../../domain/problems.ts';
import { oneLine, optionalInt, required, type Commands, type Flags } from '../command.ts';

/**
 * A key's id as `keys list` prints it. `ak_<keyId>` and the whole key `ak_<keyId>_<secret>` name
 * the same key (a key id is base62, never `_`), so either is taken too.
 */
function keyIdFlag(flags: Flags): string {
  const value = required(flags, 'key-id');
  return parseApiKey(value)?.keyId ?? /^ak_([A-Za-z0-9]+)$/.exec(value)?.[1] ?? value;
}

/** Runs a command on one key; a key that is not there is said with where its id can be found. */
async function onKey(work: () => Promise<unknown>): Promise<void> {
  try {
    await work();
  } catch (error) {
    if (error instanceof Problem && error.code === 'not_found') {
      throw new Problem('not_found', 'No such key. --key-id takes the id that `keys list --email E` prints in its first column.');
    }
    throw error;
  }
}

export const KEY_COMMANDS: Commands = {
  'keys create': {
    usage: 'keys create --email E --label L [--rate-limit N] [--expires-in-days D]',
    flags: ['email', 'label', 'rate-limit', 'expires-in-days'],
    async run(s, f, out) {
      const user = await s.accounts.requireByEmail(required(f, 'email'));
      const { token } = await s.keys.create(user.id, {
        label: required(f, 'label'), rate_limit: optionalInt(f, 'rate-limit'), expires_in_days: optionalInt(f, 'expires-in-days'),
      });
      out(token);
    },
  },
  'keys list': {
    usage: 'keys list --email E',
    flags: ['email'],
    async run(s, f, out) {
      const user = await s.accounts.requireByEmail(required(f, 'email'));
      for (const key of await s.keys.list(user.id)) {
        out([key.key_id, oneLine(key.label), key.status, key.last_used_at ?? 'never', key.expires_at ?? 'never'].join('\t'));
      }
    },
  },
  'keys revoke': {
    usage: 'keys revoke --email E --key-id K',
    flags: ['email', 'key-id'],
    async run(s, f) {
      const user = await s.accounts.requireByEmail(required(f, 'email'));
      await onKey(() => s.keys.revoke(user.id, keyIdFlag(f)));
    },
  },
  'keys disable': {
    usage: 'keys disable --key-id K',
    flags: ['key-id'],
    async run(s, f) {
      await onKey(() => s.keys.setEnabled(keyIdFlag(f), false));
    },
  },
  'keys enable': {
    usage: 'keys enable --key-id K',
    flags: ['key-id'],
    async run(s, f) {
      await onKey(() => s.keys.setEnabled(keyIdFlag(f), true));
    },
  },
};
