/**
 * A connection URL as it may be shown (a log line, an error): its password, and the value of any
 * query parameter that names a secret (`?password=`, `sslkey`, a token), replaced by `***`.
 * Anything that does not parse as a URL is shown as its scheme alone.
 */
export function shownUrl(url: string): string {
  let shown: URL;
  try {
    shown = new URL(url);
  } catch {
    return url.includes(':') ? `${url.split(':')[0]}:…` : '…';
  }
  if (shown.password) shown.password = '***';
  // By name (`password`, `sslkey`), or by what the value holds (PostgreSQL's `options=-c password=…`).
  for (const [name, value] of [...shown.searchParams]) {
    if (/pass|secret|key|token/i.test(name) || /pass|secret|token/i.test(value)) shown.searchParams.set(name, '***');
  }
  return shown.toString().replaceAll('%2A%2A%2A', '***');
}
