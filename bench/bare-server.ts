/**
 * The baseline of bench/agents.bench.ts: a bare Fastify server with one GET route that returns
 * the JSON body given in BODY_JSON, as fast as Fastify can. No auth, no rate limit, no logging.
 */
import Fastify from 'fastify';

const body = process.env.BODY_JSON ?? '{}';
const app = Fastify({ logger: false });
app.get('/api/v1/api-channel/agents', async (_request, reply) => reply.type('application/json; charset=utf-8').send(body));
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
