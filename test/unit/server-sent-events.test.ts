import { describe, expect, it } from 'vitest';
import { readServerSentEvents } from '../../apps/cli/sse.js';
import { readLiveEvents } from '../../libs/provider/live-stream.js';

/** A body that arrives in the given pieces, as a network splits it. */
function bodyOf(...pieces: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const piece of pieces) controller.enqueue(encoder.encode(piece));
      controller.close();
    },
  });
}

async function all<T>(events: AsyncIterable<T>): Promise<T[]> {
  const seen: T[] = [];
  for await (const event of events) seen.push(event);
  return seen;
}

describe("the CLI's run event stream", () => {
  it('reads events split anywhere, CRLF or LF, skipping keep-alives and keeping the last id', async () => {
    const events = await all(
      readServerSentEvents(
        bodyOf(
          ': keep-alive\r\n\r\nid: 1-0\r\nevent: run',
          '\r\ndata: {"a":1}\r\n\r',
          '\ndata:x\ndata: y\n\n',
        ),
      ),
    );
    expect(events).toEqual([
      { id: '1-0', event: 'run', data: '{"a":1}' },
      // An event without its own id keeps the stream's last one (the Last-Event-ID to resume from).
      { id: '1-0', event: 'message', data: 'x\ny' },
    ]);
  });

  it('closes the body when its reader stops early', async () => {
    let cancelled = false;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('data: one\n\ndata: two\n\n'));
      },
      cancel() {
        cancelled = true;
      },
    });
    for await (const event of readServerSentEvents(body)) {
      expect(event.data).toBe('one');
      break;
    }
    expect(cancelled).toBe(true);
  });
});

describe("the data plane's live view stream", () => {
  it('reads events sent with CRLF line ends and a data field without its space', async () => {
    const blocked = JSON.stringify({ navigations: 2, popups: 1 });
    const events = await all(
      readLiveEvents(
        bodyOf(': ping\r\n\r\nevent: blocked\r\ndata:', `${blocked}\r\n\r\nevent: unknown\ndata: {}\n\n`),
      ),
    );
    expect(events).toEqual([{ event: 'blocked', data: { navigations: 2, popups: 1 } }]);
  });
});
