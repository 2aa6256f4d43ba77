import { oneLine, required, UsageError, type Commands } from '../command.ts';

export const WORKSPACE_COMMANDS: Commands = {
  'workspaces list': {
    usage: 'workspaces list --email E',
    flags: ['email'],
    async run(s, f, out) {
      const user = await s.accounts.requireByEmail(required(f, 'email'));
      // One workspace per line, tab-separated, the personal one first: the ids --workspace takes.
      for (const workspace of await s.accounts.workspacesOf(user.id)) {
        out([workspace.workspace_id, workspace.role, oneLine(workspace.name)].join('\t'));
      }
    },
  },
  'workspaces add-member': {
    usage: 'workspaces add-member --workspace W --email E --role member|admin',
    flags: ['workspace', 'email', 'role'],
    async run(s, f) {
      const role = required(f, 'role');
      if (role !== 'member' && role !== 'admin') throw new UsageError('--role must be member or admin');
      await s.accounts.addMember({ workspaceId: required(f, 'workspace'), email: required(f, 'email'), role });
    },
  },
  'workspaces remove-member': {
    usage: 'workspaces remove-member --workspace W --email E',
    flags: ['workspace', 'email'],
    async run(s, f) {
      await s.accounts.removeMember({ workspaceId: required(f, 'workspace'), email: required(f, 'email') });
    },
  },
};
