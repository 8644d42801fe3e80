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

describe('password fields never give their value away (issue 11, passwords)', () => {
  it('shows that a password field holds a value, never what it is', async () => {
    const { engine } = await rig.engine();
    const url = rig.site.addPage('sign-in.html', LOGIN);
    const { observation } = await engine.navigate({ url }, limits());
    const serialized = JSON.stringify(observation);
    expect(serialized).not.toContain(SECRET);
    // A page that repeats the value elsewhere has it struck there too.
    expect(observation.text).toContain('Strength of [secret]');
    const password = observation.elements.find((element) => element.name === 'Password');
    expect(password?.state).toEqual({ value_present: true });
    const empty = observation.elements.find((element) => element.name === 'New password');
    expect(empty?.state).toEqual({ value_present: false });
    // An ordinary field still shows its value.
    expect(observation.elements.find((element) => element.name === 'User')?.state.value).toBe('ada');
  });

  it('does not echo text filled into a password field in the act result or later observations', async () => {
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
});
