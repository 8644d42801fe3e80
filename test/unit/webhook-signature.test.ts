import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { standardWebhookHeaders, standardWebhookKey } from '../../libs/webhooks/index.js';

const SECRET = 'a-tenant-given-secret-of-at-least-32-chars-é';
const BODY = JSON.stringify({ id: 'evt_1', type: 'run.ended', card: 'ünïcode ✓' });

describe('Standard Webhooks signatures', () => {
  it('signs id, timestamp and body so the reference library verifies them with the secret', () => {
    const nowS = Math.floor(Date.now() / 1000);
    const headers = standardWebhookHeaders(SECRET, 'whk_1-run_1-a1-cancelled', BODY, nowS);
    expect(headers['webhook-id']).toBe('whk_1-run_1-a1-cancelled');
    expect(headers['webhook-timestamp']).toBe(String(nowS));
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);

    const verifier = new Webhook(standardWebhookKey(SECRET));
    expect(verifier.verify(BODY, headers)).toEqual(JSON.parse(BODY));
    expect(() => verifier.verify(`${BODY} `, headers)).toThrow(/No matching signature/);
    expect(() => verifier.verify(BODY, { ...headers, 'webhook-id': 'another' })).toThrow(
      /No matching signature/,
    );
    expect(() => new Webhook(standardWebhookKey(`${SECRET}x`)).verify(BODY, headers)).toThrow(
      /No matching signature/,
    );
  });

  it("signs what the reference library signs, byte for byte, and the spec's own example", () => {
    const at = new Date(1614265330 * 1000);
    const reference = new Webhook(standardWebhookKey(SECRET));
    expect(standardWebhookHeaders(SECRET, 'msg_1', BODY, 1614265330)['webhook-signature']).toBe(
      reference.sign('msg_1', at, BODY),
    );
    // The example of the specification's reference libraries: a `whsec_` key is its base64 bytes.
    const key = Buffer.from('MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'base64');
    expect(
      new Webhook(key, { format: 'raw' }).sign('msg_p5jXN8AQM9LWM0D4loKWxJek', at, '{"test": 2432232314}'),
    ).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });
});
