/**
 * Draws bench:load's added latency against the number of conversations as an SVG: p50 and p99
 * of each mode and settings, both axes logarithmic. No dependency: the figures are few.
 *
 *   npm run bench:load -- --conversations 100,1000,5000 --json /tmp/load.json
 *   node bench/plot-latency.ts /tmp/load.json docs/load-latency.svg "2026-11-29, load average 20"
 */
import { readFileSync, writeFileSync } from 'node:fs';

interface Row { n: number; mode: string; setup: string; p50: number; p99: number }

const [input, output, caption = ''] = process.argv.slice(2);
if (!input || !output) throw new Error('usage: node bench/plot-latency.ts <bench:load --json file> <out.svg> [caption]');
const { rows, sleepMs, database } = JSON.parse(readFileSync(input, 'utf8')) as { rows: Row[]; sleepMs: number; database: string };

const WIDTH = 640;
const HEIGHT = 420;
const PLOT = { left: 70, right: 220, top: 40, bottom: 70 };
const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b'];

const measured = rows.filter((row) => Number.isFinite(row.p50) && Number.isFinite(row.p99) && row.p50 > 0);
const sizes = [...new Set(measured.map((row) => row.n))].sort((a, b) => a - b);
const lowest = Math.min(...measured.map((row) => row.p50));
const highest = Math.max(...measured.map((row) => row.p99));
const decade = (value: number, round: (x: number) => number) => 10 ** round(Math.log10(value));
const [yMin, yMax] = [decade(Math.max(lowest, 0.1), Math.floor), decade(highest, Math.ceil)];
const [xMin, xMax] = [decade(sizes[0]!, Math.floor), decade(sizes.at(-1)!, Math.ceil)];
const innerWidth = WIDTH - PLOT.left - PLOT.right;
const innerHeight = HEIGHT - PLOT.top - PLOT.bottom;
const x = (n: number) => PLOT.left + (Math.log10(n / xMin) / Math.log10(xMax / xMin)) * innerWidth;
const y = (ms: number) => PLOT.top + innerHeight - (Math.log10(Math.max(ms, yMin) / yMin) / Math.log10(yMax / yMin)) * innerHeight;
const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

const parts: string[] = [];
for (let ms = yMin; ms <= yMax; ms *= 10) {
  parts.push(`<line x1="${PLOT.left}" x2="${PLOT.left + innerWidth}" y1="${y(ms)}" y2="${y(ms)}" stroke="#ddd"/>`,
    `<text x="${PLOT.left - 8}" y="${y(ms) + 4}" text-anchor="end">${ms.toLocaleString('en')}</text>`);
}
for (const n of sizes) {
  parts.push(`<line x1="${x(n)}" x2="${x(n)}" y1="${PLOT.top}" y2="${PLOT.top + innerHeight}" stroke="#eee"/>`,
    `<text x="${x(n)}" y="${PLOT.top + innerHeight + 18}" text-anchor="middle">${n.toLocaleString('en')}</text>`);
}
const series = [...new Set(measured.map((row) => `${row.mode} · ${row.setup}`))];
series.forEach((name, index) => {
  const colour = COLOURS[index % COLOURS.length];
  const points = measured.filter((row) => `${row.mode} · ${row.setup}` === name).sort((a, b) => a.n - b.n);
  for (const [quantile, dash] of [['p50', ''], ['p99', ' stroke-dasharray="5 4"']] as const) {
    const path = points.map((row) => `${x(row.n).toFixed(1)},${y(row[quantile]).toFixed(1)}`).join(' ');
    parts.push(`<polyline points="${path}" fill="none" stroke="${colour}" stroke-width="2"${dash}/>`);
    for (const row of points) parts.push(`<circle cx="${x(row.n).toFixed(1)}" cy="${y(row[quantile]).toFixed(1)}" r="3" fill="${colour}"/>`);
  }
  const legendY = PLOT.top + 10 + index * 72;
  const [mode, setup] = name.split(' · ') as [string, string];
  const lines = setup.split(' ').slice(0, 3); // one setting a line
  parts.push(`<line x1="${WIDTH - PLOT.right + 16}" x2="${WIDTH - PLOT.right + 40}" y1="${legendY}" y2="${legendY}" stroke="${colour}" stroke-width="2"/>`,
    `<text x="${WIDTH - PLOT.right + 46}" y="${legendY + 4}">${escape(mode)}</text>`,
    ...lines.map((line, i) => `<text x="${WIDTH - PLOT.right + 16}" y="${legendY + 18 + i * 12}" font-size="10">${escape(line)}</text>`),
    `<text x="${WIDTH - PLOT.right + 16}" y="${legendY + 18 + lines.length * 12}" font-size="10" fill="#666">solid p50, dashed p99</text>`);
});

const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="#fff"/>
<text x="${PLOT.left}" y="20" font-size="14">Added latency (end to end minus the ${sleepMs} ms sleep), ${database}</text>
${parts.join('\n')}
<line x1="${PLOT.left}" x2="${PLOT.left}" y1="${PLOT.top}" y2="${PLOT.top + innerHeight}" stroke="#000"/>
<line x1="${PLOT.left}" x2="${PLOT.left + innerWidth}" y1="${PLOT.top + innerHeight}" y2="${PLOT.top + innerHeight}" stroke="#000"/>
<text x="${PLOT.left + innerWidth / 2}" y="${HEIGHT - 34}" text-anchor="middle">conversations at once (log)</text>
<text transform="translate(16 ${PLOT.top + innerHeight / 2}) rotate(-90)" text-anchor="middle">ms (log)</text>
<text x="${PLOT.left}" y="${HEIGHT - 10}" fill="#666">${escape(caption)}</text>
</svg>
`;
writeFileSync(output, svg);
