// agent-channel web app: small progressive enhancements. Every page works without this file.
'use strict';

// Copy buttons: <button data-copy="<selector of the text>" hidden>, shown by this script (without
// it they could do nothing). The outcome is said in the live region beside them ([data-copy-status]).
for (const button of document.querySelectorAll('[data-copy]')) button.hidden = false;
document.addEventListener('click', async (event) => {
  const button = event.target instanceof Element ? event.target.closest('[data-copy]') : null;
  if (!button) return;
  const source = document.querySelector(button.getAttribute('data-copy'));
  if (!source) return;
  // Selected too, so that Ctrl+C copies it where the clipboard cannot be written.
  const range = document.createRange();
  range.selectNodeContents(source);
  getSelection().removeAllRanges();
  getSelection().addRange(range);
  let copied = false;
  try {
    await navigator.clipboard.writeText(source.textContent);
    copied = true;
  } catch {
    try { copied = document.execCommand('copy'); } catch { copied = false; }
  }
  const status = button.parentElement.querySelector('[data-copy-status]');
  if (!status) return;
  status.textContent = copied ? 'Copied.' : 'Selected: press Ctrl+C to copy.';
  clearTimeout(status.clearing);
  status.clearing = setTimeout(() => { status.textContent = ''; }, 5000);
});

// Chat: send without reloading, and follow the conversation through this person's event feed
// (/events/stream, pages/feed.ts): an event that names it has the page read what is new.
(function chat() {
  const root = document.querySelector('[data-chat]');
  const form = root && root.querySelector('[data-chat-form]');
  if (!root || !form || !window.fetch) return;
  const log = root.querySelector('[data-chat-log]');
  const scroller = root.querySelector('[data-chat-scroll]');
  const statusLine = root.querySelector('[data-chat-status]');
  const badge = document.querySelector('[data-chat-badge]');
  const textarea = form.querySelector('textarea[name=text]');
  const button = form.querySelector('button[type=submit]');
  const csrf = form.querySelector('input[name=_csrf]').value;
  let agentName = root.getAttribute('data-agent-name') || 'Agent';
  const title = document.querySelector('[data-chat-title]');
  let sessionId = root.getAttribute('data-session') || '';
  let lastTs = root.getAttribute('data-last-ts') || '';
  const STATUS_TEXT = {
    idle: '',
    processing: 'The agent is working on it…',
    queued: 'Queued: the agent is busy with something else and picks this up next…',
  };

  // The status, and the badge as waiting.ts's sessionBadge draws it ("waiting for you" once the
  // agent has stopped on something for this person).
  let statusShown = root.getAttribute('data-status') + ' ' + Boolean(badge && badge.querySelector('.badge-waiting'));
  function showStatus(status, waits) {
    const shown = status + ' ' + Boolean(status === 'idle' && waits);
    if (shown === statusShown) return; // its live region says it once
    statusShown = shown;
    root.setAttribute('data-status', status);
    statusLine.textContent = '';
    if (status !== 'idle' && STATUS_TEXT[status]) {
      const spin = document.createElement('span');
      spin.className = 'spinner';
      spin.setAttribute('aria-hidden', 'true');
      statusLine.append(spin, ' ' + STATUS_TEXT[status]);
    }
    if (badge) {
      const waiting = status === 'idle' && waits;
      badge.textContent = '';
      const b = document.createElement('span');
      b.className = 'badge badge-' + (waiting ? 'waiting' : status);
      b.textContent = waiting ? 'waiting for you' : status;
      badge.append(b);
    }
  }

  // A message that could not be sent: said as the page says it without this script (layout.ts's
  // notice('error', …), and "Error: " before the title), and announced at once.
  const errorSlot = root.querySelector('[data-chat-error]');
  function showError(message) {
    errorSlot.textContent = '';
    document.title = (message ? 'Error: ' : '') + document.title.replace(/^Error: /, '');
    if (!message) return;
    const box = document.createElement('div');
    box.className = 'notice notice-error';
    box.setAttribute('role', 'alert');
    box.textContent = message;
    errorSlot.append(box);
  }

  function shownTime(ts) {
    const d = new Date(ts);
    return isNaN(d.getTime()) ? ts : d.toISOString().replace('T', ' ').slice(0, 16) + '\u00a0UTC';
  }

  function append(message) {
    if (log.querySelector('[data-ts="' + CSS.escape(message.ts) + '"]')) return;
    const empty = log.querySelector('.empty');
    if (empty) empty.remove();
    const li = document.createElement('li');
    li.className = 'msg msg-' + message.role + (message.error ? ' msg-error' : '');
    li.setAttribute('data-ts', message.ts);
    const meta = document.createElement('div');
    meta.className = 'msg-meta';
    const who = document.createElement('span');
    who.className = 'msg-who';
    who.textContent = message.role === 'user' ? 'You' : agentName;
    const time = document.createElement('time');
    time.dateTime = message.ts;
    time.textContent = shownTime(message.ts);
    meta.append(who, ' ', time);
    if (message.error) {
      const err = document.createElement('span');
      err.className = 'badge badge-error';
      err.title = 'Error code: ' + message.error; // as conversations.ts's messageItem
      err.textContent = 'failed';
      meta.append(' ', err);
    }
    const text = document.createElement('div');
    text.className = 'msg-text';
    text.textContent = message.text;
    li.append(meta, text);
    log.append(li);
    if (message.error === 'agent_failed') addResend(li);
    scroller.scrollTop = scroller.scrollHeight; // the end (the box runs bottom up: its end is 0, and this is clamped to it)
  }

  // "Send again" under a turn the agent failed on, as chat-help.ts's resendForms draws it: the
  // message it answers found as the server finds it (each agent turn takes the oldest message not
  // yet answered).
  function retryText(failed) {
    const waiting = [];
    for (const li of log.querySelectorAll('li.msg')) {
      if (li.classList.contains('msg-user')) { waiting.push(li); continue; }
      const message = waiting.shift();
      if (li === failed) return message ? message.querySelector('.msg-text').textContent : null;
    }
    return null;
  }
  function addResend(li) {
    const text = retryText(li);
    if (text === null || li.querySelector('[data-resend]')) return;
    const again = document.createElement('form');
    again.method = 'post'; again.action = '/chat'; again.className = 'resend';
    again.setAttribute('data-resend', '');
    for (const [name, value] of [['_csrf', csrf], ['session_id', sessionId], ['retry_of', li.getAttribute('data-ts')], ['text', text]]) {
      const input = document.createElement('input');
      input.type = 'hidden'; input.name = name; input.value = value;
      again.append(input);
    }
    const button = document.createElement('button');
    button.type = 'submit'; button.className = 'btn btn-small btn-quiet'; button.textContent = 'Send again';
    again.append(button);
    li.append(again);
  }

  // "Waiting for you", as waiting.ts's waitingNotice draws it (worded by the server), and the cards
  // that settle each item, as the server draws them (chat-awaiting.ts, sent as awaiting_html).
  // Drawn again only when what waits changes, so that the live region says it once and a reason
  // being written is not wiped.
  const waitingNote = root.querySelector('[data-chat-waiting]');
  const cards = root.querySelector('[data-chat-awaiting]');
  const settleStatus = root.querySelector('[data-settle-status]');
  const waitingKey = () => Array.from(cards.querySelectorAll('[data-awaiting]'), (card) => card.getAttribute('data-awaiting')).join(' ');
  let waitingShown = cards ? waitingKey() : '';
  function showWaiting(status, awaiting, text, awaitingHtml) {
    if (!waitingNote || !cards) return;
    const items = status === 'idle' ? awaiting : [];
    const shown = items.map((item) => item.operation_id || item.request_id).join(' ');
    if (shown === waitingShown) return;
    waitingShown = shown;
    waitingNote.querySelector('[data-chat-waiting-text]').textContent = items.length ? text : '';
    waitingNote.hidden = items.length === 0;
    const hadFocus = cards.contains(document.activeElement);
    cards.innerHTML = items.length ? awaitingHtml : '';
    if (hadFocus) textarea.focus();
  }

  // A card's decision or answer, sent without a reload: taken, the page says so and reads what
  // follows; refused, the card says why and keeps what was written.
  root.addEventListener('submit', async (event) => {
    const settle = event.target.closest('form[data-settle]');
    if (!settle) return;
    event.preventDefault();
    const card = settle.closest('[data-awaiting]');
    const error = card.querySelector('[data-settle-error]');
    const data = new URLSearchParams(new FormData(settle, event.submitter)); // before the buttons are off: a disabled one is not sent
    const buttons = card.querySelectorAll('button');
    for (const b of buttons) b.disabled = true;
    let body = {};
    try {
      const res = await fetch(settle.action, {
        method: 'POST', body: data, credentials: 'same-origin',
        headers: { Accept: 'application/json', 'X-CSRF-Token': csrf },
      });
      if (res.status === 401) { window.location.href = '/login?next=' + encodeURIComponent(location.pathname + location.search); return; }
      body = await res.json().catch(() => ({}));
    } catch {
      body = { message: 'That could not be sent. Check your connection and try again.' };
    }
    for (const b of buttons) b.disabled = false;
    if (body.ok && body.accepted !== false) {
      error.hidden = true;
      settleStatus.textContent = '';
      const done = document.createElement('div');
      done.className = 'notice notice-ok';
      done.textContent = body.message;
      settleStatus.append(done);
      card.hidden = true; // settled: gone at once; the read below draws what waits now
      if (card.contains(document.activeElement)) textarea.focus();
      read();
    } else {
      error.textContent = body.message || 'That could not be recorded. Reload the page and try again.';
      error.hidden = false;
      const field = settle.querySelector('input[name=text], input[name=reason]');
      if (field && field.type !== 'hidden') field.focus();
    }
  });

  // Reads what is new in the conversation: its turns after the last one shown, its status, and
  // what its agent waits for. One read at a time: asked for while one is under way, another
  // follows it (an event may have come after that read had looked).
  let reading = false;
  let readAgain = false;
  let retry = null;
  async function read() {
    if (!sessionId) return;
    if (reading) { readAgain = true; return; }
    reading = true;
    clearTimeout(retry);
    try {
      do {
        readAgain = false;
        const url = '/conversations/' + encodeURIComponent(sessionId) + '/messages.json' + (lastTs ? '?after=' + encodeURIComponent(lastTs) : '');
        const res = await fetch(url, { headers: { Accept: 'application/json' }, credentials: 'same-origin' });
        if (res.status === 401) { window.location.href = '/login?next=' + encodeURIComponent(location.pathname + location.search); return; }
        if (!res.ok) throw new Error('HTTP ' + res.status);
        const body = await res.json();
        for (const m of body.messages) { append(m); lastTs = m.ts; }
        if (body.has_more) readAgain = true;
        showStatus(body.status, body.awaiting.length > 0);
        showWaiting(body.status, body.awaiting, body.waiting_text, body.awaiting_html);
      } while (readAgain);
    } catch {
      retry = setTimeout(read, 3000); // the feed says only that something changed: a read that failed is tried again
    } finally {
      reading = false;
    }
  }

  // The feed. Any event of this conversation (a turn ended; an action or a question opened or
  // settled) has the page read it again: one read brings the new turns, the status and what the
  // agent waits for together. Each time the stream opens (at first, and after the browser
  // reconnected it) the page reads too, for what happened while it was not following.
  let source = null;
  let reopen = null;
  function follow() {
    if (source || document.hidden) return;
    clearTimeout(reopen);
    const stream = new EventSource('/events/stream');
    source = stream;
    stream.onopen = () => { read(); };
    stream.onmessage = (message) => {
      let event;
      try { event = JSON.parse(message.data); } catch { return; }
      if (event.session_id === sessionId) read();
    };
    stream.onerror = () => {
      if (stream.readyState !== EventSource.CLOSED || source !== stream) return; // reconnecting by itself
      // Refused (logged out: the read sends the page to log in; too many tabs following): read
      // once, and try again later.
      source = null;
      read();
      reopen = setTimeout(follow, 30_000);
    };
  }
  function unfollow() {
    clearTimeout(reopen);
    if (source) { source.close(); source = null; }
  }
  if (window.EventSource) {
    // A hidden tab lets go of its stream (a browser holds only a few connections to one site at
    // once, six over HTTP/1.1); shown again, it follows anew, reading what it missed.
    document.addEventListener('visibilitychange', () => { if (document.hidden) unfollow(); else follow(); });
    follow();
  } else {
    // Without EventSource: a slow look now and then, while the tab is shown.
    setInterval(() => { if (!document.hidden) read(); }, 10_000);
  }

  // The server counts characters (code points), not UTF-16 units as maxlength would: check the same way.
  const maxChars = Number(textarea.getAttribute('data-max-chars')) || 0;
  function checkLength() {
    const count = maxChars ? Array.from(textarea.value).length : 0;
    textarea.setCustomValidity(count > maxChars
      ? 'The message is too long: ' + count.toLocaleString('en') + ' characters, at most ' + maxChars.toLocaleString('en') + '.'
      : '');
  }
  textarea.addEventListener('input', checkLength);

  // Sends a message (the form's, or a failed one's again): the page stays, the reply follows.
  async function send(data, fromForm) {
    button.disabled = true;
    try {
      const res = await fetch('/chat', {
        method: 'POST', body: data, credentials: 'same-origin',
        headers: { Accept: 'application/json', 'X-CSRF-Token': csrf },
      });
      const body = await res.json().catch(() => ({}));
      if (body.session_id && !sessionId) {
        // The conversation exists now: from here on the form continues it.
        sessionId = body.session_id;
        root.setAttribute('data-session', sessionId);
        history.replaceState(null, '', '/chat?session=' + encodeURIComponent(sessionId));
        const agentField = form.querySelector('[name=agent_id]');
        if (agentField) {
          const chosen = agentField.options[agentField.selectedIndex];
          if (chosen) agentName = chosen.text;
          agentField.closest('.field').remove();
        }
        if (title) title.textContent = 'Chat with ' + agentName;
        document.title = 'Chat with ' + agentName + ' · agent-channel';
        for (const el of document.querySelectorAll('[data-when-session], [data-chat-badge]')) el.hidden = false;
        for (const el of document.querySelectorAll('[data-when-new]')) el.hidden = true;
        const hidden = document.createElement('input');
        hidden.type = 'hidden'; hidden.name = 'session_id'; hidden.value = sessionId;
        form.append(hidden);
      }
      if (!res.ok && !body.session_id) {
        showError(body.message || 'The message could not be sent.');
      } else {
        showError('');
        if (settleStatus) settleStatus.textContent = ''; // what the last card did is old news once the chat goes on
        if (fromForm) textarea.value = '';
        // Still running: said at once (the read below says the rest, and the feed what follows).
        if (body.status === 'processing' || body.status === 'queued') showStatus(body.status, false);
        await read();
      }
    } catch {
      showError('The message could not be sent. Check your connection and try again.');
    } finally {
      button.disabled = false;
      textarea.focus();
    }
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    if (!textarea.value.trim()) { textarea.focus(); return; }
    checkLength();
    if (!textarea.checkValidity()) { textarea.reportValidity(); return; }
    send(new URLSearchParams(new FormData(form)), true);
  });
  // "Send again": the failed message, keyed by its failed turn (chat.ts's retry_of).
  log.addEventListener('submit', (event) => {
    const again = event.target.closest('form[data-resend]');
    if (!again) return;
    event.preventDefault();
    const data = new URLSearchParams(new FormData(again));
    again.querySelector('button').disabled = true;
    send(data, false);
  });

  textarea.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });
  // The hint is true only with this script running.
  for (const hint of form.querySelectorAll('[data-js-hint]')) hint.hidden = false;
})();
