import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { PUBLIC_ROUTE } from '../../libs/telemetry/http-doors.js';
import { createHttpServer } from '../../libs/telemetry/ops-routes.js';

/**
 * A person's page load while the server's Redis does not answer: an HTML page that says so and
 * loads itself again, not the JSON a program gets (a page answered with JSON has no script left to
 * try again, so one brief outage would leave the person on it for good).
 */
describe('an outage, as a browser and as a program see it', () => {
  async function downServer() {
    const app = createHttpServer(pino({ level: 'silent' }), 'api', 64 * 1024, {
      refuseWhileRedisDown: () => false,
    });
    app.get('/runs/:id', { config: PUBLIC_ROUTE }, async () => 'the page');
    await app.ready();
    return app;
  }

  it('answers a page load 503 with an HTML page that loads itself again in a couple of seconds', async () => {
    const app = await downServer();
    const answer = await app.inject({
      method: 'GET',
      url: '/runs/run_1',
      headers: { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' },
    });
    expect(answer.statusCode).toBe(503);
    expect(answer.headers['content-type']).toMatch(/^text\/html/);
    expect(answer.headers['retry-after']).toBe('1');
    expect(answer.body).toMatch(/<meta http-equiv="refresh" content="2">/);
    expect(answer.body).toContain('the store did not answer');
    await app.close();
  });

  it('keeps the one JSON error shape for a program', async () => {
    const app = await downServer();
    const answer = await app.inject({ method: 'GET', url: '/runs/run_1', headers: { accept: '*/*' } });
    expect(answer.statusCode).toBe(503);
    expect(answer.json()).toEqual({
      error: { code: 'unavailable', message: 'the store did not answer; retry shortly' },
    });
    await app.close();
  });
});
