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

// Chat: send without reloading and follow the turn by polling the transcript.
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
  let timer = null;
  const STATUS_TEXT = {
    idle: '',
    processing: 'The agent is working on it…',
    queued: 'Queued: the agent is busy with something else and picks this up next…',
  };

  function showStatus(status) {
    root.setAttribute('data-status', status);
    statusLine.textContent = '';
    if (status !== 'idle' && STATUS_TEXT[status]) {
      const spin = document.createElement('span');
      spin.className = 'spinner';
      spin.setAttribute('aria-hidden', 'true');
      statusLine.append(spin, ' ' + STATUS_TEXT[status]);
    }
    if (badge) {
      badge.textContent = '';
      const b = document.createElement('span');
      b.className = 'badge badge-' + status;
      b.textContent = status;
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
    scroller.scrollTop = scroller.scrollHeight; // the end (the box runs bottom up: its end is 0, and this is clamped to it)
  }

  // What the conversation left waiting for this person (worded by the server), with the way to the inbox.
  const waitingNote = root.querySelector('[data-chat-waiting]');
  function showWaiting(waiting) {
    if (!waitingNote) return;
    waitingNote.querySelector('[data-chat-waiting-text]').textContent = waiting.text;
    waitingNote.hidden = !waiting.text;
  }
  const somethingWaits = () => Boolean(waitingNote && !waitingNote.hidden);
  // While something waits, it may be settled in the inbox in another tab, and the agent then goes
  // on here: look again now and then (not while the tab is hidden: it looks at once when shown).
  const WAITING_POLL_MS = 4000;

  // One poll at a time: asked for while one is under way, another follows it at once (so that a
  // message sent meanwhile is followed even if the earlier answer said there was nothing to do).
  let polling = false;
  let pollAgain = false;
  async function poll() {
    if (timer) { clearTimeout(timer); timer = null; }
    if (!sessionId) return;
    if (polling) { pollAgain = true; return; }
    polling = true;
    let next = null;
    try {
      const url = '/conversations/' + encodeURIComponent(sessionId) + '/messages.json' + (lastTs ? '?after=' + encodeURIComponent(lastTs) : '');
      const res = await fetch(url, { headers: { Accept: 'application/json' }, credentials: 'same-origin' });
      if (res.status === 401) { window.location.href = '/login?next=' + encodeURIComponent(location.pathname + location.search); return; }
      if (!res.ok) throw new Error('HTTP ' + res.status);
      const body = await res.json();
      for (const m of body.messages) { append(m); lastTs = m.ts; }
      showStatus(body.status);
      if (body.waiting) showWaiting(body.waiting);
      if (body.status !== 'idle' || body.has_more) next = body.has_more ? 0 : 800;
      else if (somethingWaits() && !document.hidden) next = WAITING_POLL_MS;
    } catch {
      next = 3000;
    } finally {
      polling = false;
    }
    if (pollAgain) { pollAgain = false; next = 0; }
    if (next !== null) timer = setTimeout(poll, next);
  }
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') poll();
  });

  // The server counts characters (code points), not UTF-16 units as maxlength would: check the same way.
  const maxChars = Number(textarea.getAttribute('data-max-chars')) || 0;
  function checkLength() {
    const count = maxChars ? Array.from(textarea.value).length : 0;
    textarea.setCustomValidity(count > maxChars
      ? 'The message is too long: ' + count.toLocaleString('en') + ' characters, at most ' + maxChars.toLocaleString('en') + '.'
      : '');
  }
  textarea.addEventListener('input', checkLength);

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!textarea.value.trim()) { textarea.focus(); return; }
    checkLength();
    if (!textarea.checkValidity()) { textarea.reportValidity(); return; }
    button.disabled = true;
    const data = new URLSearchParams(new FormData(form));
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
        textarea.value = '';
        if (body.status) showStatus(body.status === 'completed' || body.status === 'duplicate' ? 'idle' : body.status);
        await poll();
      }
    } catch {
      showError('The message could not be sent. Check your connection and try again.');
    } finally {
      button.disabled = false;
      textarea.focus();
    }
  });

  textarea.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });
  // The hint is true only with this script running.
  for (const hint of form.querySelectorAll('[data-js-hint]')) hint.hidden = false;

  if (sessionId && root.getAttribute('data-status') !== 'idle') poll();
  else if (somethingWaits()) timer = setTimeout(poll, WAITING_POLL_MS);
})();
