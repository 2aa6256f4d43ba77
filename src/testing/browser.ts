/**
 * What the browser tests share: Debian's chromium driven by playwright-core, and the checks every
 * page and state shown goes through (see shoot): axe-core (WCAG 2.0–2.2 A and AA, and best
 * practices) at desktop and phone widths, its colours in dark mode too; and a few checks of our
 * own that axe does not make: reflow, non-text contrast and focus rings, the text that CSS draws,
 * one h1, and names for what is made focusable. Screenshots go into docs/screenshots/ with
 * UPDATE_SCREENSHOTS=1, else into a temporary folder (removeTemporaryShots).
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AxeResults, RunOptions } from 'axe-core';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';
export const SHOTS = process.env.UPDATE_SCREENSHOTS === '1'
  ? fileURLToPath(new URL('../../docs/screenshots/', import.meta.url))
  : mkdtempSync(join(tmpdir(), 'agent-channel-screenshots-'));
export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };
/** The narrowest width pages must work at without sideways scrolling (WCAG 1.4.10, 320 CSS px). */
export const NARROWEST = { width: 320, height: 640 };

export const skip = process.env.TEST_DB === 'postgres'
  ? 'browser tests run once, in the SQLite pass'
  : !existsSync(CHROMIUM) && process.env.CI !== 'true'
    ? `no browser at ${CHROMIUM}: install Debian's chromium (apt-get install -y chromium) to run the browser tests`
    : false;


type LaunchOptions = { javaScriptEnabled?: boolean; viewport?: { width: number; height: number } };

/**
 * A browser for a test: Debian's chromium on a profile of its own, which `close` removes with
 * the browser; the screenshots' folder is made ready.
 */
export async function openBrowser(name: string, options: LaunchOptions = {}): Promise<{ context: BrowserContext; close(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), `agent-channel-chromium-${name}-`));
  mkdirSync(SHOTS, { recursive: true });
  const context = await launch(dir, options);
  return {
    context,
    async close() {
      await context.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Debian's chromium with a fresh profile in `dir`, kept off the network but for this machine. */
export function launch(dir: string, options: LaunchOptions = {}): Promise<BrowserContext> {
  return chromium.launchPersistentContext(dir, {
    executablePath: CHROMIUM, headless: true, viewport: DESKTOP, ...options,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run', '--disable-quic'],
  });
}

// What axe (below) does not check, run in the page (as a string: the type-check has no DOM types):
// one h1 on the page (axe's page-has-heading-one asks for at least one), and a name for anything
// made focusable that is not a control, such as the chat's scrolling transcript, to be announced
// by when it takes focus (axe's focus-order-semantics, switched on below, checks its role only).
export const STRUCTURE_CHECK = `(() => {
  const problems = [];
  if (document.querySelectorAll('h1').length !== 1) problems.push('h1 count ' + document.querySelectorAll('h1').length);
  for (const el of document.querySelectorAll('[tabindex]:not(a, button, input, select, textarea)')) {
    if (el.tabIndex >= 0 && !el.getAttribute('aria-label') && !el.getAttribute('aria-labelledby')) problems.push('focusable without a name: ' + el.outerHTML.slice(0, 80));
  }
  return problems;
})()`;

// Colours as the page draws them, for the contrast checks below (a string run in the page): rgba()
// of any CSS colour, over() to composite, background() of an element (its ancestors' backgrounds
// composited, alpha and color-mix() included), ratio() of two colours, hidden().
const COLOUR_HELPERS = `
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 1;
  const g = canvas.getContext('2d', { willReadFrequently: true });
  const rgba = (css) => {
    g.clearRect(0, 0, 1, 1);
    g.fillStyle = '#000'; g.fillStyle = css; g.fillRect(0, 0, 1, 1);
    const [r, gr, b, a] = g.getImageData(0, 0, 1, 1).data;
    return [r, gr, b, a / 255];
  };
  const over = (top, bottom) => {
    const a = top[3];
    return [0, 1, 2].map((i) => top[i] * a + bottom[i] * (1 - a)).concat(1);
  };
  const background = (el) => {
    const layers = [];
    for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
      const c = rgba(getComputedStyle(node).backgroundColor);
      if (c[3] > 0) layers.push(c);
      if (c[3] >= 1) break;
    }
    let color = [255, 255, 255, 1];
    if (!layers.length || layers[layers.length - 1][3] < 1) color = rgba(getComputedStyle(document.documentElement).backgroundColor || '#fff');
    for (const layer of layers.reverse()) color = over(layer, color);
    return color;
  };
  const lum = (c) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
  };
  const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
  const hidden = (el) => {
    if (!el.getClientRects().length) return true;
    const style = getComputedStyle(el);
    if (style.visibility !== 'visible' || Number(style.opacity) === 0) return true;
    const box = el.getBoundingClientRect();
    return box.width <= 1 && box.height <= 1;
  };`;

// WCAG AA contrast (4.5:1, or 3:1 for large text) of the text that CSS draws, which axe's
// color-contrast does not see: placeholders, and the labels the phone layout of tables writes
// with ::before. Disabled controls are exempt, as WCAG says.
const CSS_TEXT_CONTRAST_CHECK = `(() => {
  ${COLOUR_HELPERS}
  const problems = [];
  const check = (el, color, what) => {
    if (el.closest(':disabled, [aria-disabled=true]') || hidden(el)) return;
    const style = getComputedStyle(el);
    const size = parseFloat(style.fontSize);
    const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
    const bg = background(el);
    const fg = over(rgba(color), bg);
    const r = ratio(fg, bg);
    if (r < (large ? 3 : 4.5)) problems.push(what + ' ' + r.toFixed(2) + ':1 (' + fg.slice(0, 3).map(Math.round) + ' on ' + bg.slice(0, 3).map(Math.round) + ')');
  };
  for (const el of document.querySelectorAll('input[placeholder], textarea[placeholder]')) {
    if (!el.value) check(el, getComputedStyle(el, '::placeholder').color, 'placeholder of #' + el.id);
  }
  for (const el of document.querySelectorAll('td[data-label]')) {
    if (getComputedStyle(el, '::before').content !== 'none') check(el, getComputedStyle(el, '::before').color, 'label of cell "' + el.dataset.label + '"');
  }
  return problems;
})()`;

// WCAG 1.4.11, non-text contrast (3:1): the edge of every enabled field against its own fill and
// the background around it, and the focus ring of everything that takes focus against the colours
// beside it (the background around the element; its own too, where the ring touches it). Run
// after a key press, so that focus() shows the ring as the keyboard would (:focus-visible).
const NON_TEXT_CHECK = `(() => {
  ${COLOUR_HELPERS}
  const problems = [];
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + ' "' + (el.textContent || el.name || '').trim().slice(0, 30) + '"';
  const low = (what, color, against) => {
    const fg = over(rgba(color), against);
    const r = ratio(fg, against);
    if (r < 3) problems.push(what + ' ' + r.toFixed(2) + ':1 (' + fg.slice(0, 3).map(Math.round) + ' on ' + against.slice(0, 3).map(Math.round) + ')');
  };
  for (const el of document.querySelectorAll('input:not([type=hidden]), select, textarea')) {
    if (el.disabled || hidden(el)) continue;
    const style = getComputedStyle(el);
    if (parseFloat(style.borderTopWidth) < 1) { problems.push('no edge: ' + name(el)); continue; }
    low('edge of ' + name(el) + ' on its fill', style.borderTopColor, background(el));
    low('edge of ' + name(el) + ' on the page', style.borderTopColor, background(el.parentElement));
  }
  const before = document.activeElement;
  for (const el of document.querySelectorAll('a[href], button, input:not([type=hidden]), select, textarea, [tabindex="0"]')) {
    if (el.disabled || hidden(el)) continue;
    el.focus({ preventScroll: true });
    if (document.activeElement !== el) continue;
    const style = getComputedStyle(el);
    if (style.outlineStyle === 'none' || parseFloat(style.outlineWidth) < 2) { problems.push('no focus ring: ' + name(el)); continue; }
    low('focus ring of ' + name(el), style.outlineColor, background(el.parentElement));
    if (parseFloat(style.outlineOffset) < 1) low('focus ring of ' + name(el) + ' on the element', style.outlineColor, background(el));
  }
  if (before && before.focus) before.focus({ preventScroll: true });
  return problems;
})()`;

// Nothing wider than the window, no table that needs sideways scrolling, and every navigation
// entry whole in the window (a row of entries that scrolls sideways gives no hint of the rest).
const OVERFLOW_CHECK = `(() => {
  const problems = [];
  if (document.documentElement.scrollWidth > window.innerWidth) problems.push('page ' + document.documentElement.scrollWidth + ' px wide');
  for (const wrap of document.querySelectorAll('.table-wrap')) {
    if (wrap.scrollWidth > wrap.clientWidth + 1) problems.push('table ' + wrap.scrollWidth + ' px in ' + wrap.clientWidth);
  }
  for (const list of document.querySelectorAll('nav ul')) {
    if (list.scrollWidth > list.clientWidth + 1) problems.push('navigation ' + list.scrollWidth + ' px in ' + list.clientWidth);
    for (const link of list.querySelectorAll('a')) {
      const box = link.getBoundingClientRect();
      if (box.left < 0 || box.right > window.innerWidth + 0.5) problems.push('navigation entry "' + link.textContent + '" cut at ' + Math.round(box.left) + '–' + Math.round(box.right) + ' px');
    }
  }
  return problems;
})()`;

/** axe-core (Deque), run in the page: read once, put into a page when it has none yet. */
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
/** WCAG 2.0–2.2, levels A and AA, and Deque's best practices (a level-one heading, one main, landmarks…). */
const AXE_TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice'];
/**
 * Beyond the tags: focus-order-semantics (experimental in axe 4) asks that whatever takes focus
 * has a role, such as the scrolling transcript's region.
 */
const AXE_EXTRA_RULES = { 'focus-order-semantics': { enabled: true } };
/** The rules that depend on colours alone: the only ones worth running again in dark mode. */
const AXE_COLOUR_RULES = ['color-contrast', 'link-in-text-block'];

/** axe's violations on the page as it is now: one line each, rule, impact, element and what is wrong. */
export async function axeRun(page: Page, options: RunOptions): Promise<string[]> {
  // Evaluated, not added as a <script>: the pages' Content-Security-Policy allows only their own scripts.
  if (!await page.evaluate('typeof window.axe === "object"')) await page.evaluate(AXE_SOURCE);
  const results = await page.evaluate(
    (options) => (globalThis as unknown as { axe: { run(o: RunOptions): Promise<AxeResults> } }).axe.run(options),
    { ...options, resultTypes: ['violations'] } satisfies RunOptions,
  );
  return results.violations.flatMap((rule) => rule.nodes.map((node) =>
    `${rule.id} (${node.impact ?? rule.impact}) at ${node.target.join(' ')}: ${rule.help}; ${(node.failureSummary ?? '').replace(/\s+/g, ' ').slice(0, 300)}`));
}

/** Every rule in light mode, and the colour rules again in dark mode. */
export async function axeViolations(page: Page): Promise<string[]> {
  const light = await axeRun(page, { runOnly: { type: 'tag', values: AXE_TAGS }, rules: AXE_EXTRA_RULES });
  await page.emulateMedia({ colorScheme: 'dark' });
  const dark = await axeRun(page, { runOnly: { type: 'rule', values: AXE_COLOUR_RULES } });
  await page.emulateMedia({ colorScheme: 'light' });
  return [...light, ...dark.map((v) => `dark: ${v}`)];
}

export async function contrastProblems(page: Page, scheme: 'light' | 'dark', check = CSS_TEXT_CONTRAST_CHECK): Promise<string[]> {
  await page.emulateMedia({ colorScheme: scheme });
  const problems = (await page.evaluate(check)) as string[];
  await page.emulateMedia({ colorScheme: 'light' });
  return problems.map((p) => `${scheme}: ${p}`);
}

/** The non-text contrast (fields' edges, focus rings) of the page, in light and dark mode. */
export async function nonTextProblems(page: Page): Promise<string[]> {
  await page.keyboard.press('Shift'); // keyboard use: focus() then shows the ring as a Tab would
  const problems = [...await contrastProblems(page, 'light', NON_TEXT_CHECK), ...await contrastProblems(page, 'dark', NON_TEXT_CHECK)];
  await page.evaluate('document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0)');
  return problems;
}

/**
 * The page as it is now, at desktop and at phone width (after the accessibility checks, and the
 * contrast and overflow checks, in light and dark mode, at both widths, and the overflow check
 * at the narrowest width too); `dark` also writes dark-mode shots.
 */
export async function shoot(page: Page, name: string, options: { dark?: boolean } = {}): Promise<void> {
  for (const viewport of [DESKTOP, PHONE]) {
    await page.setViewportSize(viewport);
    assert.deepEqual(await axeViolations(page), [], `axe on ${name} at ${viewport.width} px`);
    if (viewport === DESKTOP) {
      assert.deepEqual(await page.evaluate(STRUCTURE_CHECK), [], `structure of ${name}`);
      assert.deepEqual(await nonTextProblems(page), [], `non-text contrast of ${name}`);
    }
    assert.deepEqual([...await contrastProblems(page, 'light'), ...await contrastProblems(page, 'dark')], [], `contrast of CSS-drawn text of ${name} at ${viewport.width} px`);
    assert.deepEqual(await page.evaluate(OVERFLOW_CHECK), [], `layout of ${name} at ${viewport.width} px`);
    await page.screenshot({ path: join(SHOTS, `${name}-${viewport.width}.png`), fullPage: true });
    if (options.dark) {
      await page.emulateMedia({ colorScheme: 'dark' });
      await page.screenshot({ path: join(SHOTS, `${name}-dark-${viewport.width}.png`), fullPage: true });
      await page.emulateMedia({ colorScheme: 'light' });
    }
  }
  await page.setViewportSize(NARROWEST);
  assert.deepEqual(await page.evaluate(OVERFLOW_CHECK), [], `layout of ${name} at ${NARROWEST.width} px`);
  await page.setViewportSize(DESKTOP);
}

/**
 * axe on a page of the profile without JavaScript. axe is a script too, and no timer of its fires
 * in that page: it runs on a copy of the page (its DOM as drawn) served at the same address to a
 * page of the other profile, with the app's own script kept out.
 */
export async function axeOnCopy(context: BrowserContext, page: Page): Promise<string[]> {
  const copy = await context.newPage();
  try {
    await copy.route('**/assets/app.js', (route) => route.abort());
    const snapshot = await page.content();
    const address = page.url();
    await copy.route((url) => url.href === address, (route) => route.fulfill({ contentType: 'text/html; charset=utf-8', body: snapshot }));
    await copy.goto(address);
    assert.equal(await copy.title(), await page.title(), 'the copy is the page');
    return await axeViolations(copy);
  } finally {
    await copy.close();
  }
}

/** The new key is seen whole (wrapped, not cut off in a field) at phone widths. */
export async function wholeKeyInView(page: Page): Promise<void> {
  for (const viewport of [PHONE, NARROWEST]) {
    await page.setViewportSize(viewport);
    const shown = await page.locator('#new-key').evaluate((el) => {
      const box = el.getBoundingClientRect();
      return { fits: el.scrollWidth <= el.clientWidth, left: box.left, right: box.right, width: (globalThis as unknown as { innerWidth: number }).innerWidth };
    });
    assert.ok(shown.fits && shown.left >= 0 && shown.right <= shown.width, `the whole key is in view at ${viewport.width} px: ${JSON.stringify(shown)}`);
  }
  await page.setViewportSize(DESKTOP);
}

/** The bounding boxes of elements, to compare how they line up. */
export async function boxes(page: Page, selectors: string[]): Promise<{ x: number; y: number; width: number; height: number }[]> {
  return Promise.all(selectors.map(async (selector) => {
    const box = await page.locator(selector).first().boundingBox();
    assert.ok(box, `${selector} is on the page`);
    return box;
  }));
}

// Whether the element with focus shows it: a ring drawn by :focus-visible, and in the window.
export const FOCUS_SHOWN = `(() => {
  const el = document.activeElement;
  if (!el || el === document.body) return false;
  const style = getComputedStyle(el);
  const box = el.getBoundingClientRect();
  return el.matches(':focus-visible') && style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) >= 2
    && box.bottom > 0 && box.top < innerHeight && box.right > 0 && box.left < innerWidth;
})()`;

/** The element with focus as a screen reader names it: its role and accessible name (playwright's). */
export async function focused(page: Page): Promise<string> {
  const focus = page.locator(':focus');
  if (await focus.count() === 0) return 'nothing';
  return (await focus.ariaSnapshot()).split('\n')[0]!.replace(/^- /, '').replace(/:$/, '');
}

/**
 * Presses `key` until `target` (as focused() names it) has focus, 40 times at most, and returns
 * where focus stopped on the way; every stop shows its focus ring.
 */
export async function pressUntil(page: Page, target: string, key = 'Tab'): Promise<string[]> {
  const stops: string[] = [];
  while (stops.length < 40) {
    await page.keyboard.press(key);
    const stop = await focused(page);
    stops.push(stop);
    assert.ok(await page.evaluate(FOCUS_SHOWN), `focus is shown on ${stop} (${key} from ${stops.slice(0, -1).join(' → ') || 'the start'})`);
    if (stop === target) return stops;
  }
  assert.fail(`${target} is not reached by ${key}: ${stops.join(' → ')}`);
}

/** The screenshots of a run that does not update the committed ones are thrown away. */
export function removeTemporaryShots(): void {
  if (process.env.UPDATE_SCREENSHOTS !== '1') rmSync(SHOTS, { recursive: true, force: true });
}
