import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { parseBearer } from '../../../domain/api-key.ts';
import { Problem } from '../../../domain/problems.ts';
import type { WebSession } from '../../../services/web-sessions.ts';
import type { KeyView } from '../../../services/keys.ts';
import { authed, cookieOptions, errorPage, FLASH_KEY_COOKIE, formValue, render, type WebContext } from '../context.ts';
import { html, type SafeHtml } from '../html.ts';
import { badge, csrfField, field, notice, time, type FieldErrors } from '../layout.ts';

const KEYS_PATH = '/account/keys';
// The new key travels from the create form to the page that shows it in a session cookie
// (HttpOnly, never written to disk by the browser) that this page clears as it reads it: shown
// once, gone on reload. The cookie holds `<key id>.<sealed secret>`: the secret is sealed with
// a key that only this process knows (see ../flash.ts), bound to the user, and good for two
// minutes. The server keeps only the secret's SHA-256 digest, as for every key.
const FLASH_TTL_MS = 120_000;
const FLASH_PURPOSE = 'new-key';
const LABEL_MAX = 100;
const EXPIRES_MAX_DAYS = 3650;
const FIELD_NAMES: Record<string, string> = { label: 'Label', rate_limit: 'Rate limit', expires_in_days: 'Expiry' };

interface KeyForm {
  label: string;
  rate_limit: string;
  expires_in_days: string;
}

const EMPTY_FORM: KeyForm = { label: '', rate_limit: '', expires_in_days: '' };

/** The account page and its API Keys tab: create, list, revoke (with a confirmation step). */
export function keysRoutes(app: FastifyInstance, ctx: WebContext): void {
  app.get('/account', authed(async (request, reply, session) => {
    const workspaces = await ctx.sessions.workspacesOf(session.userId);
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
    const flash = request.cookies[FLASH_KEY_COOKIE];
    let created: { token: string; key: KeyView } | null = null;
    let lost: KeyView | null = null;
    if (flash) {
      reply.clearCookie(FLASH_KEY_COOKIE, cookieOptions(request, { path: KEYS_PATH }));
      const dot = flash.indexOf('.');
      const keyId = flash.slice(0, Math.max(0, dot));
      const token = ctx.sealer.open(FLASH_PURPOSE, session.userId, flash.slice(dot + 1));
      const key = keyId ? (await ctx.services.keys.list(session.userId)).find((k) => k.key_id === keyId) : undefined;
      if (key && typeof token === 'string' && parseBearer(`Bearer ${token}`)?.keyId === key.key_id) created = { token, key };
      // Ran out, or sealed by another instance (or before a restart): say so rather than nothing.
      else if (key && key.status !== 'revoked' && Date.now() - Date.parse(key.created_at) < 15 * 60_000) lost = key;
    }
    return keysPage(ctx, request, reply, session, { created, lost, form: EMPTY_FORM, errors: {}, revoked: request.query.revoked });
  }));

  app.post(KEYS_PATH, authed(async (request, reply, session) => {
    const form: KeyForm = {
      label: formValue(request.body, 'label'),
      rate_limit: formValue(request.body, 'rate_limit').trim(),
      expires_in_days: formValue(request.body, 'expires_in_days').trim(),
    };
    const errors: FieldErrors = {};
    const { config } = ctx;
    const label = form.label.trim();
    if (!label) errors.label = 'Label is required, so that you can tell your keys apart.';
    else if (label.length > LABEL_MAX) errors.label = `Label must be at most ${LABEL_MAX} characters.`;
    const rateLimit = wholeNumber(form.rate_limit, 1, config.maxRateLimitPerMinute);
    if (rateLimit === null) {
      errors.rate_limit = `Rate limit must be a whole number of requests per minute from 1 to ${config.maxRateLimitPerMinute}, or empty for the default (${config.defaultRateLimitPerMinute}).`;
    }
    const expires = wholeNumber(form.expires_in_days, 1, EXPIRES_MAX_DAYS);
    if (expires === null) errors.expires_in_days = `Expiry must be a whole number of days from 1 to ${EXPIRES_MAX_DAYS}, or empty for a key that never expires.`;
    if (Object.keys(errors).length === 0) {
      try {
        const { key, token } = await ctx.services.keys.create(session.userId, {
          label: form.label,
          ...(rateLimit !== undefined && rateLimit !== null ? { rate_limit: rateLimit } : {}),
          ...(expires !== undefined && expires !== null ? { expires_in_days: expires } : {}),
        });
        const sealed = ctx.sealer.seal(FLASH_PURPOSE, session.userId, token, FLASH_TTL_MS);
        reply.setCookie(FLASH_KEY_COOKIE, `${key.key_id}.${sealed}`, cookieOptions(request, { path: KEYS_PATH }));
        return reply.redirect(KEYS_PATH, 303);
      } catch (error) {
        if (!(error instanceof Problem) || error.code !== 'validation_failed') throw error;
        // Checked above already; should the service's rules ever be stricter, still a sentence.
        for (const e of (error.extra.errors as { path: string; message: string }[] | undefined) ?? []) {
          const name = FIELD_NAMES[e.path];
          if (name) errors[e.path] ??= `${name} is not valid: check it and try again.`;
          else errors.form ??= 'The key could not be created. Check the form and try again.';
        }
      }
    }
    return keysPage(ctx, request, reply, session, { created: null, form, errors, status: 422 });
  }));

  app.get(`${KEYS_PATH}/:keyId/revoke`, authed<{ Params: { keyId: string } }>(async (request, reply, session) => {
    const keys = await ctx.services.keys.list(session.userId);
    const key = keys.find((k) => k.key_id === request.params.keyId);
    if (!key) return errorPage(request, reply, 404, 'Key not found', 'You have no API key with this id.');
    return render(request, reply, {
      title: 'Revoke key', nav: 'keys', narrow: true,
      body: html`<section class="card">
        <h1>Revoke “${key.label}”?</h1>
        ${key.status === 'revoked'
          ? html`<p>This key is already revoked.</p><p><a class="btn btn-quiet" href="${KEYS_PATH}">Back to API keys</a></p>`
          : html`<p>Key <code>${key.key_id}</code> will stop working at once. Every request made with it will get <code>401 Unauthorized</code>. This cannot be undone.</p>
            <form method="post" action="${KEYS_PATH}/${key.key_id}/revoke" class="row">
              ${csrfField(request.csrfToken)}
              <button type="submit" class="btn btn-danger">Revoke key</button>
              <a class="btn btn-quiet" href="${KEYS_PATH}">Cancel</a>
            </form>`}
      </section>`,
    });
  }));

  app.post(`${KEYS_PATH}/:keyId/revoke`, authed<{ Params: { keyId: string } }>(async (request, reply, session) => {
    await ctx.services.keys.revoke(session.userId, request.params.keyId); // another's key: Problem not_found → 404 page
    return reply.redirect(`${KEYS_PATH}?revoked=${encodeURIComponent(request.params.keyId)}`, 303);
  }));
}

/** undefined when left empty (the default applies), null when not a whole number in [min, max]. */
function wholeNumber(raw: string, min: number, max: number): number | undefined | null {
  if (raw === '') return undefined;
  if (!/^\d{1,9}$/.test(raw)) return null;
  const value = Number(raw);
  return value >= min && value <= max ? value : null;
}

function accountHeader(tab: 'profile' | 'keys'): SafeHtml {
  return html`<h1>Account</h1>
    <nav class="tabs" aria-label="Account sections">
      <a href="/account"${tab === 'profile' ? html` aria-current="page"` : ''}>Profile</a>
      <a href="${KEYS_PATH}"${tab === 'keys' ? html` aria-current="page"` : ''}>API keys</a>
    </nav>`;
}

async function keysPage(ctx: WebContext, request: FastifyRequest, reply: FastifyReply, session: WebSession, state: {
  created: { token: string; key: KeyView } | null; lost?: KeyView | null; form: KeyForm; errors: FieldErrors; status?: number; revoked?: string | undefined;
}) {
  const keys = await ctx.services.keys.list(session.userId);
  const revoked = state.revoked ? keys.find((k) => k.key_id === state.revoked) : undefined;
  const { config } = ctx;
  return render(request, reply, {
    title: 'API keys', nav: 'keys', status: state.status ?? 200,
    body: html`${accountHeader('keys')}
      ${revoked ? notice('ok', html`Key “${revoked.label}” (<code>${revoked.key_id}</code>) is revoked.`) : ''}
      ${state.lost ? notice('warn', html`Key “${state.lost.label}” (<code>${state.lost.key_id}</code>) was created, but its secret can no longer be shown: it is shown only once, within two minutes. If you did not copy it, revoke this key and create another.`) : ''}
      ${state.errors.form ? notice('error', state.errors.form) : ''}
      ${state.created ? html`<section class="card secret" aria-labelledby="secret-h">
          <h2 id="secret-h">Your new key “${state.created.key.label}”</h2>
          ${notice('warn', html`<strong>Copy this key now.</strong> It is shown only this once: we keep only a hash of it, so nobody can show it to you again. If you lose it, revoke it and create a new one.`)}
          <div class="copy-row">
            <label for="new-key" class="sr-only">New API key</label>
            <input id="new-key" class="mono" type="text" readonly value="${state.created.token}" data-secret>
            <button type="button" class="btn" data-copy="#new-key">Copy</button>
          </div>
          <p class="muted small">Use it as <code>Authorization: Bearer &lt;key&gt;</code> against <code>/api/v1/api-channel</code>.</p>
        </section>` : ''}
      <section class="card" aria-labelledby="create-h">
        <h2 id="create-h">Create a key</h2>
        <form method="post" action="${KEYS_PATH}" class="grid-form cols-3" novalidate>
          ${csrfField(request.csrfToken)}
          ${field({ name: 'label', label: 'Label', value: state.form.label, required: true, error: state.errors.label, hint: 'What the key is for, e.g. “billing backend”.', attrs: html`maxlength="${LABEL_MAX}"` })}
          ${field({ name: 'rate_limit', label: 'Rate limit (requests per minute)', type: 'number', value: state.form.rate_limit, error: state.errors.rate_limit,
            hint: `Default ${config.defaultRateLimitPerMinute}; at most ${config.maxRateLimitPerMinute}.`,
            attrs: html`min="1" max="${config.maxRateLimitPerMinute}" inputmode="numeric" placeholder="${config.defaultRateLimitPerMinute}"` })}
          ${field({ name: 'expires_in_days', label: 'Expires after (days)', type: 'number', value: state.form.expires_in_days, error: state.errors.expires_in_days,
            hint: `Default: never expires. At most ${EXPIRES_MAX_DAYS} days.`, attrs: html`min="1" max="${EXPIRES_MAX_DAYS}" inputmode="numeric" placeholder="never"` })}
          <div class="form-actions"><button type="submit" class="btn">Create key</button></div>
        </form>
      </section>
      <section class="card" aria-labelledby="list-h">
        <h2 id="list-h">Your keys</h2>
        ${keys.length === 0 ? html`<p class="muted">You have no API keys yet.</p>` : html`<div class="table-wrap"><table class="table">
          <caption class="sr-only">Your API keys</caption>
          <thead><tr><th scope="col">Label</th><th scope="col">Key id</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Expires</th><th scope="col">Rate limit</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>${keys.map((k) => html`<tr data-key-id="${k.key_id}">
            <td data-label="Label">${k.label}</td>
            <td data-label="Key id"><code>${k.key_id}</code></td>
            <td data-label="Status">${badge(k.status)}</td>
            <td data-label="Created">${time(k.created_at)}</td>
            <td data-label="Last used">${time(k.last_used_at, 'never')}</td>
            <td data-label="Expires">${time(k.expires_at, 'never')}</td>
            <td data-label="Rate limit">${k.rate_limit}/min</td>
            <td class="cell-action">${k.status === 'revoked' ? '' : html`<a class="btn btn-small btn-danger-quiet" href="${KEYS_PATH}/${k.key_id}/revoke">Revoke<span class="sr-only"> ${k.label}</span></a>`}</td>
          </tr>`)}</tbody></table></div>`}
      </section>`,
  });
}
