import assert from 'node:assert/strict';
import { Client, StreamableHTTPClientTransport, type CallToolResult, type Progress } from '@modelcontextprotocol/client';
import { listeningUrl, type TestApp } from './harness.ts';

/**
 * The MCP SDK's own client over real HTTP against a test app's /mcp (contract §9.6): what an AI
 * tool connecting with the key does. Every HTTP exchange is recorded (status and headers) so that
 * tests can see the key check and the rate limit at the HTTP level.
 */
export interface McpTestClient {
  client: Client;
  /** Each HTTP response the client received, in order. */
  exchanges: Array<{ method: string; status: number; headers: Headers }>;
  /** Calls a tool; `onprogress` asks for progress notifications (the SDK then sends a progressToken). */
  call(name: string, args?: Record<string, unknown>, onprogress?: (progress: Progress) => void): Promise<CallToolResult>;
  close(): Promise<void>;
}

export async function mcpClient(t: TestApp, key: string | null, headers: Record<string, string> = {}): Promise<McpTestClient> {
  const exchanges: McpTestClient['exchanges'] = [];
  const recording = async (url: string | URL, init?: RequestInit) => {
    const response = await fetch(url, init);
    exchanges.push({ method: init?.method ?? 'GET', status: response.status, headers: response.headers });
    return response;
  };
  const url = new URL('/mcp', await listeningUrl(t));
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { ...(key === null ? {} : { authorization: `Bearer ${key}` }), ...headers } },
    fetch: recording,
  });
  const client = new Client({ name: 'agent-channel tests', version: '1.0.0' });
  await client.connect(transport);
  return {
    client,
    exchanges,
    call: (name, args = {}, onprogress) => client.callTool({ name, arguments: args }, onprogress ? { onprogress, resetTimeoutOnProgress: true } : undefined),
    close: () => client.close(),
  };
}

/** A tool result's structured content, asserting it is (or is not) an error. */
export function structuredOf<T = Record<string, unknown>>(result: CallToolResult, isError = false): T {
  assert.equal(result.isError ?? false, isError, JSON.stringify(result));
  assert.ok(result.structuredContent, 'structuredContent is there');
  // Clients that read only text get the same value as JSON.
  const text = result.content[0];
  assert.equal(text?.type, 'text');
  assert.deepEqual(JSON.parse((text as { text: string }).text), result.structuredContent);
  return result.structuredContent as T;
}
