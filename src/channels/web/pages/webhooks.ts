import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { FEED_EVENT_TYPES } from '../../../domain/feed-events.ts';
import { Problem } from '../../../domain/problems.ts';
import { WEBHOOK_SECRET_PREFIX } from '../../../domain/webhooks.ts';
import type { WebSession } from '../../../services/web-sessions.ts';
import type { DeliveryView, EndpointView } from '../../../services/webhooks/index.ts';
import { authed, errorPage, formValue, render, type WebContext } from '../context.ts';
import { FLASH_WEBHOOK_COOKIE } from '../cookies.ts';
import { setFlash, takeFlash, type Flash } from '../flash.ts';
import { html, type SafeHtml } from '../html.ts';
import { csrfField, field, notice, time, type FieldErrors } from '../layout.ts';
import { accountHeader } from './keys.ts';

const WEBHOOKS_PATH = '/account/webhooks';
// The new endpoint's secret travels to the page that shows it once as a new key's does (see keys.ts).
const NEW_SECRET_FLASH: Flash = { cookie: FLASH_WEBHOOK_COOKIE, path: WEBHOOKS_PATH, purpose: 'new-webhook', ttlMs: 120_000 };

type Params = { Params: { id: string } };

/** The form's event types: the boxes ticked (every type when none is). */
function eventsOf(body: unknown): string[] {
  const value = body && typeof body === 'object' ? (body as Record<string, unknown>).events : undefined;
  const list = Array.isArray(value) ? value : value === undefined ? [] : [value];
  return list.filter((type): type is string => typeof type === 'string').slice(0, FEED_EVENT_TYPES.length * 2);
}

/** Account → Webhooks (contract §9.5): add, list, disable/enable, delete; an endpoint's recent deliveries, sent again on demand. */
export function webhooksRoutes(app: FastifyInstance, ctx: WebContext): void {
  const webhooks = ctx.services.webhooks;

  app.get(WEBHOOKS_PATH, authed(async (request, reply, session) => {
    const flash = takeFlash(ctx.sealer, request, reply, NEW_SECRET_FLASH, session.userId);
    const created = flash && typeof flash.value === 'string' && flash.value.startsWith(WEBHOOK_SECRET_PREFIX)
      ? { id: flash.clear, secret: flash.value } : null;
    return listPage(ctx, request, reply, session, { created, url: '', events: [], errors: {} });
  }));

  app.post(WEBHOOKS_PATH, authed(async (request, reply, session) => {
    const url = formValue(request.body, 'url');
    const events = eventsOf(request.body);
    try {
      const { endpoint, secret } = await webhooks.create(session.userId, { url, events });
      setFlash(ctx.sealer, request, reply, NEW_SECRET_FLASH, session.userId, secret, endpoint.id);
      return reply.redirect(WEBHOOKS_PATH, 303);
    } catch (error) {
      if (!(error instanceof Problem) || error.code !== 'validation_failed') throw error;
      const errors: FieldErrors = {};
      for (const { path, message } of error.extra.errors as Array<{ path: string; message: string }>) {
        (errors as Record<string, string>)[path] = `${path === 'url' ? 'URL' : 'Events'} ${message}.`;
      }
      return listPage(ctx, request, reply, session, { created: null, url, events, errors, status: 422 });
    }
  }));

  app.get(`${WEBHOOKS_PATH}/:id`, authed<Params>(async (request, reply, session) => {
    const endpoint = await webhooks.find(session.userId, request.params.id);
    if (!endpoint) return notFound(request, reply);
    const deliveries = await webhooks.deliveries(session.userId, endpoint.id);
    return render(request, reply, {
      title: 'Webhook endpoint', nav: 'account',
      body: html`${accountHeader('webhooks')}${endpointCard(request, endpoint)}${deliveriesCard(request, endpoint, deliveries)}`,
    });
  }));

  for (const [action, enabled] of [['enable', true], ['disable', false]] as const) {
    app.post(`${WEBHOOKS_PATH}/:id/${action}`, authed<Params>(async (request, reply, session) => {
      await webhooks.setEnabled(session.userId, request.params.id, enabled); // another's: not_found → 404 page
      return reply.redirect(`${WEBHOOKS_PATH}/${request.params.id}`, 303);
    }));
  }

  app.post(`${WEBHOOKS_PATH}/:id/delete`, authed<Params>(async (request, reply, session) => {
    await webhooks.delete(session.userId, request.params.id);
    return reply.redirect(WEBHOOKS_PATH, 303);
  }));

  app.post(`${WEBHOOKS_PATH}/:id/deliveries/:deliveryId/resend`, authed<{ Params: { id: string; deliveryId: string } }>(async (request, reply, session) => {
    const deliveryId = /^\d{1,15}$/.test(request.params.deliveryId) ? Number(request.params.deliveryId) : Number.NaN;
    await webhooks.resend(session.userId, request.params.id, deliveryId);
    return reply.redirect(`${WEBHOOKS_PATH}/${request.params.id}`, 303);
  }));
}

function notFound(request: FastifyRequest, reply: FastifyReply) {
  return errorPage(request, reply, 404, 'Webhook endpoint not found', 'You have no webhook endpoint with this id.');
}

// Styled as keys' active and inactive badges are, worded as the CLI says it.
const statusBadge = (endpoint: EndpointView): SafeHtml => html`<span class="badge badge-${endpoint.status === 'enabled' ? 'active' : 'inactive'}">${endpoint.status}</span>`;

async function listPage(ctx: WebContext, request: FastifyRequest, reply: FastifyReply, session: WebSession, state: {
  created: { id: string; secret: string } | null; url: string; events: string[]; errors: FieldErrors; status?: number;
}) {
  const endpoints = await ctx.services.webhooks.list(session.userId);
  const created = state.created && endpoints.some((e) => e.id === state.created!.id) ? state.created : null;
  const errors = state.errors as FieldErrors & { events?: string };
  const allowPrivate = ctx.services.webhooks.allowPrivateUrls;
  return render(request, reply, {
    title: 'Webhooks', nav: 'account', status: state.status ?? 200, error: (state.status ?? 200) >= 400,
    body: html`${accountHeader('webhooks')}
      ${created ? html`<section class="card secret" aria-labelledby="secret-h">
          <h2 id="secret-h">Signing secret of <code>${created.id}</code></h2>
          ${notice('warn', html`<strong>Copy this secret now.</strong> It is shown only this once. Verify each delivery's <code>webhook-signature</code> with it (any Standard Webhooks library takes it as it is).`)}
          <div class="copy-row">
            <p class="secret-value" id="new-secret" data-secret><code>${created.secret}</code></p>
            <button type="button" class="btn" data-copy="#new-secret code" hidden>Copy<span class="sr-only"> the secret</span></button>
            <span class="small" role="status" data-copy-status></span>
          </div>
        </section>` : ''}
      <section class="card" aria-labelledby="add-h">
        <h2 id="add-h">Add an endpoint</h2>
        <form method="post" action="${WEBHOOKS_PATH}" novalidate>
          ${csrfField(request.csrfToken)}
          ${field({ name: 'url', label: 'URL', value: state.url, required: true, error: errors.url,
            hint: allowPrivate ? 'Where each event is POSTed.' : 'Where each event is POSTed: an https:// URL on a public address.', attrs: html`maxlength="2048" inputmode="url" autocomplete="off" spellcheck="false"` })}
          <fieldset class="field${errors.events ? ' has-error' : ''}"><legend>Events <span class="muted">(none ticked: every type)</span></legend>
            ${FEED_EVENT_TYPES.map((type) => html`<label class="check"><input type="checkbox" name="events" value="${type}"${state.events.includes(type) ? html` checked` : ''}> <code>${type}</code></label> `)}
            ${errors.events ? html`<p class="error">${errors.events}</p>` : ''}
          </fieldset>
          <div class="form-actions"><button type="submit" class="btn">Add endpoint</button></div>
        </form>
      </section>
      <section class="card" aria-labelledby="list-h">
        <h2 id="list-h">Your endpoints</h2>
        ${endpoints.length === 0 ? html`<p class="muted">You have no webhook endpoints yet.</p>` : html`<div class="table-wrap"><table class="table">
          <caption class="sr-only">Your webhook endpoints</caption>
          <thead><tr><th scope="col">URL</th><th scope="col">Status</th><th scope="col">Events</th><th scope="col">Last delivery</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>${endpoints.map((e) => html`<tr data-endpoint-id="${e.id}">
            <td data-label="URL"><code>${e.url}</code></td>
            <td data-label="Status">${statusBadge(e)}${e.disabled_reason ? html`<p class="small muted" data-disabled-reason>${e.disabled_reason}</p>` : ''}</td>
            <td data-label="Events">${e.events.length === FEED_EVENT_TYPES.length ? 'all' : e.events.join(', ')}</td>
            <td data-label="Last delivery">${e.last_attempt_at ? html`${time(e.last_attempt_at)} <span class="muted">(${e.last_outcome})</span>` : 'never'}</td>
            <td class="cell-action"><a class="btn btn-small" href="${WEBHOOKS_PATH}/${e.id}">Deliveries<span class="sr-only"> of ${e.url}</span></a></td>
          </tr>`)}</tbody></table></div>`}
      </section>`,
  });
}

function endpointCard(request: FastifyRequest, endpoint: EndpointView): SafeHtml {
  const action = (name: string, label: string, style: string) => html`<form method="post" action="${WEBHOOKS_PATH}/${endpoint.id}/${name}" class="inline">
      ${csrfField(request.csrfToken)}<button type="submit" class="btn ${style}">${label}</button></form>`;
  return html`<section class="card" aria-labelledby="endpoint-h">
    <h2 id="endpoint-h">Endpoint <code>${endpoint.id}</code></h2>
    ${endpoint.disabled_reason ? notice('warn', html`<span data-disabled-reason>${endpoint.disabled_reason}</span> Enable it to resume its deliveries.`) : ''}
    <dl class="facts">
      <dt>URL</dt><dd><code>${endpoint.url}</code></dd>
      <dt>Status</dt><dd>${statusBadge(endpoint)}</dd>
      <dt>Events</dt><dd>${endpoint.events.join(', ')}</dd>
      <dt>Last delivery</dt><dd>${endpoint.last_attempt_at ? html`${time(endpoint.last_attempt_at)} (${endpoint.last_outcome})` : 'never'}</dd>
    </dl>
    <div class="row">
      ${endpoint.status === 'enabled' ? action('disable', 'Disable', 'btn-quiet') : action('enable', 'Enable', '')}
      ${action('delete', 'Delete endpoint', 'btn-danger')}
      <a class="btn btn-quiet" href="${WEBHOOKS_PATH}">Back to webhooks</a>
    </div>
  </section>`;
}

function deliveriesCard(request: FastifyRequest, endpoint: EndpointView, deliveries: DeliveryView[]): SafeHtml {
  return html`<section class="card" aria-labelledby="deliveries-h">
    <h2 id="deliveries-h">Recent deliveries</h2>
    ${deliveries.length === 0 ? html`<p class="muted">No deliveries yet.</p>` : html`<div class="table-wrap"><table class="table">
      <caption class="sr-only">Recent deliveries to this endpoint, newest first</caption>
      <thead><tr><th scope="col">Event</th><th scope="col">State</th><th scope="col">Status code</th><th scope="col">Duration</th><th scope="col">Attempts</th><th scope="col">Created</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${deliveries.map((d) => html`<tr data-delivery-id="${d.id}" data-state="${d.state}">
        <td data-label="Event"><code>${d.event_id}</code> ${d.event_type}</td>
        <td data-label="State">${d.state}${d.state === 'pending' && d.attempts > 0 ? html` <span class="small muted">(next ${time(d.next_attempt_at)})</span>` : ''}</td>
        <td data-label="Status code" data-status>${d.last_status ?? d.last_error ?? '—'}</td>
        <td data-label="Duration">${d.last_duration_ms === null ? '—' : `${d.last_duration_ms} ms`}</td>
        <td data-label="Attempts">${d.attempts}</td>
        <td data-label="Created">${time(d.created_at)}</td>
        <td class="cell-action"><form method="post" action="${WEBHOOKS_PATH}/${endpoint.id}/deliveries/${d.id}/resend" class="inline">
          ${csrfField(request.csrfToken)}<button type="submit" class="btn btn-small">Send again<span class="sr-only"> ${d.event_id}</span></button></form></td>
      </tr>`)}</tbody></table></div>`}
  </section>`;
}
