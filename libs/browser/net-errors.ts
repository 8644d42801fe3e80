/**
 * Chromium's network errors that prove a navigation's request never reached a server: the name did
 * not resolve, the connection was refused or could not be made, the TLS handshake failed (the
 * request is sent only after it), or a proxy between us and the site refused the tunnel. A
 * navigation failing with one of these had no effect anywhere, so it is told `navigation_failed`
 * (amending ADR-0127 d3's list of refusals given before an effect). Any other error — a timeout, a
 * reset or an empty response after the request was sent — leaves the outcome unknown.
 *
 * The one table of such names: extend it here. Behind an HTTP proxy an unresolvable or refused
 * https target surfaces as ERR_TUNNEL_CONNECTION_FAILED (the proxy knows the real cause).
 * ERR_BLOCKED_BY_CLIENT is not here: the origin fence never blocks the current page's navigation
 * with it (a blocked navigation is `url_disallowed`), so another client would have blocked it.
 */
export const NEVER_SENT_NET_ERRORS: ReadonlySet<string> = new Set([
  // The name.
  'ERR_NAME_NOT_RESOLVED',
  'ERR_NAME_RESOLUTION_FAILED',
  'ERR_ADDRESS_INVALID',
  'ERR_ADDRESS_UNREACHABLE',
  'ERR_ICANN_NAME_COLLISION',
  // The connection.
  'ERR_CONNECTION_REFUSED',
  'ERR_CONNECTION_FAILED',
  // The connect itself timed out (not ERR_TIMED_OUT, which may come after the request went).
  'ERR_CONNECTION_TIMED_OUT',
  // The browser worker's address guard (its egress proxy names a refusal so).
  'ERR_BLOCKED_BY_ADMINISTRATOR',
  'ERR_INTERNET_DISCONNECTED',
  'ERR_NETWORK_ACCESS_DENIED',
  'ERR_UNSAFE_PORT',
  // A proxy that refused or failed the tunnel before the request went through it.
  'ERR_TUNNEL_CONNECTION_FAILED',
  'ERR_PROXY_CONNECTION_FAILED',
  'ERR_SOCKS_CONNECTION_FAILED',
  'ERR_SOCKS_CONNECTION_HOST_UNREACHABLE',
  'ERR_PROXY_CERTIFICATE_INVALID',
  // The TLS handshake.
  'ERR_SSL_PROTOCOL_ERROR',
  'ERR_SSL_VERSION_OR_CIPHER_MISMATCH',
  'ERR_SSL_UNRECOGNIZED_NAME_ALERT',
  'ERR_SSL_OBSOLETE_VERSION_OR_CIPHER',
  'ERR_SSL_HANDSHAKE_NOT_COMPLETED',
  'ERR_SSL_PINNED_KEY_NOT_IN_CERT_CHAIN',
  'ERR_SSL_CLIENT_AUTH_CERT_NEEDED',
  'ERR_BAD_SSL_CLIENT_AUTH_CERT',
]);

/** Certificate errors are the handshake's verdict on the server's certificate: nothing was sent yet. */
const NEVER_SENT_PREFIXES: readonly string[] = ['ERR_CERT_'];

/** Chromium's error name (`net::ERR_…`) in a Playwright navigation failure, if it names one. */
export function netErrorOf(error: unknown): string | null {
  const message = error instanceof Error ? error.message : String(error);
  return /\bnet::(ERR_[A-Z0-9_]+)\b/.exec(message)?.[0] ?? null;
}

/** Whether `netError` (`net::ERR_…`) proves the request never reached a server. */
export function neverReachedServer(netError: string): boolean {
  const name = netError.replace(/^net::/, '');
  return NEVER_SENT_NET_ERRORS.has(name) || NEVER_SENT_PREFIXES.some((prefix) => name.startsWith(prefix));
}
