import { required, UsageError, type Commands } from '../command.ts';

export const USER_COMMANDS: Commands = {
  'users create': {
    usage: 'users create --email E --password P [--plan free|pro]',
    flags: ['email', 'password', 'plan'],
    async run(s, f, out) {
      const plan = f.plan ?? 'free';
      if (plan !== 'free' && plan !== 'pro') throw new UsageError('--plan must be free or pro');
      const user = await s.accounts.createUser({ email: required(f, 'email'), password: required(f, 'password'), plan });
      out(user.id);
    },
  },
  'users set-plan': {
    usage: 'users set-plan --email E --plan free|pro',
    flags: ['email', 'plan'],
    async run(s, f) {
      const plan = required(f, 'plan');
      if (plan !== 'free' && plan !== 'pro') throw new UsageError('--plan must be free or pro');
      await s.accounts.setPlan(required(f, 'email'), plan);
    },
  },
  'users set-password': {
    usage: 'users set-password --email E --password P         a forgotten password replaced; the account\'s web sessions end',
    flags: ['email', 'password'],
    async run(s, f) {
      // Locked out by failed guesses, it may log in at once: they are forgotten with the password set.
      const forgive = await s.loginThrottle.accountForgiver(required(f, 'email'));
      await s.accounts.setPassword(required(f, 'email'), required(f, 'password'), forgive);
    },
  },
  'agents create': {
    usage: 'agents create --email E --name N [--workspace W]',
    flags: ['email', 'name', 'workspace'],
    async run(s, f, out) {
      const user = await s.accounts.requireByEmail(required(f, 'email'));
      const agent = await s.agents.create(user.id, { agent_name: required(f, 'name'), workspace_id: f.workspace });
      out(agent.agent_id);
    },
  },
};
