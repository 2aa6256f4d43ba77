/**
 * `Prefer: wait=N` (RFC 7240) → seconds, or undefined when absent or not a number. `wait` counts
 * only as a preference of its own (first, or after a comma), not as a parameter of another
 * (`handling=lenient; wait=1` prefers lenient handling and says nothing of waiting).
 */
export function preferredWaitSeconds(prefer: string | undefined): number | undefined {
  if (!prefer) return undefined;
  // Preferences are separated by commas, and a preference's own value from its parameters by
  // semicolons, neither counting inside a quoted string.
  for (const preference of splitOutsideQuotes(prefer, ',')) {
    const token = (splitOutsideQuotes(preference, ';')[0] ?? '').trim();
    // Anchored and greedy: no header can make it backtrack more than its length.
    const wait = /^wait(?:[ \t]*=[ \t]*(.*))?$/i.exec(token);
    if (!wait) continue;
    // Only the first `wait` counts (RFC 7240 §2), valid or not; huge values are capped later.
    const seconds = /^(?:(\d+)|"(\d+)")$/.exec(wait[1] ?? '');
    return seconds ? Number(seconds[1] ?? seconds[2]) : undefined;
  }
  return undefined;
}

/**
 * `text` cut at each `separator` outside a quoted string (RFC 9110: double quotes, a backslash
 * escaping the next character). One pass: a header of any shape costs its length, no more.
 */
function splitOutsideQuotes(text: string, separator: string): string[] {
  const parts: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '\\') i++;
      else if (c === '"') quoted = false;
    } else if (c === '"') {
      quoted = true;
    } else if (c === separator) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts;
}

/**
 * How long a read holds (§9.1, §9.3): the `Prefer: wait` asked for, capped by the server's
 * ceiling, in milliseconds, and the `Preference-Applied` value to answer with (whole seconds,
 * rounded down); nothing when the request did not ask to wait.
 */
export function heldWait(prefer: string | undefined, ceilingMs: number): { waitMs: number; applied: string } | null {
  const wanted = preferredWaitSeconds(prefer);
  if (wanted === undefined) return null;
  const waitMs = Math.min(wanted * 1000, ceilingMs);
  return { waitMs, applied: `wait=${Math.floor(waitMs / 1000)}` };
}
