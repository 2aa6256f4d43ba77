import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Problem } from '../../../domain/problems.ts';
import { CreateAgentSchema } from '../../../services/agents.ts';
import type { WebSession } from '../../../services/web-sessions.ts';
import { authed, formValue, render, type WebContext } from '../context.ts';
import { html, type SafeHtml } from '../html.ts';
import { csrfField, field, notice, ruleError } from '../layout.ts';

const NAME_RULE = CreateAgentSchema.shape.agent_name;

/**
 * What the plan allows, and the only way to more that this service has: the pro plan, which only
 * its operator gives (`users set-plan`; the command is not named here: it is not the reader's to run).
 */
function planLimitText(ctx: WebContext, plan: WebSession['plan']): SafeHtml {
  const limit = ctx.services.agents.agentLimitOf(plan);
  const counted = html`The ${plan} plan allows ${limit} agent${limit === 1 ? '' : 's'}, counting the agents in every workspace you own (agents that others share with you do not count).`;
  if (plan === 'pro') return counted;
  return html`${counted} The pro plan allows ${ctx.services.agents.agentLimitOf('pro')}: ask the operator of this service to move your account to it.`;
}

/** Agents: the ones the user can message (every workspace they belong to), and creating one. */
export function agentsRoutes(app: FastifyInstance, ctx: WebContext): void {
  app.get('/agents', authed<{ Querystring: { welcome?: string; created?: string } }>(async (request, reply, session) => {
    const message = request.query.welcome
      ? notice('ok', 'Welcome! Your account is ready. Create your first agent to start.')
      : null;
    return agentsPage(ctx, request, reply, session, { message, name: '', created: request.query.created });
  }));

  app.post('/agents', authed(async (request, reply, session) => {
    const name = formValue(request.body, 'agent_name');
    const workspaceId = formValue(request.body, 'workspace_id');
    // The service's own rules, said as sentences before it is asked.
    const nameProblem = ruleError(NAME_RULE, name, { tooShort: 'Name is required.', tooLong: `Name must be at most ${NAME_RULE.maxLength} characters.` });
    if (nameProblem) return agentsPage(ctx, request, reply, session, { message: null, name, nameError: nameProblem, status: 422 });
    try {
      const agent = await ctx.services.agents.create(session.userId, {
        agent_name: name, ...(workspaceId ? { workspace_id: workspaceId } : {}),
      });
      return reply.redirect(`/agents?created=${encodeURIComponent(agent.agent_id)}`, 303);
    } catch (error) {
      if (!(error instanceof Problem)) throw error;
      let message: SafeHtml | null = null;
      let nameError: string | undefined;
      let status = error.status;
      if (error.code === 'agent_limit_reached') {
        message = notice('warn', html`<strong>You have reached your plan's agent limit.</strong> ${planLimitText(ctx, session.plan)}`);
      } else if (error.code === 'validation_failed') {
        // The name was checked above: only a workspace id sent by hand is left to refuse.
        nameError = 'The agent could not be created. Check the form and try again.';
        status = 422;
      } else {
        message = notice('error', error.message);
      }
      return agentsPage(ctx, request, reply, session, { message, name, nameError, status, limitRefused: error.code === 'agent_limit_reached' });
    }
  }));
}

async function agentsPage(ctx: WebContext, request: FastifyRequest, reply: FastifyReply, session: WebSession, state: {
  message: SafeHtml | null; name: string; nameError?: string | undefined; status?: number; created?: string | undefined; limitRefused?: boolean;
}) {
  const [agents, workspaces, owned] = await Promise.all([
    ctx.services.agents.listForUser(session.userId),
    ctx.services.accounts.workspacesOf(session.userId),
    ctx.services.agents.ownedAgentCount(session.userId),
  ]);
  const names = new Map(workspaces.map((w) => [w.workspace_id, w.name]));
  const canCreateIn = workspaces.filter((w) => w.role === 'owner' || w.role === 'admin');
  const limit = ctx.services.agents.agentLimitOf(session.plan);
  const atLimit = owned >= limit;
  const created = state.created ? agents.find((a) => a.agent_id === state.created) : undefined;
  return render(request, reply, {
    title: 'Agents', nav: 'agents', status: state.status ?? 200, error: (state.status ?? 200) >= 400,
    body: html`<h1>Agents</h1>
      ${state.message}
      ${created ? notice('ok', html`Agent “${created.name}” is ready. <a href="/chat?agent=${created.agent_id}">Chat with it</a> or <a href="/account/keys">create an API key</a> to call it.`) : ''}
      <section class="card" aria-labelledby="agents-h">
        <h2 id="agents-h">Your agents</h2>
        ${agents.length === 0 ? html`<p class="muted">No agents yet.</p>` : html`<div class="table-wrap"><table class="table">
          <caption class="sr-only">Agents you can message</caption>
          <thead><tr><th scope="col">Name</th><th scope="col">Agent id</th><th scope="col">Workspace</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>${agents.map((a) => html`<tr>
            <td data-label="Name">${a.name}</td>
            <td data-label="Agent id"><code>${a.agent_id}</code></td>
            <td data-label="Workspace"><span>${names.get(a.workspace_id) ?? a.workspace_id} <code class="muted">${a.workspace_id}</code></span></td>
            <td class="cell-action"><a class="btn btn-small btn-quiet" href="/chat?agent=${a.agent_id}">Chat<span class="sr-only"> with ${a.name}</span></a></td>
          </tr>`)}</tbody></table></div>`}
        <p class="muted small">Plan: <strong>${session.plan}</strong>, ${owned} of ${limit} agent${limit === 1 ? '' : 's'} used (agents in workspaces you own count).</p>
      </section>
      <section class="card" aria-labelledby="new-agent-h">
        <h2 id="new-agent-h">Create an agent</h2>
        ${atLimit && !state.limitRefused ? notice('info', html`You have ${owned} of ${limit} agent${limit === 1 ? '' : 's'}, so you cannot create another. ${planLimitText(ctx, session.plan)}`) : ''}
        ${!atLimit && limit - owned <= 1 ? html`<p class="muted small" id="agent-limit-note">${owned === 0 && limit === 1 ? 'This will be your only agent' : 'This will be your last agent'} on the ${session.plan} plan: once it is created, this form is switched off. ${planLimitText(ctx, session.plan)}</p>` : ''}
        <form method="post" action="/agents" class="grid-form cols-2" novalidate>
          ${csrfField(request.csrfToken)}
          <fieldset class="contents"${atLimit ? html` disabled` : ''}>
            <legend class="sr-only">New agent</legend>
            ${field({ name: 'agent_name', label: 'Name', value: state.name, required: true, error: state.nameError, hint: `${NAME_RULE.minLength} to ${NAME_RULE.maxLength} characters.`, attrs: html`maxlength="${NAME_RULE.maxLength}"` })}
            <div class="field">
              <label for="f-workspace">Workspace</label>
              <select id="f-workspace" name="workspace_id" aria-describedby="f-workspace-hint">
                ${canCreateIn.map((w) => html`<option value="${w.workspace_id}">${w.name} (${w.role})</option>`)}
              </select>
              <p class="hint" id="f-workspace-hint">Workspaces where you are an owner or admin.</p>
            </div>
            <div class="form-actions"><button type="submit" class="btn">Create agent</button></div>
          </fieldset>
        </form>
      </section>`,
  });
}
