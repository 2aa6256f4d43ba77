import { html, type HtmlValue, type SafeHtml } from './html.ts';

export interface PageUser {
  email: string;
  plan: string;
}

export interface PageOptions {
  title: string;
  /** Which navigation entry is current. */
  nav?: NavKey | undefined;
  user?: PageUser | null | undefined;
  csrfToken: string;
  body: SafeHtml;
  /** Smaller, centred page (forms of sign-up and log-in). */
  narrow?: boolean;
  /**
   * The page reports a mistake or a refusal (a form's errors): its title starts with "Error: ",
   * the first thing a screen reader says of the page that comes back (GOV.UK's pattern).
   */
  error?: boolean | undefined;
}

/** The main navigation's entries, and 'account' for the profile page (reached from the signed-in email). */
export type NavKey = 'chat' | 'conversations' | 'inbox' | 'agents' | 'keys' | 'account';

const NAV: { key: NavKey; href: string; label: string }[] = [
  { key: 'chat', href: '/chat', label: 'Chat' },
  { key: 'conversations', href: '/conversations', label: 'Conversations' },
  { key: 'inbox', href: '/inbox', label: 'Inbox' },
  { key: 'agents', href: '/agents', label: 'Agents' },
  { key: 'keys', href: '/account/keys', label: 'API keys' },
];

export function page(options: PageOptions): string {
  const { user } = options;
  const nav = user
    ? html`<nav class="nav nav-main" aria-label="Main">
        <ul>${NAV.map((item) => html`<li><a href="${item.href}"${item.key === options.nav ? html` aria-current="page"` : ''}>${item.label}</a></li>`)}</ul>
      </nav>
      <div class="account">
        <a class="who" href="/account" title="Signed in as ${user.email}: your account"${options.nav === 'account' ? html` aria-current="page"` : ''}>${user.email}</a>
        <form method="post" action="/logout" class="inline">
          ${csrfField(options.csrfToken)}
          <button type="submit" class="btn btn-quiet btn-logout">Log out</button>
        </form>
      </div>`
    : html`<nav class="nav" aria-label="Account">
        <ul><li><a href="/login">Log in</a></li><li><a href="/signup" class="btn btn-small">Sign up</a></li></ul>
      </nav>`;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>${options.error ? 'Error: ' : ''}${options.title} · agent-channel</title>
<link rel="icon" href="/assets/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/assets/app.css">
<script src="/assets/app.js" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
  <div class="bar">
    <a class="brand" href="/"><span class="logo" aria-hidden="true">◆</span> agent-channel</a>
    ${nav}
  </div>
</header>
<main id="main" tabindex="-1" class="${options.narrow ? 'narrow' : ''}">
${options.body}
</main>
<footer class="foot"><p>agent-channel · <a href="/docs">API docs</a></p></footer>
</body>
</html>`.value;
}

export function csrfField(token: string): SafeHtml {
  return html`<input type="hidden" name="_csrf" value="${token}">`;
}

export type NoticeKind = 'ok' | 'error' | 'info' | 'warn';

export function notice(kind: NoticeKind, content: HtmlValue): SafeHtml {
  const role = kind === 'error' ? 'alert' : 'status';
  return html`<div class="notice notice-${kind}" role="${role}">${content}</div>`;
}

/** A timestamp for people, machine-readable in the datetime attribute. */
export function time(value: string | null | undefined, empty = '—'): SafeHtml {
  if (!value) return html`<span class="muted">${empty}</span>`;
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return html`${value}`;
  // "2026-11-23 13:32 UTC", which wraps (in a narrow column) only between the date and the time.
  const shown = date.toISOString().replace('T', ' ').slice(0, 16) + '\u00a0UTC';
  return html`<time datetime="${value}">${shown}</time>`;
}

export function badge(status: string): SafeHtml {
  return html`<span class="badge badge-${status.replace(/[^a-z_]/g, '')}">${status}</span>`;
}

/** A form's errors by field (`form`: the whole form's); a sentence, which may hold a link. */
export interface FieldErrors {
  [field: string]: string | SafeHtml | undefined;
}

/** A rule of the service's (a zod schema) as far as a form needs it: what it refuses, and why. */
interface FieldRule {
  safeParse(value: unknown): { error?: { issues: readonly { code: string }[] } | undefined };
}

/**
 * What `rule` refuses in `value`, said as one of the sentences given: `tooShort` or `tooLong`
 * for its first issue's code, `invalid` (default `tooShort`) for anything else. undefined when
 * the rule accepts the value. This lets a form say the service's own rules before asking it.
 */
export function ruleError(rule: FieldRule, value: unknown, say: { tooShort: string; tooLong: string; invalid?: string }): string | undefined {
  const issue = rule.safeParse(value).error?.issues[0];
  if (!issue) return undefined;
  return issue.code === 'too_small' ? say.tooShort : issue.code === 'too_big' ? say.tooLong : say.invalid ?? say.tooShort;
}

/** A labelled input with its error message tied to it (aria-describedby). */
export function field(options: {
  name: string; label: string; type?: string; value?: string | undefined; required?: boolean; hint?: HtmlValue;
  error?: string | SafeHtml | undefined; autocomplete?: string; attrs?: SafeHtml; id?: string;
}): SafeHtml {
  const id = options.id ?? `f-${options.name}`;
  const describedBy = [options.hint ? `${id}-hint` : '', options.error ? `${id}-error` : ''].filter(Boolean).join(' ');
  return html`<div class="field${options.error ? ' has-error' : ''}">
    <label for="${id}">${options.label}${options.required ? '' : html` <span class="muted">(optional)</span>`}</label>
    <input id="${id}" name="${options.name}" type="${options.type ?? 'text'}" value="${options.value ?? ''}"${options.required ? html` required` : ''}${options.autocomplete ? html` autocomplete="${options.autocomplete}"` : ''}${describedBy ? html` aria-describedby="${describedBy}"` : ''}${options.error ? html` aria-invalid="true"` : ''} ${options.attrs ?? ''}>
    ${options.hint ? html`<p class="hint" id="${id}-hint">${options.hint}</p>` : ''}
    ${options.error ? html`<p class="error" id="${id}-error">${options.error}</p>` : ''}
  </div>`;
}
