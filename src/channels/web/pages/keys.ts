import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { parseBearer } from '../../../domain/api-key.ts';
import { Problem } from '../../../domain/problems.ts';
import type { WebSession } from '../../../services/web-sessions.ts';
import type { KeyView } from '../../../services/keys.ts';
import { authed, cookieOptions, errorPage, FLASH_KEY_COOKIE, formValue, render, type WebContext } from '../context.ts';
import { html, type SafeHtml } from '../html.ts';
import { badge, csrfField, field, notice, time, type FieldErrors } from '../layout.ts';

const KEYS_PATH = '/account/keys';
// The new key travels from the create form to the page that shows it in a short-lived,
// HttpOnly cookie that this page clears as it reads it: shown once, gone on reload, and
// kept nowhere on the server.
const FLASH_MAX_AGE_S = 120;

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
      title: 'Account', nav: 'keys',
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
    if (flash) {
      reply.clearCookie(FLASH_KEY_COOKIE, cookieOptions(request, { path: KEYS_PATH }));
      const parsed = parseBearer(`Bearer ${flash}`);
      const keys = await ctx.services.keys.list(session.userId);
      const key = parsed ? keys.find((k) => k.key_id === parsed.keyId) : undefined;
      if (key) created = { token: flash, key };
    }
    return keysPage(ctx, request, reply, session, { created, form: EMPTY_FORM, errors: {}, revoked: request.query.revoked });
  }));

  app.post(KEYS_PATH, authed(async (request, reply, session) => {
    const form: KeyForm = {
      label: formValue(request.body, 'label'),
      rate_limit: formValue(request.body, 'rate_limit').trim(),
      expires_in_days: formValue(request.body, 'expires_in_days').trim(),
    };
    const errors: FieldErrors = {};
    const rateLimit = wholeNumber(form.rate_limit, 'rate_limit', errors);
    const expires = wholeNumber(form.expires_in_days, 'expires_in_days', errors);
    if (!form.label.trim()) errors.label = 'A label is required, so that you can tell your keys apart.';
    if (Object.keys(errors).length === 0) {
      try {
        const { token } = await ctx.services.keys.create(session.userId, {
          label: form.label,
          ...(rateLimit !== undefined ? { rate_limit: rateLimit } : {}),
          ...(expires !== undefined ? { expires_in_days: expires } : {}),
        });
        reply.setCookie(FLASH_KEY_COOKIE, token, cookieOptions(request, { path: KEYS_PATH, maxAge: FLASH_MAX_AGE_S }));
        return reply.redirect(KEYS_PATH, 303);
      } catch (error) {
        if (!(error instanceof Problem) || error.code !== 'validation_failed') throw error;
        for (const e of (error.extra.errors as { path: string; message: string }[] | undefined) ?? []) errors[e.path] ??= e.message;
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

function wholeNumber(raw: string, name: string, errors: FieldErrors): number | undefined {
  if (raw === '') return undefined;
  if (!/^\d{1,9}$/.test(raw)) {
    errors[name] = 'Enter a whole number, or leave it empty for the default.';
    return undefined;
  }
  return Number(raw);
}

function accountHeader(tab: 'profile' | 'keys'): SafeHtml {
  return html`<h1>Account</h1>
    <nav class="tabs" aria-label="Account sections">
      <a href="/account"${tab === 'profile' ? html` aria-current="page"` : ''}>Profile</a>
      <a href="${KEYS_PATH}"${tab === 'keys' ? html` aria-current="page"` : ''}>API keys</a>
    </nav>`;
}

async function keysPage(ctx: WebContext, request: FastifyRequest, reply: FastifyReply, session: WebSession, state: {
  created: { token: string; key: KeyView } | null; form: KeyForm; errors: FieldErrors; status?: number; revoked?: string | undefined;
}) {
  const keys = await ctx.services.keys.list(session.userId);
  const revoked = state.revoked ? keys.find((k) => k.key_id === state.revoked) : undefined;
  const { config } = ctx;
  return render(request, reply, {
    title: 'API keys', nav: 'keys', status: state.status ?? 200,
    body: html`${accountHeader('keys')}
      ${revoked ? notice('ok', html`Key “${revoked.label}” (<code>${revoked.key_id}</code>) is revoked.`) : ''}
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
        <form method="post" action="${KEYS_PATH}" class="grid-form" novalidate>
          ${csrfField(request.csrfToken)}
          ${field({ name: 'label', label: 'Label', value: state.form.label, required: true, error: state.errors.label, hint: 'What the key is for, e.g. “billing backend”.', attrs: html`maxlength="100"` })}
          ${field({ name: 'rate_limit', label: 'Rate limit (requests per minute)', type: 'number', value: state.form.rate_limit, error: state.errors.rate_limit,
            hint: `Default ${config.defaultRateLimitPerMinute}; at most ${config.maxRateLimitPerMinute}.`,
            attrs: html`min="1" max="${config.maxRateLimitPerMinute}" inputmode="numeric" placeholder="${config.defaultRateLimitPerMinute}"` })}
          ${field({ name: 'expires_in_days', label: 'Expires after (days)', type: 'number', value: state.form.expires_in_days, error: state.errors.expires_in_days,
            hint: 'Default: never expires. At most 3650 days.', attrs: html`min="1" max="3650" inputmode="numeric" placeholder="never"` })}
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
