import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { csrfTokenMatches, type UiSession, type UiSessions } from '../../../libs/store/index.js';
import type { FailedAuthLimiter } from '../../../libs/telemetry/index.js';
import {
  clearedSessionCookie,
  PAGE_HEADERS,
  renderSignInPage,
  sessionCookie,
  sessionIdOf,
} from '../../../libs/ui/index.js';

/** A sign-in form is one key and a path: anything larger is not ours. */
const FORM_LIMIT_BYTES = 4 * 1024;

/** Only a path of this site, never `//elsewhere` or a URL: the sign-in form is no open redirect. */
export function localPath(next: unknown): string {
  return typeof next === 'string' && /^\/(?![/\\])[\x21-\x7e]*$/.test(next) ? next : '/runs';
}

/** The signed-in session of a page request, or undefined (the page then sends to the sign-in). */
export async function pageSession(
  request: FastifyRequest,
  sessions: UiSessions,
): Promise<UiSession | undefined> {
  const sessionId = sessionIdOf(request.headers.cookie);
  return sessionId ? sessions.resolve(sessionId) : undefined;
}

/**
 * Whether the person reached us over https: directly, or through a TLS proxy that says so. The
 * proxy's header is taken on trust only to add `Secure`, which a false claim cannot abuse: it
 * would only keep the cookie off a plain-http connection.
 */
function overHttps(request: FastifyRequest): boolean {
  const forwarded = request.headers['x-forwarded-proto'];
  const first = (Array.isArray(forwarded) ? forwarded[0] : forwarded)?.split(',')[0]?.trim();
  return request.protocol === 'https' || first === 'https';
}

/** Sends an unsigned-in visit to the sign-in, to come back where it was going. */
export function toSignIn(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return reply.redirect(`/signin?next=${encodeURIComponent(localPath(request.url))}`, 303);
}

/**
 * `GET /signin` (the form), `POST /signin` (the key, as a form) and `POST /signout`. A right key
 * opens a session and sets its cookie; a wrong one counts against the address as at every door
 * (issue 11.10) and shows the form again. Sign-out is a change: it carries the CSRF token.
 */
export async function registerSignIn(
  pages: FastifyInstance,
  deps: { sessions: UiSessions; failures: FailedAuthLimiter },
): Promise<void> {
  pages.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: FORM_LIMIT_BYTES },
    (_request, body, done) => done(null, Object.fromEntries(new URLSearchParams(String(body)))),
  );

  pages.get('/signin', async (request, reply) => {
    const { next } = request.query as { next?: string };
    return reply.headers(PAGE_HEADERS).send(renderSignInPage({ next: localPath(next) }));
  });

  pages.post('/signin', async (request, reply) => {
    const form = (request.body ?? {}) as { key?: string; next?: string };
    const next = localPath(form.next);
    const opened = typeof form.key === 'string' ? await deps.sessions.open(form.key.trim()) : undefined;
    if (!opened) {
      const waitMs = await deps.failures.fail(request.ip);
      const error =
        waitMs === undefined
          ? 'That key was not accepted.'
          : `Too many failed sign-ins from this address; retry after ${Math.ceil(waitMs / 1000)} s.`;
      return reply
        .code(waitMs === undefined ? 401 : 429)
        .headers(PAGE_HEADERS)
        .send(renderSignInPage({ next, error }));
    }
    const cookie = sessionCookie(
      opened.sessionId,
      opened.session.expiresAtMs - Date.now(),
      overHttps(request),
    );
    return reply.header('set-cookie', cookie).redirect(next, 303);
  });

  pages.post('/signout', async (request, reply) => {
    const form = (request.body ?? {}) as { csrf_token?: string };
    const sessionId = sessionIdOf(request.headers.cookie);
    const session = sessionId ? await deps.sessions.resolve(sessionId) : undefined;
    if (session && sessionId) {
      // Another site's form could otherwise sign a person out; the token shows it is our page.
      if (!csrfTokenMatches(session, form.csrf_token))
        return reply
          .code(401)
          .headers(PAGE_HEADERS)
          .send(renderSignInPage({ next: '/runs', error: 'Sign-out refused: the page was not ours.' }));
      await deps.sessions.close(sessionId);
    }
    return reply.header('set-cookie', clearedSessionCookie(overHttps(request))).redirect('/signin', 303);
  });
}
