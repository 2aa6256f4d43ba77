import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before } from 'node:test';
import type { ModelSettings } from '../brains/model-settings.ts';
import { startTestApp, type TestApp, type TestAppOptions } from './harness.ts';

/**
 * A local model provider for tests: a real HTTP server on 127.0.0.1 that speaks the wire formats
 * of OpenAI Chat Completions (POST /v1/chat/completions) and Anthropic Messages (POST
 * /v1/messages), answering from the test's script and recording every request. No code of ours
 * is mocked: the brain talks to it through the AI SDK over HTTP, as it would to a real provider.
 */

/** What the model answers: its text and tool calls (in the protocol the request came in). */
export interface ModelAnswer {
  text?: string;
  toolCalls?: ReadonlyArray<{ name: string; input: unknown }>;
}

export type ScriptedReply =
  | ModelAnswer
  /** An HTTP error, with the provider's error body. */
  | { status: number; message: string }
  /** A 200 whose body is exactly this (malformed answers). */
  | { rawBody: string }
  /** Never answers (the connection stays open until the server closes). */
  | { hang: true };

export interface RecordedRequest {
  protocol: 'openai' | 'anthropic';
  path: string;
  headers: IncomingHttpHeaders;
  body: any;
  /** The client gave up on the request before it was answered (an aborted call). */
  abandoned: boolean;
}

export type Script = (request: RecordedRequest) => ScriptedReply | Promise<ScriptedReply>;

export interface FakeModelProvider {
  /** http://127.0.0.1:<port>/v1: MODEL_BASE_URL for either protocol. */
  baseUrl: string;
  requests: RecordedRequest[];
  /** How the next requests are answered (replaceable between tests). */
  script: Script;
  close(): Promise<void>;
}

export async function startFakeModelProvider(script: Script = () => ({ text: 'Hello.' })): Promise<FakeModelProvider> {
  const requests: RecordedRequest[] = [];
  const provider = { script } as FakeModelProvider;
  const server = createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => { raw += chunk; });
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0]!;
      const protocol = req.method === 'POST' && path === '/v1/chat/completions' ? 'openai'
        : req.method === 'POST' && path === '/v1/messages' ? 'anthropic' : null;
      if (!protocol) return send(res, 404, { error: { message: `no route ${req.method} ${path}` } });
      const recorded: RecordedRequest = { protocol, path, headers: req.headers, body: JSON.parse(raw), abandoned: false };
      requests.push(recorded);
      res.on('close', () => { if (!res.writableEnded) recorded.abandoned = true; });
      Promise.resolve(provider.script(recorded)).then((reply) => answer(res, recorded, reply), (error: unknown) => {
        send(res, 500, { error: { message: `the test's script threw: ${(error as Error).message}` } });
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(provider, {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections(); // the hanging ones too
      server.close(() => resolve());
    }),
  });
}

function answer(res: ServerResponse, request: RecordedRequest, reply: ScriptedReply): void {
  if ('hang' in reply) return;
  if ('rawBody' in reply) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(reply.rawBody);
    return;
  }
  if ('status' in reply) {
    return send(res, reply.status, request.protocol === 'openai'
      ? { error: { message: reply.message, type: 'server_error', code: null } }
      : { type: 'error', error: { type: 'api_error', message: reply.message } });
  }
  const calls = reply.toolCalls ?? [];
  const model = request.body.model;
  if (request.protocol === 'openai') {
    return send(res, 200, {
      id: `chatcmpl-${request.body.messages.length}`, object: 'chat.completion', created: Math.floor(Date.now() / 1000), model,
      choices: [{
        index: 0,
        message: {
          role: 'assistant',
          content: reply.text ?? null,
          ...(calls.length ? { tool_calls: calls.map((call, i) => ({ id: `call_${i}`, type: 'function', function: { name: call.name, arguments: JSON.stringify(call.input) } })) } : {}),
        },
        finish_reason: calls.length ? 'tool_calls' : 'stop',
      }],
      usage: { prompt_tokens: 20, completion_tokens: 10, total_tokens: 30 },
    });
  }
  return send(res, 200, {
    id: `msg_${request.body.messages.length}`, type: 'message', role: 'assistant', model,
    content: [
      ...(reply.text !== undefined ? [{ type: 'text', text: reply.text }] : []),
      ...calls.map((call, i) => ({ type: 'tool_use', id: `toolu_${i}`, name: call.name, input: call.input })),
    ],
    stop_reason: calls.length ? 'tool_use' : 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 20, output_tokens: 10 },
  });
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** The text of a recorded request's last user message, in either protocol. */
export function lastUserText(request: RecordedRequest): string {
  const last = [...request.body.messages].reverse().find((m: { role: string }) => m.role === 'user');
  return messageText(last);
}

/** A message's text content, in either protocol (a string, or text parts). */
export function messageText(message: { content: unknown } | undefined): string {
  if (!message) return '';
  if (typeof message.content === 'string') return message.content;
  return (message.content as Array<{ type: string; text?: string }>).filter((p) => p.type === 'text').map((p) => p.text).join('');
}

/** A tool call of the model's that a request carries back with its result (a continuation's outcome). */
export interface CarriedToolResult {
  toolName: string;
  callId: string;
  /** The call's input, as the model's tool call had it. */
  input: any;
  /** The tool's result, parsed from its JSON text. */
  output: any;
}

/** The tool result a recorded request ends with, and the call it answers, in either protocol; null when it ends otherwise. */
export function endingToolResult(request: RecordedRequest): CarriedToolResult | null {
  const messages: any[] = request.body.messages;
  const last = messages.at(-1);
  if (request.protocol === 'openai') {
    if (last?.role !== 'tool') return null;
    const call = messages.flatMap((m) => m.tool_calls ?? []).find((c: any) => c.id === last.tool_call_id);
    return { toolName: call.function.name, callId: call.id, input: JSON.parse(call.function.arguments), output: JSON.parse(last.content) };
  }
  const result = Array.isArray(last?.content) ? last.content.find((part: any) => part.type === 'tool_result') : undefined;
  if (last?.role !== 'user' || !result) return null;
  const call = messages.flatMap((m) => (Array.isArray(m.content) ? m.content : [])).find((part: any) => part.type === 'tool_use' && part.id === result.tool_use_id);
  const text = typeof result.content === 'string' ? result.content : result.content.map((part: any) => part.text).join('');
  return { toolName: call.name, callId: call.id, input: call.input, output: JSON.parse(text) };
}

/** The outcome a continuation's request carries: `approved`, `rejected`, `answered`, or null for a message's. */
export function continuationOutcome(request: RecordedRequest): 'approved' | 'rejected' | 'answered' | null {
  const result = endingToolResult(request);
  return result === null ? null : result.toolName === 'ask_user' ? 'answered' : result.output.outcome;
}

/** The system prompt a recorded request carried, in either protocol. */
export function systemPrompt(request: RecordedRequest): string {
  if (request.protocol === 'anthropic') {
    const system = request.body.system;
    return typeof system === 'string' ? system : (system ?? []).map((p: { text: string }) => p.text).join('');
  }
  return messageText(request.body.messages.find((m: { role: string }) => m.role === 'system'));
}

/** The names of the tools a recorded request offered, in either protocol. */
export function toolNames(request: RecordedRequest): string[] {
  return (request.body.tools ?? []).map((tool: { name?: string; function?: { name: string } }) => tool.function?.name ?? tool.name);
}

/** Is this recorded request a judge's call (it offers judge_answer)? */
export const isJudge = (request: RecordedRequest): boolean => toolNames(request).includes('judge_answer');

/**
 * Registers in the calling file (or describe) a fake provider and a test app whose agents answer
 * through it (`model`: the settings but the provider's base URL), both closed after its tests;
 * `use` receives them once started.
 */
export function withModelApp(
  model: Omit<ModelSettings, 'baseUrl'>, use: (started: { provider: FakeModelProvider; t: TestApp }) => void, options: TestAppOptions = {},
): void {
  let started: { provider: FakeModelProvider; t: TestApp } | undefined;
  before(async () => {
    const provider = await startFakeModelProvider();
    started = { provider, t: await startTestApp({ model: { ...model, baseUrl: provider.baseUrl } }, options) };
    use(started);
  });
  after(async () => {
    await started?.t.close();
    await started?.provider.close();
  });
}
