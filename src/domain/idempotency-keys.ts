/**
 * An Idempotency-Key that a channel of ours makes for itself (a Telegram update, a web retry),
 * kept apart from the keys API clients choose: theirs come in an HTTP header, which never holds
 * a character above U+00FF, and this one holds U+241F. Without it, a client that keyed its own
 * requests `telegram:<n>` would take the key of the person's Telegram message n, which would
 * then be refused as a reuse and never run.
 */
export const channelIdempotencyKey = (channel: string, key: string): string => `${channel}\u241F${key}`;
