#!/usr/bin/env node
// The client package's own command: the user commands alone (`agent-channel-client send "hi"`).
import { runUserCli } from './main.ts';

process.exitCode = await runUserCli(process.argv.slice(2));
