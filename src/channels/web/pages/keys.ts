import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { parseBearer } from '../../../domain/api-key.ts';
import { Problem } from '../../../domain/problems.ts';
import type { WebSession } from '../../../services/web-sessions.ts';
import { createKeyInputSchema, type KeyView } from '../../../services/keys.ts';
import type { AgentView } from '../../../services/agents.ts';
import { API_PREFIX } from '../../api-prefix.ts';
import { authed, errorPage, formValue, render, type WebContext } from '../context.ts';
import { FLASH_KEY_COOKIE } from '../cookies.ts';
import { setFlash, takeFlash, type Flash } from '../flash.ts';
import { html, type SafeHtml } from '../html.ts';
import { badge, csrfField, field, notice, ruleError, time, type FieldErrors } from '../layout.ts';

const KEYS_PATH = '/account/keys';
// The new key travels from the create form to the page that shows it in a session cookie
// (HttpOnly, never written to disk by the browser) that this page clears as it reads it: shown
// once, gone on reload. The cookie holds `<key id>.<sealed secret>`: the secret is sealed with
// the deployment's sealing key (see ../flash.ts), bound to the user, and good for two minutes
// (ttlMs; the page says so in words made from it). The server keeps only the secret's SHA-256
// digest, as for every key.
const NEW_KEY_FLASH: Flash = { cookie: FLASH_KEY_COOKIE, path: KEYS_PATH, purpose: 'new-key', ttlMs: 120_000 };
/** How long the new key's secret can be shown, for people ("two minutes"). */
const NEW_KEY_LIFETIME = minutesInWords(NEW_KEY_FLASH.ttlMs);

/** The service's rules for a new key (createKeyInputSchema), field by field. */
type KeyRules = ReturnType<typeof createKeyInputSchema>['shape'];

/** The numbers in those rules that the form shows (its hints, its inputs' limits). */
function keyLimits(rules: KeyRules) {
  const rate = rules.rate_limit.unwrap();
  const days = rules.expires_in_days.unwrap();
  return { labelMax: rules.label.maxLength, rateMin: rate.minValue, daysMin: days.minValue, daysMax: days.maxValue };
}

type KeyLimits = ReturnType<typeof keyLimits>;

interface KeyForm {
  label: string;
  rate_limit: string;
  expires_in_days: string;
}

const EMPTY_FORM: KeyForm = { label: '', rate_limit: '', expires_in_days: '' };

/** The account page and its API Keys tab: create, list, revoke (with a confirmation step). */
export function keysRoutes(app: FastifyInstance, ctx: WebContext): void {
  const rules = createKeyInputSchema(ctx.config.maxRateLimitPerMinute).shape;
  const limits = keyLimits(rules);
  app.get('/account', authed(async (request, reply, session) => {
    const workspaces = await ctx.services.accounts.workspacesOf(session.userId);
    return render(request, reply, {
      title: 'Account', nav: 'account',
      body: html`${accountHeader('profile')}
        <section class="card" aria-labelledby="profile-h">
          <h2 id="profile-h">Profile</h2>
          <dl class="facts">
            <dt>Email</dt><dd>${session.email}</dd>
            <dt>Plan</dt><dd>${session.plan}</dd>
            <dt>Workspaces</dt><dd><ul class="plain">${workspaces.map((w) => html`<li>${w.name} <code>${w.workspace_id}</code> <span class="muted">(${w.role})</span></li>`)}</ul></dd>
          </dl>
        </section>`,
    });
  }));

  app.get(KEYS_PATH, authed<{ Querystring: { revoked?: string } }>(async (request, reply, session) => {
    const flash = takeFlash(ctx.sealer, request, reply, NEW_KEY_FLASH, session.userId);
    const newKey = flash ? { keyId: flash.clear, token: flash.value } : null;
    return keysPage(ctx, limits, request, reply, session, { newKey, form: EMPTY_FORM, errors: {}, revoked: request.query.revoked });
  }));

  app.post(KEYS_PATH, authed(async (request, reply, session) => {
    const form: KeyForm = {
      label: formValue(request.body, 'label'),
      rate_limit: formValue(request.body, 'rate_limit').trim(),
      expires_in_days: formValue(request.body, 'expires_in_days').trim(),
    };
    const errors: FieldErrors = {};
    const { config } = ctx;
    // The service's own rules, said as sentences before it is asked.
    errors.label = ruleError(rules.label, form.label, {
      tooShort: 'Label is required, so that you can tell your keys apart.',
      tooLong: `Label must be at most ${limits.labelMax} characters.`,
      invalid: 'Label is not valid: check it and try again.',
    });
    const rateLimit = wholeNumber(form.rate_limit, rules.rate_limit);
    if (rateLimit === null) {
      errors.rate_limit = `Rate limit must be a whole number of requests per minute from ${limits.rateMin} to ${config.maxRateLimitPerMinute}, or empty for the default (${config.defaultRateLimitPerMinute}).`;
    }
    const expires = wholeNumber(form.expires_in_days, rules.expires_in_days);
    if (expires === null) {
      errors.expires_in_days = `Expiry must be a whole number of days from ${limits.daysMin} to ${limits.daysMax}, or empty for a key that never expires.`;
    }
    if (!errors.label && !errors.rate_limit && !errors.expires_in_days) {
      try {
        const { key, token } = await ctx.services.keys.create(session.userId, {
          label: form.label,
          ...(rateLimit !== undefined && rateLimit !== null ? { rate_limit: rateLimit } : {}),
          ...(expires !== undefined && expires !== null ? { expires_in_days: expires } : {}),
        });
        setFlash(ctx.sealer, request, reply, NEW_KEY_FLASH, session.userId, token, key.key_id);
        return reply.redirect(KEYS_PATH, 303);
      } catch (error) {
        if (!(error instanceof Problem) || error.code !== 'validation_failed') throw error;
        // Each field was checked above with the same rules and limit as the service's: should it
        // refuse the key all the same, one sentence for the form.
        errors.form = 'The key could not be created. Check the form and try again.';
      }
    }
    return keysPage(ctx, limits, request, reply, session, { newKey: null, form, errors, status: 422 });
  }));

  app.get(`${KEYS_PATH}/:keyId/revoke`, authed<{ Params: { keyId: string } }>(async (request, reply, session) => {
    const key = await ctx.services.keys.find(session.userId, request.params.keyId);
    if (!key) return errorPage(request, reply, 404, 'Key not found', 'You have no API key with this id.');
    if (key.status === 'revoked') {
      return render(request, reply, {
        title: 'Key revoked', nav: 'keys', narrow: true,
        body: html`<section class="card">
          <h1>“${key.label}” is revoked</h1>
          <p>Key <code>${key.key_id}</code> was revoked${key.revoked_at ? html` on ${time(key.revoked_at)}` : ''}: it can never be used again.</p>
          <p><a class="btn btn-quiet" href="${KEYS_PATH}">Back to API keys</a></p>
        </section>`,
      });
    }
    const unauthorized = html`<code>401 Unauthorized</code>`;
    // What revoking changes for this key: an expired or disabled key already gets 401.
    const consequence = key.status === 'expired'
      ? html`Key <code>${key.key_id}</code> already expired${key.expires_at ? html` on ${time(key.expires_at)}` : ''}: requests made with it already get ${unauthorized}. Revoking it marks it as never to be used again.`
      : key.status === 'inactive'
        ? html`Key <code>${key.key_id}</code> is disabled by an operator: requests made with it already get ${unauthorized}. Once revoked, it can never be enabled again. This cannot be undone.`
        : html`Key <code>${key.key_id}</code> will stop working at once. Every request made with it will get ${unauthorized}. This cannot be undone.`;
    return render(request, reply, {
      title: 'Revoke key', nav: 'keys', narrow: true,
      body: html`<section class="card">
        <h1>Revoke “${key.label}”?</h1>
        <p>${consequence}</p>
        <form method="post" action="${KEYS_PATH}/${key.key_id}/revoke" class="row">
          ${csrfField(request.csrfToken)}
          <button type="submit" class="btn btn-danger">Revoke key</button>
          <a class="btn btn-quiet" href="${KEYS_PATH}">Cancel</a>
        </form>
      </section>`,
    });
  }));

  app.post(`${KEYS_PATH}/:keyId/revoke`, authed<{ Params: { keyId: string } }>(async (request, reply, session) => {
    await ctx.services.keys.revoke(session.userId, request.params.keyId); // another's key: Problem not_found → 404 page
    return reply.redirect(`${KEYS_PATH}?revoked=${encodeURIComponent(request.params.keyId)}`, 303);
  }));
}

/** undefined when left empty (the default applies), null when not a whole number that `rule` accepts. */
function wholeNumber(raw: string, rule: KeyRules['rate_limit' | 'expires_in_days']): number | undefined | null {
  if (raw === '') return undefined;
  if (!/^\d{1,9}$/.test(raw)) return null;
  const value = Number(raw);
  return rule.safeParse(value).success ? value : null;
}

/** "two minutes": a lifetime in whole minutes (rounded up), in words up to ten. */
function minutesInWords(ms: number): string {
  const minutes = Math.ceil(ms / 60_000);
  const word = ['one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten'][minutes - 1] ?? String(minutes);
  return `${word} minute${minutes === 1 ? '' : 's'}`;
}

/** The API's address as people reach this server: PUBLIC_URL, else as this request came (Host, or X-Forwarded-* from a proxy TRUST_PROXY names). */
function apiBaseUrl(ctx: WebContext, request: FastifyRequest): string {
  return `${ctx.config.publicUrl ?? `${request.protocol}://${request.host}`}${API_PREFIX}`;
}

/** A word as a POSIX shell reads it back unchanged: as it is when it holds nothing the shell treats specially, else single-quoted. */
function shellWord(value: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(value) ? value : `'${value.replaceAll("'", "'\\''")}'`;
}

/**
 * Beside the new key, shown with it once: `curl` lines to paste, with this key and this server's
 * address, that list its agents and send a first message (to the first agent, when there are
 * several: a message to a new session must then name one).
 */
function tryItPanel(token: string, apiBase: string, agents: readonly AgentView[]): SafeHtml {
  const auth = shellWord(`Authorization: Bearer ${token}`);
  const body = JSON.stringify({ ...(agents.length > 1 ? { agent_id: agents[0]!.agent_id } : {}), text: 'hello' });
  const lines = [
    `curl -s -H ${auth} ${shellWord(`${apiBase}/agents`)}`,
    `curl -s -H ${auth} -H 'Content-Type: application/json' \\\n     -d ${shellWord(body)} ${shellWord(`${apiBase}/messages`)}`,
  ].join('\n');
  return html`<h3 class="try-h" id="try-h">Try it</h3>
    <p class="small">List your agents and send a first message${agents.length > 1 ? html` (to ${agents[0]!.name})` : ''}: paste these lines into a terminal.${agents.length === 0 ? html` <a href="/agents">Create an agent</a> first: a message needs one.` : ''}</p>
    <div class="copy-block">
      <pre class="code-block" id="new-key-curl"><code>${lines}</code></pre>
      <div class="copy-row"><button type="button" class="btn btn-quiet btn-small" data-copy="#new-key-curl code" hidden>Copy<span class="sr-only"> the curl lines</span></button>
      <span class="small" role="status" data-copy-status></span></div>
    </div>`;
}

/** The account page's heading and tabs (the webhooks and channels pages show them too). */
export function accountHeader(tab: 'profile' | 'keys' | 'webhooks' | 'channels'): SafeHtml {
  return html`<h1>Account</h1>
    <nav class="tabs" aria-label="Account sections">
      <a href="/account"${tab === 'profile' ? html` aria-current="page"` : ''}>Profile</a>
      <a href="${KEYS_PATH}"${tab === 'keys' ? html` aria-current="page"` : ''}>API keys</a>
      <a href="/account/webhooks"${tab === 'webhooks' ? html` aria-current="page"` : ''}>Webhooks</a>
      <a href="/account/channels"${tab === 'channels' ? html` aria-current="page"` : ''}>Channels</a>
    </nav>`;
}

/** How many revoked keys the keys page lists, the most recently revoked first. */
export const REVOKED_KEYS_SHOWN = 20;

/** `newKey`: what the create form handed over (the key id, and the secret when it opened). */
async function keysPage(ctx: WebContext, limits: KeyLimits, request: FastifyRequest, reply: FastifyReply, session: WebSession, state: {
  newKey: { keyId: string; token: unknown } | null; form: KeyForm; errors: FieldErrors; status?: number; revoked?: string | undefined;
}) {
  const keys = await ctx.services.keys.list(session.userId);
  const revoked = state.revoked ? keys.find((k) => k.key_id === state.revoked) : undefined;
  let created: { token: string; key: KeyView } | null = null;
  let lost: KeyView | null = null;
  const key = state.newKey?.keyId ? keys.find((k) => k.key_id === state.newKey!.keyId) : undefined;
  const token = state.newKey?.token;
  if (key && typeof token === 'string' && parseBearer(`Bearer ${token}`)?.keyId === key.key_id) created = { token, key };
  // Ran out, or tampered with: say so rather than nothing.
  else if (key && key.status !== 'revoked' && ctx.clock.now() - Date.parse(key.created_at) < 15 * 60_000) lost = key;
  // The agents only for the new key's curl lines.
  const agents = created ? await ctx.services.agents.listForUser(session.userId) : [];
  const { labelMax, rateMin, daysMin, daysMax } = limits;
  const { config } = ctx;
  // Revoked keys only pile up: the page shows the most recently revoked few, so that it stays the
  // same size however many keys a person has revoked (5,000 keys made a 3.3 MB page).
  const revokedShown = new Set(keys.filter((k) => k.status === 'revoked')
    .sort((a, b) => (b.revoked_at ?? '').localeCompare(a.revoked_at ?? '')).slice(0, REVOKED_KEYS_SHOWN).map((k) => k.key_id));
  const listed = keys.filter((k) => k.status !== 'revoked' || revokedShown.has(k.key_id));
  const revokedHidden = keys.length - listed.length;
  return render(request, reply, {
    title: 'API keys', nav: 'keys', status: state.status ?? 200, error: (state.status ?? 200) >= 400,
    body: html`${accountHeader('keys')}
      ${revoked ? notice('ok', html`Key “${revoked.label}” (<code>${revoked.key_id}</code>) is revoked.`) : ''}
      ${lost ? notice('warn', html`Key “${lost.label}” (<code>${lost.key_id}</code>) was created, but its secret can no longer be shown: it is shown only once, within ${NEW_KEY_LIFETIME}. If you did not copy it, revoke this key and create another.`) : ''}
      ${state.errors.form ? notice('error', state.errors.form) : ''}
      ${created ? html`<section class="card secret" aria-labelledby="secret-h">
          <h2 id="secret-h">Your new key “${created.key.label}”</h2>
          ${notice('warn', html`<strong>Copy this key now.</strong> It is shown only this once: we keep only a hash of it, so nobody can show it to you again. If you lose it, revoke it and create a new one.`)}
          <div class="copy-row">
            <p class="secret-value" id="new-key" data-secret><code>${created.token}</code></p>
            <button type="button" class="btn" data-copy="#new-key code" hidden>Copy<span class="sr-only"> the key</span></button>
            <span class="small" role="status" data-copy-status></span>
          </div>
          <p class="muted small">Use it as <code>Authorization: Bearer &lt;key&gt;</code> against <code>${API_PREFIX}</code>.</p>
          ${tryItPanel(created.token, apiBaseUrl(ctx, request), agents)}
        </section>` : ''}
      <section class="card" aria-labelledby="create-h">
        <h2 id="create-h">Create a key</h2>
        <form method="post" action="${KEYS_PATH}" class="grid-form cols-3" novalidate>
          ${csrfField(request.csrfToken)}
          ${field({ name: 'label', label: 'Label', value: state.form.label, required: true, error: state.errors.label, hint: 'What the key is for, e.g. “billing backend”.', attrs: html`maxlength="${labelMax}"` })}
          ${field({ name: 'rate_limit', label: 'Rate limit (requests per minute)', type: 'number', value: state.form.rate_limit, error: state.errors.rate_limit,
            hint: `Default ${config.defaultRateLimitPerMinute}; at most ${config.maxRateLimitPerMinute}.`,
            attrs: html`min="${rateMin}" max="${config.maxRateLimitPerMinute}" inputmode="numeric"` })}
          ${field({ name: 'expires_in_days', label: 'Expires after (days)', type: 'number', value: state.form.expires_in_days, error: state.errors.expires_in_days,
            hint: `Default: never expires. At most ${daysMax} days.`, attrs: html`min="${daysMin}" max="${daysMax}" inputmode="numeric"` })}
          <div class="form-actions"><button type="submit" class="btn">Create key</button></div>
        </form>
      </section>
      <section class="card" aria-labelledby="list-h">
        <h2 id="list-h">Your keys</h2>
        ${keys.length === 0 ? html`<p class="muted">You have no API keys yet.</p>` : html`<div class="table-wrap"><table class="table">
          <caption class="sr-only">Your API keys</caption>
          <thead><tr><th scope="col">Label</th><th scope="col">Key id</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Expires</th><th scope="col">Rate limit</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>${listed.map((k) => html`<tr data-key-id="${k.key_id}">
            <td data-label="Label">${k.label}</td>
            <td data-label="Key id"><code>${k.key_id}</code></td>
            <td data-label="Status">${badge(k.status)}</td>
            <td data-label="Created">${time(k.created_at)}</td>
            <td data-label="Last used">${time(k.last_used_at, 'never')}</td>
            <td data-label="Expires">${time(k.expires_at, 'never')}</td>
            <td data-label="Rate limit">${k.rate_limit}/min</td>
            <td class="cell-action">${k.status === 'revoked' ? '' : html`<a class="btn btn-small btn-danger-quiet" href="${KEYS_PATH}/${k.key_id}/revoke">Revoke<span class="sr-only"> ${k.label}</span></a>`}</td>
          </tr>`)}</tbody></table></div>
          ${listed.some((k) => k.status === 'inactive') ? html`<p class="muted small" data-inactive-note>An <strong>inactive</strong> key was disabled by an operator: requests with it get 401 until they enable it again (<code>keys enable</code>). You can still revoke it.</p>` : ''}
          ${revokedHidden > 0 ? html`<p class="muted small">${revokedHidden} older revoked key${revokedHidden === 1 ? ' is' : 's are'} not shown: a revoked key can never be used again.</p>` : ''}`}
      </section>`,
  });
}
