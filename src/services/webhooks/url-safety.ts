import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Where a webhook may be sent (contract §9.5): https only, and only to public addresses, unless
 * the operator allows private ones (WEBHOOK_ALLOW_PRIVATE_URLS). Checked at registration (the
 * URL and every address its name resolves to) and at each delivery on the address actually
 * connected to (guardedLookup), so that a name re-pointed at an inner address (DNS rebinding)
 * is refused all the same.
 */

/** Longest URL an endpoint may have. */
export const MAX_WEBHOOK_URL_LENGTH = 2048;

/**
 * Every address that is not public unicast: loopback, private (10/8, 172.16/12, 192.168/16),
 * link-local (169.254/16, cloud metadata included; fe80::/10), unique-local (fc00::/7),
 * carrier-grade NAT, unspecified, multicast, broadcast and reserved ranges. An IPv4 address
 * written as IPv6 (::ffff:10.0.0.1) is judged as the IPv4 address it is.
 */
export function isPrivateAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return true;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  return parsed.range() !== 'unicast';
}

const PRIVATE_ADDRESS_REFUSED = 'must not point to a loopback, private, link-local or unique-local address (the operator can allow them with WEBHOOK_ALLOW_PRIVATE_URLS=true)';

/**
 * Why `raw` cannot be an endpoint's URL as it is written (its form, and its host when that is an
 * address), or null: judged without asking DNS. A name's addresses are checked apart (hostProblem).
 */
export function writtenUrlProblem(raw: string, allowPrivate: boolean): string | null {
  const form = urlFormProblem(raw, allowPrivate);
  if (form !== null) return form;
  const host = hostOf(new URL(raw));
  return isIP(host) && !allowPrivate && isPrivateAddress(host) ? PRIVATE_ADDRESS_REFUSED : null;
}

function urlFormProblem(raw: string, allowPrivate: boolean): string | null {
  if (raw.length > MAX_WEBHOOK_URL_LENGTH) return `must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'must be an absolute URL such as https://example.com/webhooks';
  }
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) {
    return allowPrivate ? 'must be an http:// or https:// URL' : 'must be an https:// URL';
  }
  if (url.username !== '' || url.password !== '') return 'must not hold a user name or password';
  if (url.hash !== '') return 'must not have a #fragment';
  return null;
}

/** The host as the resolver takes it (an IPv6 literal without its brackets). */
export const hostOf = (url: URL): string => url.hostname.replace(/^\[(.*)\]$/, '$1');

/** Every address `host` resolves to (itself when it is an address). */
export async function addressesOf(host: string): Promise<string[]> {
  if (isIP(host)) return [host];
  return new Promise((resolve, reject) => {
    dnsLookup(host, { all: true, verbatim: true }, (error, addresses: LookupAddress[]) => (error ? reject(error) : resolve(addresses.map((a) => a.address))));
  });
}

/** Why the URL's host may not be sent to (a private address, or no address at all), or null. */
export async function hostProblem(url: URL, allowPrivate: boolean): Promise<string | null> {
  let addresses: string[];
  try {
    addresses = await addressesOf(hostOf(url));
  } catch {
    return `its host ${hostOf(url)} cannot be resolved`;
  }
  if (addresses.length === 0) return `its host ${hostOf(url)} cannot be resolved`;
  if (!allowPrivate && addresses.some(isPrivateAddress)) return PRIVATE_ADDRESS_REFUSED;
  return null;
}

export class RefusedAddressError extends Error {
  readonly code = 'EWEBHOOKADDRESS';
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for http.request that refuses a private address: the socket connects to what it
 * answers, so the address judged is the one connected to.
 */
export function guardedLookup(allowPrivate: boolean) {
  return (hostname: string, options: { all?: boolean }, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true, verbatim: true }, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error, '');
      const refused = allowPrivate ? undefined : addresses.find((a) => isPrivateAddress(a.address));
      if (refused || addresses.length === 0) return callback(new RefusedAddressError('the host resolves to a private address'), '');
      if (options.all) return callback(null, addresses);
      return callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}
