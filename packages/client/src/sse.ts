/**
 * A Server-Sent Events parser (the text/event-stream format of the WHATWG HTML standard,
 * §9.2.6) over a fetch body: fetch and a reader only, so it runs wherever fetch does.
 */

export interface SseMessage {
  id: string | undefined;
  event: string;
  data: string;
  /** The reconnection time the server asked for, when it sent one. */
  retry: number | undefined;
}

/** Yields each dispatched message; comments and messages without data are skipped. */
export async function* parseSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let first = true;
  let data: string[] = [];
  let event = '';
  let id: string | undefined;
  let retry: number | undefined;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return; // an unfinished message at the end is dropped, as the standard says
      buffer += decoder.decode(value, { stream: true });
      if (first && buffer.length > 0) {
        if (buffer.charCodeAt(0) === 0xfeff) buffer = buffer.slice(1);
        first = false;
      }
      // A line ends at \r\n, \n or \r; a \r at the very end may be the first half of \r\n.
      for (let end = lineEnd(buffer); end !== -1; end = lineEnd(buffer)) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(buffer[end] === '\r' && buffer[end + 1] === '\n' ? end + 2 : end + 1);
        if (line === '') {
          if (data.length > 0) yield { id, event: event || 'message', data: data.join('\n'), retry };
          data = [];
          event = '';
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon === -1 ? line : line.slice(0, colon);
        let value = colon === -1 ? '' : line.slice(colon + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (field === 'data') data.push(value);
        else if (field === 'event') event = value;
        else if (field === 'id' && !value.includes('\0')) id = value;
        else if (field === 'retry' && /^\d+$/.test(value)) retry = Number(value);
      }
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => {});
  }
}

function lineEnd(buffer: string): number {
  for (let i = 0; i < buffer.length; i++) {
    const c = buffer[i];
    if (c === '\n') return i;
    if (c === '\r') return i + 1 < buffer.length ? i : -1;
  }
  return -1;
}
