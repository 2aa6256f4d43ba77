import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Problem, type FieldError } from '../../../domain/problems.ts';
import { EmailSchema } from '../../../domain/email.ts';
import { PasswordSchema } from '../../../services/accounts.ts';
import { formValue, render, safeNext, type WebContext } from '../context.ts';
import { cookieOptions, PRE_COOKIE, SESSION_COOKIE } from '../cookies.ts';
import { html, type SafeHtml } from '../html.ts';
import { csrfField, field, notice, ruleError, type FieldErrors } from '../layout.ts';
import { waitingOnYou } from './waiting.ts';

/** Sign up, log in, log out, and the start page. */
export function accountRoutes(app: FastifyInstance, ctx: WebContext): void {
  app.get('/', async (request, reply) => {
    const session = request.webSession;
    if (!session) return render(request, reply, { title: 'Welcome', body: landing() });
    const [agents, activeKeys, counts] = await Promise.all([
      ctx.services.agents.listForUser(session.userId),
      ctx.services.keys.countActive(session.userId),
      waitingOnYou(ctx, session.userId),
    ]);
    return render(request, reply, {
      title: 'Overview',
      body: html`<h1>Overview</h1>
        <div class="tiles">
          <a class="tile" href="/agents"><span class="tile-num">${agents.length}</span><span>agent${agents.length === 1 ? '' : 's'}</span></a>
          <a class="tile" href="/account/keys"><span class="tile-num">${activeKeys}</span><span>active API key${activeKeys === 1 ? '' : 's'}</span></a>
          <a class="tile" href="/inbox"><span class="tile-num">${counts.actions + counts.questions}</span><span>waiting in the inbox</span></a>
        </div>
        ${agents.length === 0
          ? html`<section class="card"><h2>Get started</h2><ol class="steps">
              <li><a href="/agents">Create your first agent</a>.</li>
              <li><a href="/account/keys">Create an API key</a> and call the API with it.</li>
              <li><a href="/chat">Chat with your agent</a> right here.</li></ol></section>`
          : html`<section class="card"><h2>Next</h2><p><a href="/chat">Chat with an agent</a>, read <a href="/conversations">conversations</a>, or settle what your agents are waiting on in the <a href="/inbox">inbox</a>.</p></section>`}`,
    });
  });

  app.get<{ Querystring: { next?: string } }>('/signup', async (request, reply) => {
    if (request.webSession) return reply.redirect('/', 303);
    return render(request, reply, { title: 'Sign up', narrow: true, body: signupForm(request.csrfToken, {}, '') });
  });

  app.post('/signup', async (request, reply) => {
    const email = formValue(request.body, 'email');
    const password = formValue(request.body, 'password');
    const wait = await ctx.services.loginThrottle.beginSignup(request.ip);
    if (wait > 0) {
      reply.header('Retry-After', String(wait));
      return render(request, reply, {
        title: 'Sign up', narrow: true, status: 429, error: true,
        body: signupForm(request.csrfToken, { form: `Too many sign-ups from your network just now. Try again in ${minutesText(wait)}.` }, email),
      });
    }
    // The service checks the email before the password; say everything that is wrong at once.
    const errors: FieldErrors = {};
    if (!EmailSchema.safeParse(email).success) errors.email = EMAIL_ERROR;
    errors.password = ruleError(PasswordSchema, password, { tooShort: PASSWORD_SHORT, tooLong: PASSWORD_LONG });
    if (errors.email || errors.password) {
      return render(request, reply, { title: 'Sign up', narrow: true, status: 422, error: true, body: signupForm(request.csrfToken, errors, email) });
    }
    try {
      const user = await ctx.services.accounts.createUser({ email, password });
      await startSession(ctx, request, reply, user.id);
      return reply.redirect('/agents?welcome=1', 303);
    } catch (error) {
      if (!(error instanceof Problem) || error.code !== 'validation_failed') throw error;
      return render(request, reply, { title: 'Sign up', narrow: true, status: 422, error: true, body: signupForm(request.csrfToken, signupErrors(error), email) });
    }
  });

  app.get<{ Querystring: { next?: string; bye?: string } }>('/login', async (request, reply) => {
    const next = safeNext(request.query.next);
    if (request.webSession) return reply.redirect(next, 303);
    const message = request.query.bye ? notice('ok', 'You are logged out.') : null;
    return render(request, reply, { title: 'Log in', narrow: true, body: loginForm(request.csrfToken, next, '', message) });
  });

  app.post('/login', async (request, reply) => {
    const email = formValue(request.body, 'email').trim().toLowerCase();
    const password = formValue(request.body, 'password');
    const next = safeNext(formValue(request.body, 'next'));
    const started = await ctx.services.loginThrottle.beginLogin(email, request.ip);
    if ('retryAfter' in started) {
      reply.header('Retry-After', String(started.retryAfter));
      return render(request, reply, {
        title: 'Log in', narrow: true, status: 429, error: true,
        body: loginForm(request.csrfToken, next, email,
          notice('error', `Too many failed attempts. Try again in ${minutesText(started.retryAfter)}.`)),
      });
    }
    const user = email && password ? await ctx.services.accounts.checkCredentials(email, password) : null;
    if (!user) {
      return render(request, reply, {
        title: 'Log in', narrow: true, status: 401, error: true,
        body: loginForm(request.csrfToken, next, email, notice('error', 'That email and password do not match an account.')),
      });
    }
    await ctx.services.loginThrottle.succeeded(started.attempt);
    await startSession(ctx, request, reply, user.id);
    return reply.redirect(next, 303);
  });

  app.post('/logout', async (request, reply) => {
    const token = request.cookies[SESSION_COOKIE];
    if (token) await ctx.services.webSessions.destroy(token);
    reply.clearCookie(SESSION_COOKIE, cookieOptions(request));
    return reply.redirect('/login?bye=1', 303);
  });
}

/** Log-in and sign-up always start a new session (a new cookie token: no session fixation). */
async function startSession(ctx: WebContext, request: FastifyRequest, reply: FastifyReply, userId: string): Promise<void> {
  const old = request.cookies[SESSION_COOKIE];
  if (old) await ctx.services.webSessions.destroy(old);
  const { token } = await ctx.services.webSessions.create(userId);
  reply.setCookie(SESSION_COOKIE, token, cookieOptions(request));
  reply.clearCookie(PRE_COOKIE, cookieOptions(request));
}

const EMAIL_ERROR = 'Enter an email address, such as name@example.com (at most 254 characters).';
const PASSWORD_SHORT = `Password must be at least ${PasswordSchema.minLength} characters.`;
const PASSWORD_LONG = `Password must be at most ${PasswordSchema.maxLength} characters.`;

function minutesText(seconds: number): string {
  const minutes = Math.ceil(seconds / 60);
  return `${minutes} minute${minutes === 1 ? '' : 's'}`;
}

/**
 * What the service still refuses after the form's own checks, as a sentence: the email and
 * password were checked with its rules, so only an email that is already taken is left.
 */
function signupErrors(problem: Problem): FieldErrors {
  const taken = ((problem.extra.errors as FieldError[] | undefined) ?? [])
    .some((e) => e.path === 'email' && e.message === 'is already registered');
  return taken
    ? { email: html`An account with this email already exists. <a href="/login">Log in instead</a>, or use another email.` }
    : { form: 'The account could not be created. Check the form and try again.' };
}

function landing(): SafeHtml {
  return html`<section class="hero">
    <h1>An authenticated HTTP channel for your AI agents</h1>
    <p class="lead">Create agents, hand out API keys, follow conversations, and approve what your agents want to do, all in one place.</p>
    <p class="actions"><a class="btn" href="/signup">Create an account</a> <a class="btn btn-quiet" href="/login">Log in</a></p>
  </section>
  <section class="features" aria-label="What you can do">
    <div class="card"><h2>API keys</h2><p>Per-key rate limits and expiry; revoke at once.</p></div>
    <div class="card"><h2>Inbox</h2><p>Approve actions and answer your agents' questions.</p></div>
    <div class="card"><h2>Chat</h2><p>Talk to your agents through the same pipeline as the API.</p></div>
  </section>`;
}

function signupForm(csrf: string, errors: FieldErrors, email: string): SafeHtml {
  return html`<section class="card">
    <h1>Create your account</h1>
    ${errors.form ? notice('error', errors.form) : ''}
    <form method="post" action="/signup" novalidate>
      ${csrfField(csrf)}
      ${field({ name: 'email', label: 'Email', type: 'email', value: email, required: true, autocomplete: 'email', error: errors.email })}
      ${field({ name: 'password', label: 'Password', type: 'password', required: true, autocomplete: 'new-password', hint: `At least ${PasswordSchema.minLength} characters.`, error: errors.password })}
      <button type="submit" class="btn btn-wide">Sign up</button>
    </form>
    <p class="muted small">Already have an account? <a href="/login">Log in</a>.</p>
  </section>`;
}

function loginForm(csrf: string, next: string, email: string, message: SafeHtml | null): SafeHtml {
  return html`<section class="card">
    <h1>Log in</h1>
    ${message}
    <form method="post" action="/login">
      ${csrfField(csrf)}
      <input type="hidden" name="next" value="${next}">
      ${field({ name: 'email', label: 'Email', type: 'email', value: email, required: true, autocomplete: 'username' })}
      ${field({ name: 'password', label: 'Password', type: 'password', required: true, autocomplete: 'current-password' })}
      <button type="submit" class="btn btn-wide">Log in</button>
    </form>
    <p class="muted small">New here? <a href="/signup">Create an account</a>.</p>
  </section>`;
}
