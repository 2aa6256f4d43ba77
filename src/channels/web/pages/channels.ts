import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { LinkCode } from '../../../services/telegram/links.ts';
import type { WebSession } from '../../../services/web-sessions.ts';
import { authed, render, type WebContext } from '../context.ts';
import { html } from '../html.ts';
import { csrfField, notice } from '../layout.ts';
import { accountHeader } from './keys.ts';

const CHANNELS_PATH = '/account/channels';

/** Account → Channels → Telegram: a one-time link code with the bot's deep link, the linked chat, unlinking. */
export function channelsRoutes(app: FastifyInstance, ctx: WebContext): void {
  app.get(CHANNELS_PATH, authed<{ Querystring: { unlinked?: string } }>(async (request, reply, session) =>
    channelsPage(ctx, request, reply, session, { code: null, unlinked: request.query.unlinked === '1' })));

  app.post(`${CHANNELS_PATH}/telegram/code`, authed(async (request, reply, session) => {
    if (!ctx.config.telegram) return reply.redirect(CHANNELS_PATH, 303);
    const code = await ctx.services.telegramLinks.createCode(session.userId);
    // Shown on this answer only: the code is not kept anywhere it could be read again.
    reply.header('Cache-Control', 'no-store');
    return channelsPage(ctx, request, reply, session, { code, unlinked: false });
  }));

  app.post(`${CHANNELS_PATH}/telegram/unlink`, authed(async (_request, reply, session) => {
    await ctx.services.telegramLinks.unlinkAll(session.userId);
    return reply.redirect(`${CHANNELS_PATH}?unlinked=1`, 303);
  }));
}

async function channelsPage(ctx: WebContext, request: FastifyRequest, reply: FastifyReply, session: WebSession, state: { code: LinkCode | null; unlinked: boolean }) {
  const chats = ctx.config.telegram ? await ctx.services.telegramLinks.linkedChats(session.userId) : [];
  const bot = ctx.services.telegramLinks.botUsername;
  const { code } = state;
  const deepLink = code && bot ? `https://t.me/${bot}?start=${code.code}` : null;
  const body = !ctx.config.telegram
    ? notice('info', html`Telegram is not set up on this server. The operator turns it on with <code>TELEGRAM_BOT_TOKEN</code> (see docs/telegram.md).`)
    : html`
      ${state.unlinked ? notice('ok', 'Telegram unlinked: that chat no longer reaches your account.') : ''}
      <p>Talk to your agents from Telegram, approve their actions and answer their questions there.${bot ? html` The bot is <a href="https://t.me/${bot}">@${bot}</a>.` : ''}</p>
      ${chats.length > 0
        ? html`<p data-telegram-linked>Linked to a Telegram chat since ${chats[0]!.linkedAt.slice(0, 16).replace('T', ' ')} UTC.</p>
          <form method="post" action="${CHANNELS_PATH}/telegram/unlink">${csrfField(request.csrfToken)}
            <button class="btn btn-danger" type="submit">Unlink Telegram</button></form>`
        : html`<p class="muted">No Telegram chat is linked.</p>`}
      ${code
        ? html`<div class="notice notice-ok" role="status" data-telegram-code>
            <p>Your one-time code, valid for 10 minutes (until ${code.expiresAt.slice(11, 16)} UTC): <code>${code.code}</code></p>
            ${deepLink ? html`<p><a class="btn" href="${deepLink}" data-telegram-link>Open Telegram and link</a> <code>${deepLink}</code></p>` : ''}
            <p>Or send <code>/start ${code.code}</code> to the bot.${chats.length > 0 ? ' Linking a chat replaces the one linked now.' : ''}</p>
          </div>`
        : html`<form method="post" action="${CHANNELS_PATH}/telegram/code">${csrfField(request.csrfToken)}
            <button class="btn" type="submit">${chats.length > 0 ? 'Link another chat instead' : 'Link Telegram'}</button></form>`}`;
  return render(request, reply, {
    title: 'Channels', nav: 'account',
    body: html`${accountHeader('channels')}<section class="card" aria-labelledby="telegram-h"><h2 id="telegram-h">Telegram</h2>${body}</section>`,
  });
}
