#!/usr/bin/env node
// Plain JavaScript on purpose: it must run (and explain itself) on a Node too old for TypeScript.
const major = Number(process.versions.node.split('.')[0]);
if (major < 24) {
  console.error(`agent-channel needs Node 24 or newer (this is ${process.version}). Run it through npm (npm start, npm run cli), which uses the pinned Node from node_modules.`);
  process.exit(1);
}
// The user commands (send, chat…) are the client package's: they talk HTTP, and load nothing of the server.
const { isUserCommand } = await import('../packages/client/src/cli/usage.ts');
if (isUserCommand(process.argv[2])) {
  const { runUserCli } = await import('../packages/client/src/cli/main.ts');
  process.exitCode = await runUserCli(process.argv.slice(2));
} else {
  await runOperatorCli();
}

async function runOperatorCli() {
  const { run } = await import('../src/cli/main.ts');
  try {
    process.exitCode = await run(process.argv.slice(2));
  } catch (error) {
    // A setting or a database that cannot work: one line saying why, not a stack (unless asked for).
    const debugging = ['debug', 'trace'].includes(process.env.LOG_LEVEL ?? '');
    console.error(`agent-channel: ${debugging ? error?.stack : error?.message ?? error}`);
    process.exit(1); // open connections must not keep a failed start alive
  }
}
