import { describe, expect, it } from 'vitest';
import { PageActivity } from '../../libs/lease/index.js';

describe('page activity, which the warm pool yields to', () => {
  it('is quiet only with no page call under way and none ended within its quiet time', async () => {
    let now = 1_000;
    const activity = new PageActivity(250, () => now);
    expect(activity.isQuiet()).toBe(true);
    let finish!: () => void;
    const call = activity.track(new Promise<void>((resolve) => (finish = resolve)));
    now += 10_000;
    expect(activity.isQuiet()).toBe(false);
    finish();
    await call;
    expect(activity.isQuiet()).toBe(false);
    now += 249;
    expect(activity.isQuiet()).toBe(false);
    now += 1;
    expect(activity.isQuiet()).toBe(true);
  });

  it('counts a failed page call as ended, and passes its error on', async () => {
    let now = 0;
    const activity = new PageActivity(100, () => now);
    await expect(activity.track(Promise.reject(new Error('page gone')))).rejects.toThrow('page gone');
    now += 100;
    expect(activity.isQuiet()).toBe(true);
  });

  it('stops waiting for quiet once told to stop', async () => {
    const activity = new PageActivity(100);
    const held = activity.track(new Promise<void>(() => {}));
    let stopped = false;
    const waiting = activity.whenQuiet(() => stopped);
    stopped = true;
    await waiting;
    expect(activity.isQuiet()).toBe(false);
    void held;
  });
});
