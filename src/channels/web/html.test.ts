import assert from 'node:assert/strict';
import { test } from 'node:test';
import { escapeHtml, html } from './html.ts';

test('escapeHtml escapes every character that can open markup or end an attribute', () => {
  assert.equal(escapeHtml(`<a href="x" onclick='y'>&\`</a>`), '&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&#96;&lt;/a&gt;');
});

test('html escapes interpolated values, keeps nested html, joins arrays, drops empties', () => {
  const name = '<b>Bob</b>';
  const out = html`<p title="${name}">${name} ${html`<i>ok</i>`} ${['<1>', html`<br>`]}${null}${undefined}${false}${0}</p>`;
  assert.equal(out.value, '<p title="&lt;b&gt;Bob&lt;/b&gt;">&lt;b&gt;Bob&lt;/b&gt; <i>ok</i> &lt;1&gt;<br>0</p>');
});

test('a string that looks like html is still escaped (only html`` output is trusted)', () => {
  const sneaky = { value: '<script>', toString: () => '<script>' };
  assert.equal(html`${sneaky as unknown as string}`.value, '&lt;script&gt;');
});
