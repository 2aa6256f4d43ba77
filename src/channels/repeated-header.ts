/**
 * Whether a request carries a header line more than once. Node keeps only the first
 * `Authorization` and joins repeated `Idempotency-Key` lines with ", ", so neither shows in
 * `request.headers`; a proxy in front may read the other line, and a client that sends two is
 * confused. `name` in lower case. A plain loop: it runs on every API request.
 */
export function sentMoreThanOnce(rawHeaders: string[], name: string): boolean {
  let seen = false;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const header = rawHeaders[i]!;
    if (header.length !== name.length || header.toLowerCase() !== name) continue;
    if (seen) return true;
    seen = true;
  }
  return false;
}
