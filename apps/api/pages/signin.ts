import fastifyFormbody from '@fastify/formbody';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { csrfTokenMatches, type UiSession, type UiSessions } from '../../../libs/store/index.js';
import { type AddressBudget, addressBlock, type FailedAuthLimiter } from '../../../libs/telemetry/index.js';
import {
  PAGE_HEADERS,
  renderSignInPage,
  SESSION_COOKIE,
  sessionCookieOptions,
  sessionIdOf,
} from '../../../libs/ui/index.js';
import { type ApiOrigins, sentFromOwnPage } from '../public-origin.js';

/** What the sign-in needs beside the sessions: its budgets and the API's own origins. */
export interface SignInDependencies {
  sessions: UiSessions;
  /** Failed authentications, counted here per network (`addressBlock`). */
  failures: FailedAuthLimiter;
  /** Sign-ins, right key or wrong, per network a minute (SIGNINS_PER_MINUTE). */
  signIns: AddressBudget;
  origins: ApiOrigins;
}

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
  const sessionId = sessionIdOf(request.cookies);
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

/** The form again with `error`, answered `status` (and Retry-After when a budget is spent). */
function refuseSignIn(
  reply: FastifyReply,
  status: number,
  next: string,
  error: string,
  waitMs?: number,
): FastifyReply {
  if (waitMs !== undefined) reply.header('retry-after', String(Math.max(1, Math.ceil(waitMs / 1000))));
  return reply.code(status).headers(PAGE_HEADERS).send(renderSignInPage({ next, error }));
}

/**
 * `GET /signin` (the form), `POST /signin` (the key, as a form) and `POST /signout`. A sign-in is
 * taken only from our own page (its `Origin`, see {@link sentFromOwnPage}), within its network's
 * budget of sign-ins a minute; a right key then opens a session and sets its cookie (ending the
 * key's oldest past UI_SESSIONS_PER_KEY), a wrong one counts against the network's failed
 * authentications and shows the form again. Sign-out is a change: it carries the CSRF token.
 */
export async function registerSignIn(pages: FastifyInstance, deps: SignInDependencies): Promise<void> {
  // Each field one string (the last of a repeated name): our forms never repeat one, and a
  // handler then never meets an array where it compares a token.
  await pages.register(fastifyFormbody, {
    bodyLimit: FORM_LIMIT_BYTES,
    parser: (text) => Object.fromEntries(new URLSearchParams(text)),
  });

  pages.get('/signin', async (request, reply) => {
    const { next } = request.query as { next?: string };
    return reply.headers(PAGE_HEADERS).send(renderSignInPage({ next: localPath(next) }));
  });

  pages.post('/signin', async (request, reply) => {
    const form = (request.body ?? {}) as { key?: string; next?: string };
    const next = localPath(form.next);
    // Another site's form would sign the person's browser into the sender's tenant (login CSRF).
    if (!sentFromOwnPage(request.headers, deps.origins))
      return refuseSignIn(reply, 403, next, 'Sign-in refused: the form was not sent from this site.');
    // One host holds a whole /64 (and, on loopback, 127/8): budgets count per network.
    const network = addressBlock(request.ip);
    const busyMs = await deps.signIns.spend(network);
    if (busyMs !== undefined)
      return refuseSignIn(
        reply,
        429,
        next,
        `Too many sign-ins from this network; retry after ${Math.ceil(busyMs / 1000)} s.`,
        busyMs,
      );
    const opened = typeof form.key === 'string' ? await deps.sessions.open(form.key.trim()) : undefined;
    if (!opened) {
      const waitMs = await deps.failures.fail(network);
      if (waitMs === undefined) return refuseSignIn(reply, 401, next, 'That key was not accepted.');
      return refuseSignIn(
        reply,
        429,
        next,
        `Too many failed sign-ins from this network; retry after ${Math.ceil(waitMs / 1000)} s.`,
        waitMs,
      );
    }
    const lifeMs = opened.session.expiresAtMs - Date.now();
    reply.setCookie(SESSION_COOKIE, opened.sessionId, sessionCookieOptions(lifeMs, overHttps(request)));
    return reply.redirect(next, 303);
  });

  pages.post('/signout', async (request, reply) => {
    const form = (request.body ?? {}) as { csrf_token?: string };
    const sessionId = sessionIdOf(request.cookies);
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
    reply.clearCookie(SESSION_COOKIE, sessionCookieOptions(0, overHttps(request)));
    return reply.redirect('/signin', 303);
  });
}
