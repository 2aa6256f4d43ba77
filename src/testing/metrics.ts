import type { TestApp } from './harness.ts';

/** The app's /metrics page as Prometheus' text format. */
export async function scrape(t: TestApp): Promise<string> {
  const res = await t.inject({ method: 'GET', url: '/metrics' });
  if (res.statusCode !== 200) throw new Error(`/metrics answered ${res.statusCode}: ${res.body}`);
  return res.body;
}

/**
 * The value of one sample line (`name` with at least these labels; `{}` for a metric without
 * labels), or 0 when it is absent.
 */
export function sample(metrics: string, name: string, labels: Record<string, string>): number {
  const line = metrics.split('\n').find((l) => (l.startsWith(`${name}{`) || l.startsWith(`${name} `))
    && Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)));
  return line ? Number(line.split(' ').at(-1)) : 0;
}
