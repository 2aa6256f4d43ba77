import type { ToolCall } from './tool.ts';

/** How often a waiting send tells the client it is still waiting: clients give up on a silent call after about 60 s. */
const PROGRESS_EVERY_MS = 4000;

/**
 * Sends MCP progress notifications while a call waits, when the client asked for them (a
 * `progressToken`): one at once, then every 4 s (or four times over a shorter ceiling, so that a
 * short wait shows progress too). `progress` counts the seconds waited, `total` the ceiling.
 * Returns the stop.
 */
export function progressWhileWaiting(call: ToolCall, ceilingMs: number): () => void {
  const progressToken = call.mcp.mcpReq._meta?.progressToken;
  if (progressToken === undefined) return () => {};
  const started = Date.now();
  const total = ceilingMs / 1000;
  const tell = () => {
    const progress = (Date.now() - started) / 1000;
    call.mcp.mcpReq.notify({
      method: 'notifications/progress',
      params: { progressToken, progress, total, message: `Waiting for the agent's reply (${Math.floor(progress)} s of at most ${Math.floor(total)} s).` },
    }).catch(() => {}); // the client is gone: the wait ends with its signal
  };
  tell();
  const timer = setInterval(tell, Math.max(50, Math.min(PROGRESS_EVERY_MS, ceilingMs / 4)));
  return () => clearInterval(timer);
}
