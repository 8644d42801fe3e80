/** The cookie that carries a run-page session id (never the API key). */
export const SESSION_COOKIE = 'lh_session';

/** The header a cookie-signed-in write carries its CSRF token in; a form sends it as `csrf_token`. */
export const CSRF_HEADER = 'x-csrf-token';

/**
 * Methods that change state. A browser sends a cookie with any request a page makes it send, so a
 * cookie alone never authorises one of these: the session's CSRF token must come with it, which
 * only our own pages know (SameSite=Strict is the first fence, the token the second).
 */
export function changesState(method: string): boolean {
  return !['GET', 'HEAD', 'OPTIONS'].includes(method.toUpperCase());
}

/** The session id in a `Cookie` header, or undefined. */
export function sessionIdOf(cookieHeader: string | undefined): string | undefined {
  if (!cookieHeader) return undefined;
  for (const part of cookieHeader.split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === SESSION_COOKIE) return value.join('=') || undefined;
  }
  return undefined;
}

/**
 * The `Set-Cookie` of a session: HttpOnly (no script reads it), SameSite=Strict (no other site's
 * page sends it), Path=/ (the pages and the /v1 routes their script calls), Secure when the page
 * was served over https (behind a TLS proxy), and Max-Age with the session's life.
 */
export function sessionCookie(sessionId: string, maxAgeMs: number, secure: boolean): string {
  const parts = [
    `${SESSION_COOKIE}=${sessionId}`,
    'HttpOnly',
    'SameSite=Strict',
    'Path=/',
    `Max-Age=${Math.max(0, Math.round(maxAgeMs / 1000))}`,
  ];
  if (secure) parts.push('Secure');
  return parts.join('; ');
}

/** The `Set-Cookie` that ends a session in the browser. */
export function clearedSessionCookie(secure: boolean): string {
  return sessionCookie('', 0, secure);
}
