import { closeSync, existsSync, lstatSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * A database holds password hashes, key digests and the deployment's sealing key (which opens the
 * cookie that carries a new key's secret): the files and folders made for it (the database, its
 * server lock, a backup) are the owner's alone. (Those that already exist keep the modes an
 * operator gave them.)
 */
const PRIVATE_FOLDER = 0o700;
export const PRIVATE_FILE = 0o600;

/**
 * Creates a folder and the folders above it that are missing. Not `mkdirSync(…, { recursive: true })`:
 * in Node 24 it loops for ever where a parent exists but refuses children (under /proc, say), so a
 * mistyped DATABASE_URL hung the server instead of stopping it with the reason.
 */
export function makeFolder(folder: string): void {
  try {
    mkdirSync(folder, PRIVATE_FOLDER);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return;
    const parent = dirname(folder);
    if (code !== 'ENOENT' || parent === folder) throw error;
    makeFolder(parent);
    mkdirSync(folder, PRIVATE_FOLDER); // a parent that takes no children fails here, with its own reason
  }
}

/** Makes `path` an empty file only its owner may read, unless a file is there already. */
export function makePrivateFile(path: string): void {
  try {
    closeSync(openSync(path, 'wx', PRIVATE_FILE));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    // A symbolic link to a file not made yet ('wx' refuses any link): made through the link, here,
    // rather than by SQLite, with its mode for all.
    if (lstatSync(path).isSymbolicLink() && !existsSync(path)) closeSync(openSync(path, 'a', PRIVATE_FILE));
  }
}
