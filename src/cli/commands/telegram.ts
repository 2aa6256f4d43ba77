import { required, type Commands } from '../command.ts';

export const TELEGRAM_COMMANDS: Commands = {
  'telegram link-code': {
    usage: 'telegram link-code --email E         a one-time code (10 minutes) that links a Telegram chat: /start <code>',
    flags: ['email'],
    async run(s, f, out) {
      const user = await s.accounts.requireByEmail(required(f, 'email'));
      out((await s.telegramLinks.createCode(user.id)).code);
    },
  },
};
