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

/** The session id among a request's cookies (as `@fastify/cookie` parsed them), or undefined. */
export function sessionIdOf(
  cookies: Readonly<Record<string, string | undefined>> | undefined,
): string | undefined {
  return cookies?.[SESSION_COOKIE] || undefined;
}

/** The attributes of the session cookie, as `reply.setCookie` takes them. */
export interface SessionCookieOptions {
  httpOnly: true;
  sameSite: 'strict';
  path: '/';
  /** Seconds. */
  maxAge: number;
  secure: boolean;
}

/**
 * The session cookie's attributes: HttpOnly (no script reads it), SameSite=Strict (no other site's
 * page sends it), Path=/ (the pages and the /v1 routes their script calls), Secure when the page
 * was served over https (behind a TLS proxy), and Max-Age with the session's life. The same
 * attributes end it (`reply.clearCookie`), so the browser matches the cookie it holds.
 */
export function sessionCookieOptions(maxAgeMs: number, secure: boolean): SessionCookieOptions {
  return {
    httpOnly: true,
    sameSite: 'strict',
    path: '/',
    maxAge: Math.max(0, Math.round(maxAgeMs / 1000)),
    secure,
  };
}
