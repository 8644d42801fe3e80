import { describe, expect, it } from 'vitest';
import { EventStreamWriter } from '../../libs/telemetry/index.js';

/** A socket that takes writes until told it is full, and says so as a Node stream does. */
class SlowSocket {
  written: string[] = [];
  full = false;
  #drain: (() => void) | undefined;
  writeHead(): void {}
  write(chunk: string): boolean {
    this.written.push(chunk);
    return !this.full;
  }
  once(_event: 'drain', listener: () => void): void {
    this.#drain = listener;
  }
  end(): void {}
  drain(): void {
    this.full = false;
    const listener = this.#drain;
    this.#drain = undefined;
    listener?.();
  }
}

const frame = (n: number) => ({
  event: 'frame' as const,
  data: { jpeg: `f${n}`, url: 'https://shop.example/', tab: 1, width: 800, height: 600 },
});

describe('the live view stream writer', () => {
  it('gives a slow reader the newest frame and drops the ones between, never queueing them', () => {
    const socket = new SlowSocket();
    const writer = new EventStreamWriter(socket);
    writer.begin();
    socket.full = true;
    writer.send(frame(1));
    // The socket is full: these wait as one newest frame.
    writer.send(frame(2));
    writer.send(frame(3));
    writer.send({ event: 'state', data: { person: null } });
    writer.send(frame(4));
    socket.drain();
    const frames = socket.written.filter((chunk) => chunk.startsWith('event: frame'));
    expect(frames.map((chunk) => JSON.parse(chunk.split('data: ')[1] as string).jpeg)).toEqual(['f1', 'f4']);
    expect(socket.written.some((chunk) => chunk.startsWith('event: state'))).toBe(true);
    writer.end();
  });
});
