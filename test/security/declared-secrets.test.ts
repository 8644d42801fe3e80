import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserObservation, OpenedSecret } from '../../libs/contracts/index.js';
import { FenceRig, limits, refOf } from './page-fence-rig.js';

const rig = new FenceRig();
beforeAll(() => rig.start());
afterAll(() => rig.stop());
afterEach(() => rig.cleanup());

/** A value with characters that change when a URL or markup carries it. */
const PASSWORD = 'p&ss w<rd>9';
const USER = 'ada-lovelace';

const LOGIN = `<!doctype html><html lang="en"><head><title>Sign in</title></head><body>
<form method="get" action="/pages/secret-echo.html">
  <label>Username <input name="user" autocomplete="username"></label>
  <label>Password <input type="password" name="pw"></label>
  <label>Search <input type="search" name="q"></label>
  <label>Email <input type="email" name="mail"></label>
  <button type="submit">Sign in</button>
</form>
<button onclick="alert('You typed ' + document.querySelector('[name=pw]').value)">Show</button>
</body></html>`;

/** The page a GET form lands on: it echoes the password in its title and text, as some sites do. */
const ECHO = `<!doctype html><html lang="en"><head><title>Welcome</title></head><body>
<p id="plain"></p><p id="escaped"></p>
<script>
const pw = new URLSearchParams(location.search).get('pw') ?? '';
document.title = 'Welcome ' + pw;
document.getElementById('plain').textContent = 'Your password is ' + pw;
document.getElementById('escaped').textContent =
  'Escaped ' + pw.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;') + ' Encoded ' + encodeURIComponent(pw);
</script></body></html>`;

async function signInPage(secrets: (origin: string) => OpenedSecret[]) {
  const { engine, page } = await rig.engine();
  rig.site.addPage('secret-echo.html', ECHO);
  const url = rig.site.addPage('secret-login.html', LOGIN);
  engine.useSecrets(secrets(rig.site.origin));
  const { observation } = await engine.navigate({ url }, limits());
  return { engine, page, observation };
}

const declared = (origin: string): OpenedSecret[] => [
  { name: 'pw', value: PASSWORD, origins: [origin] },
  { name: 'user', value: USER, origins: [origin] },
];

/** Counts dispatches: an act refused before dispatch never calls it. */
function counted() {
  const seen = { dispatches: 0 };
  return {
    seen,
    limits: () => ({
      ...limits(),
      beforeDispatch: async () => {
        seen.dispatches += 1;
      },
    }),
  };
}

function fill(observation: BrowserObservation, name: string, text: string) {
  return { revision: observation.revision, element: refOf(observation, name), action: 'fill' as const, text };
}

describe('declared secrets in the page engine (DESIGN §12, secrets by name)', () => {
  it('types a named secret into credential fields and strikes it from everything the page echoes', async () => {
    const { engine, page, observation } = await signInPage(declared);
    const user = await engine.act(fill(observation, 'Username', '{{secret:user}}'), limits());
    const pw = await engine.act(fill(user.observation, 'Password', '{{secret:pw}}'), limits());
    // The page got the values.
    expect(await page.locator('[name=user]').inputValue()).toBe(USER);
    expect(await page.locator('[name=pw]').inputValue()).toBe(PASSWORD);
    // A username field shows its value as text: struck, named.
    expect(refOf(pw.observation, 'Username')).toBeTruthy();
    const username = pw.observation.elements.find((element) => element.name === 'Username');
    expect(username?.state.value).toBe('[secret:user]');
    // The screenshot after a secret fill is taken (masked) as any other.
    expect((await engine.screenshot({ timeoutMs: 5_000 })).ok).toBe(true);
    const submitted = await engine.act(
      { revision: pw.observation.revision, element: refOf(pw.observation, 'Sign in'), action: 'click' },
      limits(),
    );
    const seen = JSON.stringify(submitted.observation);
    for (const form of [PASSWORD, encodeURIComponent(PASSWORD), 'p%26ss+w%3Crd%3E9', 'p&amp;ss w&lt;rd&gt;9'])
      expect(seen).not.toContain(form);
    expect(seen).not.toContain(USER);
    expect(submitted.observation.url).toContain('pw=[secret:pw]');
    expect(submitted.observation.url).toContain('user=[secret:user]');
    expect(submitted.observation.title).toBe('Welcome [secret:pw]');
    expect(submitted.observation.text).toContain('Your password is [secret:pw]');
    expect(submitted.observation.text).toContain('Escaped [secret:pw] Encoded [secret:pw]');
  });

  it('refuses a secret typed into a search box or an email field of another origin, before dispatch', async () => {
    const { engine, page, observation } = await signInPage((origin) => [
      { name: 'pw', value: PASSWORD, origins: [origin] },
      { name: 'elsewhere', value: 'for-another-site', origins: ['https://bank.example'] },
    ]);
    const count = counted();
    await expect(
      engine.act(fill(observation, 'Search', '{{secret:pw}}'), count.limits()),
    ).rejects.toMatchObject({
      code: 'secret_not_allowed',
    });
    const again = await engine.observe({}, limits());
    await expect(
      engine.act(fill(again.observation, 'Email', '{{secret:elsewhere}}'), count.limits()),
    ).rejects.toMatchObject({ code: 'secret_not_allowed' });
    expect(count.seen.dispatches).toBe(0);
    expect(await page.locator('[name=q]').inputValue()).toBe('');
    expect(await page.locator('[name=mail]').inputValue()).toBe('');
  });

  it('answers an unknown name, or a secret in anything but fill, invalid_arguments before dispatch', async () => {
    const { engine, observation } = await signInPage(declared);
    const count = counted();
    await expect(
      engine.act(fill(observation, 'Password', '{{secret:nope}}'), count.limits()),
    ).rejects.toMatchObject({ code: 'invalid_arguments' });
    await expect(
      engine.act(
        {
          revision: observation.revision,
          element: refOf(observation, 'Password'),
          action: 'press',
          text: '{{secret:pw}}',
        },
        count.limits(),
      ),
    ).rejects.toMatchObject({ code: 'invalid_arguments' });
    expect(count.seen.dispatches).toBe(0);
  });

  it("strikes a declared secret from a dialog's message", async () => {
    const { engine, observation } = await signInPage(declared);
    const pw = await engine.act(fill(observation, 'Password', '{{secret:pw}}'), limits());
    const shown = await engine.act(
      { revision: pw.observation.revision, element: refOf(pw.observation, 'Show'), action: 'click' },
      limits(),
    );
    expect(shown.observation.dialog?.message).toBe('You typed [secret:pw]');
  });

  it('keeps a page that shows a password as it is when no secret is declared', async () => {
    const { engine } = await rig.engine();
    const url = rig.site.addPage(
      'shows-password.html',
      `<!doctype html><html lang="en"><head><title>Password gan9</title></head><body>
<p>Sign in with the password gan9</p><label>Password <input type="password"></label></body></html>`,
    );
    const first = await engine.navigate({ url }, limits());
    const filled = await engine.act(fill(first.observation, 'Password', 'gan9'), limits());
    expect(filled.observation.title).toBe('Password gan9');
    expect(filled.observation.text).toContain('Sign in with the password gan9');
  });

  it('masks the credential fields of a child frame in screenshots once a secret was typed there', async () => {
    const { engine, page } = await rig.engine();
    rig.site.addPage(
      'secret-frame-login.html',
      `<!doctype html><html lang="en"><head><title>Framed sign in</title></head><body style="margin:0">
      <label>Username <input name="user" autocomplete="username" style="font:40px sans-serif;width:400px;height:80px;border:0;background:#fff;color:#000"></label>
      <label>Password <input type="password" name="pw"></label></body></html>`,
    );
    const url = rig.site.addPage(
      'secret-frame-host.html',
      '<!doctype html><html lang="en"><head><title>Host</title></head><body style="margin:0"><iframe src="/pages/secret-frame-login.html" title="Sign in" style="width:700px;height:300px;border:0"></iframe></body></html>',
    );
    engine.useSecrets(declared(rig.site.origin));
    const { observation } = await engine.navigate({ url }, limits());
    await engine.act(fill(observation, 'Username', '{{secret:user}}'), limits());
    const field = page
      .frames()
      .find((frame) => frame !== page.mainFrame())
      ?.locator('[name=user]');
    expect(await field?.inputValue()).toBe(USER);
    const box = await field?.boundingBox();
    if (!box) throw new Error('the framed field has no box');
    const shot = await engine.screenshot({ timeoutMs: 10_000 });
    if (!shot.ok) throw new Error(`the capture failed: ${shot.reason}`);
    // The capture's pixels at the field's middle, read back by the browser itself.
    const reader = await rig.browser.newPage();
    try {
      const [red, green, blue, alpha] = await reader.evaluate(
        async ({ data, x, y }) => {
          const image = new Image();
          image.src = `data:image/jpeg;base64,${data}`;
          await image.decode();
          const canvas = document.createElement('canvas');
          canvas.width = image.width;
          canvas.height = image.height;
          const context = canvas.getContext('2d') as CanvasRenderingContext2D;
          context.drawImage(image, 0, 0);
          return [...context.getImageData(x, y, 1, 1).data];
        },
        {
          data: Buffer.from(shot.bytes).toString('base64'),
          x: Math.round(box.x + box.width / 2),
          y: Math.round(box.y + box.height / 2),
        },
      );
      // Playwright's mask paints #FF00FF over the field (a JPEG's colours are near it, not on it).
      expect(alpha).toBe(255);
      expect(red).toBeGreaterThan(200);
      expect(green).toBeLessThan(60);
      expect(blue).toBeGreaterThan(200);
    } finally {
      await reader.close();
    }
  });
});
