import type { FastifyRequest } from 'fastify';

/**
 * Whether a request was sent by a page of another site: the web app refuses its forms (CSRF), and
 * the MCP endpoint refuses it as the MCP specification asks of a server (a page reaching a local
 * server through DNS rebinding). A request with neither Fetch metadata nor Origin (curl, an MCP
 * client, a server) is not a page's.
 *
 * A browser that sends Fetch metadata is trusted
 * on it: `same-origin` (or `none`, typed by the user) passes, `same-site` and `cross-site` do not;
 * its Origin is then not compared, because behind a TLS-terminating proxy without TRUST_PROXY
 * this server sees http while the browser says https. Without Sec-Fetch-Site (older browsers),
 * an Origin must name this host (the scheme is not compared, for the same reason). The CSRF
 * token is required either way.
 */
export function isCrossSite(request: FastifyRequest): boolean {
  const site = request.headers['sec-fetch-site'];
  if (typeof site === 'string') return site !== 'same-origin' && site !== 'none';
  const origin = request.headers.origin;
  if (typeof origin !== 'string') return false;
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return true; // "null" (a sandboxed or privacy-sensitive context) or garbage
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return true;
  return !sameHost(url, request.host);
}

const DEFAULT_PORTS = new Set(['80', '443']);

/** Whether an Origin names the host of the Host header: same name and port, either scheme. */
function sameHost(origin: URL, hostHeader: string): boolean {
  const match = /^(.*?)(?::(\d+))?$/.exec(hostHeader.toLowerCase());
  if (!match || match[1] !== origin.hostname) return false;
  const originPort = origin.port || (origin.protocol === 'https:' ? '443' : '80');
  const hostPort = match[2];
  if (hostPort === undefined) return DEFAULT_PORTS.has(originPort);
  if (hostPort === originPort) return true;
  return DEFAULT_PORTS.has(hostPort) && DEFAULT_PORTS.has(originPort);
}
