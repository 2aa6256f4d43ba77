#!/usr/bin/env node
// Plain JavaScript on purpose: it must run (and explain itself) on a Node too old for TypeScript.
const major = Number(process.versions.node.split('.')[0]);
if (major < 24) {
  console.error(`agent-channel needs Node 24 or newer (this is ${process.version}). Run it through npm (npm start, npm run cli), which uses the pinned Node from node_modules.`);
  process.exit(1);
}
const { run } = await import('../src/cli/main.ts');
process.exitCode = await run(process.argv.slice(2));
