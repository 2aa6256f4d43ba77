import { readFileSync } from 'node:fs';

/** This release's version, as package.json gives it (`agent-channel --version`, the start-up line). */
export const RELEASE: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
