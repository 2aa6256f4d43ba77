/**
 * The baseline of bench/messages.bench.ts: a bare Node `http` server that reads a POST body and
 * answers fixed JSON. No framework, no auth, no storage.
 */
import { createServer } from 'node:http';

const body = JSON.stringify({
  session_id: 'ses_0000000000000000000000', status: 'completed', reply: 'You said: hello',
  agent_id: 'agt_0000000000000000000000', message_ts: '2026-11-22T12:34:56.789012Z', reply_ts: '2026-11-22T12:34:56.789013Z',
});
const server = createServer((request, response) => {
  request.resume();
  request.on('end', () => {
    response.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
    response.end(body);
  });
});
server.keepAliveTimeout = 72_000;
server.listen(Number(process.env.PORT), '127.0.0.1');
process.on('SIGTERM', () => server.close(() => process.exit(0)));
