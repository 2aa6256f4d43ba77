import { Problem } from '../../domain/problems.ts';
import { oneLine, required, type Commands } from '../command.ts';

/** An endpoint that is not there is said with where its id can be found. */
async function onEndpoint(work: () => Promise<unknown>): Promise<void> {
  try {
    await work();
  } catch (error) {
    if (error instanceof Problem && error.code === 'not_found') {
      throw new Problem('not_found', 'No such webhook endpoint. --id takes the id that `webhooks list --email E` prints in its first column.');
    }
    throw error;
  }
}

/** Webhook endpoints (contract §9.5). WEBHOOK_ALLOW_PRIVATE_URLS is read from the CLI's own environment. */
export const WEBHOOK_COMMANDS: Commands = {
  'webhooks create': {
    usage: 'webhooks create --email E --url U [--events type,type]',
    flags: ['email', 'url', 'events'],
    async run(s, f, out) {
      const user = await s.accounts.requireByEmail(required(f, 'email'));
      const { endpoint, secret } = await s.webhooks.create(user.id, { url: required(f, 'url'), events: f.events });
      out(endpoint.id);
      out(secret);
    },
  },
  'webhooks list': {
    usage: 'webhooks list --email E',
    flags: ['email'],
    async run(s, f, out) {
      const user = await s.accounts.requireByEmail(required(f, 'email'));
      for (const endpoint of await s.webhooks.list(user.id)) {
        out([endpoint.id, oneLine(endpoint.url), endpoint.status, endpoint.events.join(',')].join('\t'));
      }
    },
  },
  'webhooks delete': {
    usage: 'webhooks delete --email E --id W',
    flags: ['email', 'id'],
    async run(s, f) {
      const user = await s.accounts.requireByEmail(required(f, 'email'));
      await onEndpoint(() => s.webhooks.delete(user.id, required(f, 'id')));
    },
  },
};
