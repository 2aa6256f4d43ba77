import { backupSqlite, restoreSqlite } from '../../store/sqlite-backup.ts';
import { required, type Commands } from '../command.ts';

/** Commands on the SQLite database's files, with no connection of the service's open. */
export const FILE_COMMANDS: Commands = {
  backup: {
    usage: 'backup --to FILE                                  a consistent copy of the SQLite database, also while serving',
    flags: ['to'],
    onFiles: true,
    async run(config, f) {
      backupSqlite(config.databaseUrl, required(f, 'to'));
    },
  },
  restore: {
    usage: 'restore --from FILE                               the backup in the database\'s place (server stopped); prints where the old one was kept',
    flags: ['from'],
    onFiles: true,
    async run(config, f, out) {
      const keptAs = restoreSqlite(config.databaseUrl, required(f, 'from'));
      if (keptAs) out(keptAs);
    },
  },
};
