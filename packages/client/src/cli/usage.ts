/**
 * The user commands' names and usage: no dependencies, so that the operator CLI (which
 * dispatches these commands here) can list them in its --help without loading the client.
 */
export const USER_COMMANDS = ['send', 'chat', 'transcript', 'actions', 'questions', 'cancel', 'events'] as const;

/** Whether `word` names a user command (bin/agent-channel.js hands these to the client, the rest to the operator CLI). */
export const isUserCommand = (word: string | undefined): boolean => (USER_COMMANDS as readonly string[]).includes(word ?? '');

export const USER_USAGE = `  send "text" [--session S] [--agent A] [--no-wait] [--timeout SECONDS]   send; print the reply
  chat [--session S] [--agent A]                    talk to an agent; approve actions, answer questions inline
  transcript S [--follow]                           a session's turns (--follow: then each new one)
  actions [--session S]                             the actions awaiting your permission
  actions approve OP… | approve-all OP… | reject OP… [--reason R]
  questions                                         the open questions put to you
  questions answer REQ "text"
  cancel S                                          stop a session's work
  events [--after ID] [--session S] [--follow]      the event feed (--follow: stream it)

  Every user command takes --json (one JSON document, or one per line with --follow), --url U
  and --key K (default: AGENT_CHANNEL_URL, AGENT_CHANNEL_KEY). Exit codes: 0 done, 1 failed
  (network or server), 2 usage, 3 refused (a problem: its code is printed), 4 the agent failed
  or the turn was cancelled, 5 some entries of a bulk call failed, 6 --timeout reached.`;
