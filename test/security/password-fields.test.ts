import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FenceRig, limits, refOf } from './page-fence-rig.js';

const rig = new FenceRig();
beforeAll(() => rig.start());
afterAll(() => rig.stop());
afterEach(() => rig.cleanup());

const SECRET = 'hunter2-correct-horse';
const TYPED = 'Tr0ub4dor&3-typed';

const LOGIN = `<!doctype html><html lang="en"><head><title>Sign in</title></head><body>
<form onsubmit="return false">
  <label>User <input name="user" value="ada"></label>
  <label>Password <input type="password" name="pw" value="${SECRET}"></label>
  <label>New password <input type="password" name="new" autocomplete="new-password"></label>
  <label>One-time code <input name="otp" autocomplete="one-time-code"></label>
  <label><input type="checkbox"> Remember <input type="password" aria-label="Again" value="${SECRET}"></label>
  <button type="submit">Sign in <input type="password" value="${SECRET}" aria-hidden="true"></button>
</form>
<p id="mirror"></p>
<script>document.getElementById('mirror').textContent = 'Strength of ' + document.querySelector('[name=pw]').value;</script>
</body></html>`;

describe('password fields never give their value away (passwords)', () => {
  it("shows that a password field holds a value, never what it is, and the page's own text as it is", async () => {
    const { engine } = await rig.engine();
    const url = rig.site.addPage('sign-in.html', LOGIN);
    const { observation } = await engine.navigate({ url }, limits());
    // No field reports the value: the password fields say whether they hold one.
    for (const element of observation.elements) expect(element.state.value ?? '').not.toContain(SECRET);
    // The page's own text is the page's: what it shows is what the agent reads (striking every
    // password field's value from it blinded an agent to instructions the page gave before
    // anything was typed). A run's declared secrets are struck instead (declared-secrets.test.ts).
    expect(observation.text).toContain(`Strength of ${SECRET}`);
    const password = observation.elements.find((element) => element.name === 'Password');
    expect(password?.state).toEqual({ value_present: true });
    const empty = observation.elements.find((element) => element.name === 'New password');
    expect(empty?.state).toEqual({ value_present: false });
    // An ordinary field still shows its value.
    expect(observation.elements.find((element) => element.name === 'User')?.state.value).toBe('ada');
  });

  it("does not report text filled into a password field as any field's value", async () => {
    const { engine } = await rig.engine();
    const url = rig.site.addPage('sign-in-fill.html', LOGIN);
    const first = await engine.navigate({ url }, limits());
    const filled = await engine.act(
      {
        revision: first.observation.revision,
        element: refOf(first.observation, 'New password'),
        action: 'fill',
        text: TYPED,
      },
      limits(),
    );
    expect(JSON.stringify(filled.observation)).not.toContain(TYPED);
    expect(filled.observation.elements.find((element) => element.name === 'New password')?.state).toEqual({
      value_present: true,
    });
    const otp = await engine.act(
      {
        revision: filled.observation.revision,
        element: refOf(filled.observation, 'One-time code'),
        action: 'fill',
        text: '918273',
      },
      limits(),
    );
    const later = await engine.observe({}, limits());
    for (const observation of [otp.observation, later.observation]) {
      expect(JSON.stringify(observation)).not.toContain(TYPED);
      expect(JSON.stringify(observation)).not.toContain('918273');
    }
  });

  it('keeps a word of the page that contains a typed password (no striking inside other words)', async () => {
    const { engine } = await rig.engine();
    const url = rig.site.addPage(
      'sign-in-word.html',
      `<!doctype html><html lang="en"><head><title>Choose a password</title></head><body>
<p>Sign in with the password gan9</p>
<label>Password <input type="password" name="pw"></label></body></html>`,
    );
    const first = await engine.navigate({ url }, limits());
    const filled = await engine.act(
      {
        revision: first.observation.revision,
        element: refOf(first.observation, 'Password'),
        action: 'fill',
        text: 'ord',
      },
      limits(),
    );
    const again = await engine.act(
      {
        revision: filled.observation.revision,
        element: refOf(filled.observation, 'Password'),
        action: 'fill',
        text: 'gan9',
      },
      limits(),
    );
    expect(again.observation.title).toBe('Choose a password');
    expect(again.observation.text).toContain('Sign in with the password gan9');
    expect(refOf(again.observation, 'Password')).toBeTruthy();
  });
});
