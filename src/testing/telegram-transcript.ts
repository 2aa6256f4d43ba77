import type { FakeMessage } from './fake-bot-api.ts';

const escape = (text: string): string => text.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);

/**
 * A chat as the fake Bot API saw it, drawn as a Telegram client shows it (bubbles, inline
 * buttons, "typing…" left out): the page docs/telegram.md's screenshot is taken of.
 */
export function transcriptPage(title: string, messages: readonly (FakeMessage & { buttonsShown?: string[] })[]): string {
  const bubbles = messages.map((m) => {
    const buttons = (m.buttonsShown ?? []).map((text) => `<span class="button">${escape(text)}</span>`).join('');
    return `<div class="row ${m.from}"><div class="bubble">${escape(m.text).replaceAll('\n', '<br>')}${buttons ? `<div class="buttons">${buttons}</div>` : ''}</div></div>`;
  }).join('\n');
  return `<!doctype html><html><head><meta charset="utf-8"><title>${escape(title)}</title><style>
    body { margin: 0; font: 15px/1.4 system-ui, sans-serif; background: #8fb98b; }
    header { background: #517da2; color: #fff; padding: 12px 16px; font-weight: 600; }
    header small { display: block; font-weight: 400; opacity: .8; }
    main { padding: 12px; display: flex; flex-direction: column; gap: 6px; }
    .row { display: flex; } .row.user { justify-content: flex-end; }
    .bubble { max-width: 78%; padding: 7px 11px; border-radius: 12px; background: #fff; box-shadow: 0 1px 1px rgba(0,0,0,.15); white-space: normal; }
    .user .bubble { background: #effdde; }
    .buttons { display: flex; flex-wrap: wrap; gap: 4px; margin-top: 6px; }
    .button { flex: 1 1 40%; text-align: center; background: rgba(81,125,162,.15); color: #2b5278; border-radius: 8px; padding: 6px; font-weight: 600; }
  </style></head><body><header>${escape(title)}<small>bot</small></header><main>
${bubbles}
</main></body></html>`;
}
