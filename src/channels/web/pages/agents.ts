import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Problem } from '../../../domain/problems.ts';
import type { WebSession } from '../../../services/web-sessions.ts';
import { authed, formValue, render, type WebContext } from '../context.ts';
import { html, type SafeHtml } from '../html.ts';
import { csrfField, field, notice } from '../layout.ts';

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
        const limit = session.plan === 'pro' ? ctx.config.proAgentLimit : ctx.config.freeAgentLimit;
        message = notice('warn', html`<strong>You have reached your plan's agent limit.</strong>
          The ${session.plan} plan allows ${limit} agent${limit === 1 ? '' : 's'}, counting the agents in every workspace you own.
          Agents that others share with you do not count. To add one, delete an agent you no longer need or move to a bigger plan.`);
      } else if (error.code === 'validation_failed') {
        const issue = ((error.extra.errors as { path: string; message: string }[] | undefined) ?? []).find((e) => e.path === 'agent_name');
        nameError = issue ? `The name ${issue.message}.` : error.message;
        status = 422;
      } else {
        message = notice('error', error.message);
      }
      return agentsPage(ctx, request, reply, session, { message, name, nameError, status });
    }
  }));
}

async function agentsPage(ctx: WebContext, request: FastifyRequest, reply: FastifyReply, session: WebSession, state: {
  message: SafeHtml | null; name: string; nameError?: string | undefined; status?: number; created?: string | undefined;
}) {
  const [agents, workspaces, owned] = await Promise.all([
    ctx.services.agents.listForUser(session.userId),
    ctx.sessions.workspacesOf(session.userId),
    ctx.sessions.ownedAgentCount(session.userId),
  ]);
  const names = new Map(workspaces.map((w) => [w.workspace_id, w.name]));
  const canCreateIn = workspaces.filter((w) => w.role === 'owner' || w.role === 'admin');
  const limit = session.plan === 'pro' ? ctx.config.proAgentLimit : ctx.config.freeAgentLimit;
  const atLimit = owned >= limit;
  const created = state.created ? agents.find((a) => a.agent_id === state.created) : undefined;
  return render(request, reply, {
    title: 'Agents', nav: 'agents', status: state.status ?? 200,
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
            <td data-label="Workspace">${names.get(a.workspace_id) ?? a.workspace_id} <code class="muted">${a.workspace_id}</code></td>
            <td class="cell-action"><a class="btn btn-small btn-quiet" href="/chat?agent=${a.agent_id}">Chat<span class="sr-only"> with ${a.name}</span></a></td>
          </tr>`)}</tbody></table></div>`}
        <p class="muted small">Plan: <strong>${session.plan}</strong>, ${owned} of ${limit} agent${limit === 1 ? '' : 's'} used (agents in workspaces you own count).</p>
      </section>
      <section class="card" aria-labelledby="new-agent-h">
        <h2 id="new-agent-h">Create an agent</h2>
        ${atLimit ? html`<p class="notice notice-info">Your ${session.plan} plan allows ${limit} agent${limit === 1 ? '' : 's'} and you have ${owned}; creating another will be refused.</p>` : ''}
        <form method="post" action="/agents" class="grid-form" novalidate>
          ${csrfField(request.csrfToken)}
          ${field({ name: 'agent_name', label: 'Name', value: state.name, required: true, error: state.nameError, hint: '1 to 100 characters.', attrs: html`maxlength="100"` })}
          <div class="field">
            <label for="f-workspace">Workspace</label>
            <select id="f-workspace" name="workspace_id">
              ${canCreateIn.map((w) => html`<option value="${w.workspace_id}">${w.name} (${w.role})</option>`)}
            </select>
            <p class="hint">Workspaces where you are an owner or admin.</p>
          </div>
          <div class="form-actions"><button type="submit" class="btn">Create agent</button></div>
        </form>
      </section>`,
  });
}
