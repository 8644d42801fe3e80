import { formatTime, html, type PageViewer, pageLayout } from './html.js';
import { liveViewFragment } from './live-view.js';

/** A profile's sign-in as its page shows it (the REST view's fields). */
export interface ProfileSignInView {
  signin_id: string;
  profile_id: string;
  status: 'open' | 'done' | 'cancelled' | 'expired';
  url: string;
  expires_at_ms: number;
}

/**
 * How often an open sign-in page beats: every 30 s, or three times within a shorter lease, so one
 * late or lost beat never lets a page that is still open expire.
 */
export function signInBeatMs(leaseMs: number): number {
  return Math.max(1_000, Math.min(30_000, Math.floor(leaseMs / 3)));
}

/**
 * The sign-in page: the profile's page, live and held by the person from the start, with "Done"
 * (seal what the person left) and "Cancel" (close it unsealed). While open, the page's script beats
 * every `beatMs` to keep the lease; a page closed or left stops beating and the sign-in expires unsealed.
 */
export function renderProfileSignInPage(options: {
  viewer: PageViewer;
  signIn: ProfileSignInView;
  beatMs: number;
}): string {
  const { viewer, signIn } = options;
  const base = `/v1/profiles/${encodeURIComponent(signIn.profile_id)}/sign-ins/${encodeURIComponent(signIn.signin_id)}`;
  const open = signIn.status === 'open';
  const main = html`<section id="profile-sign-in" data-base="${base}" data-status="${signIn.status}" data-beat-ms="${String(options.beatMs)}">
<h1>Sign in: profile ${signIn.profile_id}</h1>
<p>Sign in on the page below as you would in your own browser, then press <strong>Done</strong>: what the
page keeps (cookies, storage) is sealed into the profile, and its runs start signed in. Nothing you type is
kept or shown to any model. <strong>Cancel</strong> keeps nothing.</p>
<p class="sign-in-status">Status: <strong class="sign-in-state">${signIn.status}</strong>${
    open
      ? html` — open until <span class="sign-in-expiry">${formatTime(signIn.expires_at_ms)}</span> while this page stays open`
      : ''
  }</p>
<p class="sign-in-problem error" hidden></p>
${
  open
    ? html`<p class="sign-in-actions"><button type="button" class="sign-in-done">Done</button> <button type="button" class="sign-in-cancel">Cancel</button></p>
${liveViewFragment({
  streamUrl: `${base}/live`,
  inputUrl: `${base}/input`,
  holder: `principal:${viewer.principal}`,
  waitingForYou: true,
  label: "The profile's page, live",
})}`
    : ''
}
</section>`;
  return pageLayout(`Sign in ${signIn.profile_id}`, main, viewer);
}
