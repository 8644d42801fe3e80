import { EventSourceParserStream } from 'eventsource-parser/stream';

/** One Server-Sent Event as the run's stream sends it: `id:`, `event:` and one `data:` line. */
export interface ServerSentEvent {
  id: string | undefined;
  event: string;
  data: string;
}

/**
 * The events of a `text/event-stream` body, in order, as they arrive, parsed by
 * `eventsource-parser` (the WHATWG rules: any line end, comments — the keep-alives — skipped,
 * `data:` lines joined). As a browser's EventSource, an event without an `id:` keeps the last one
 * seen: it is the `Last-Event-ID` a reconnection resumes from.
 */
export async function* readServerSentEvents(
  body: ReadableStream<Uint8Array>,
): AsyncGenerator<ServerSentEvent> {
  // DOM's typing of TextDecoderStream takes any BufferSource, which TypeScript will not narrow.
  const text = body.pipeThrough(new TextDecoderStream() as ReadableWritablePair<string, Uint8Array>);
  const reader = text.pipeThrough(new EventSourceParserStream()).getReader();
  let lastId: string | undefined;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      lastId = value.id ?? lastId;
      yield { id: lastId, event: value.event ?? 'message', data: value.data };
    }
  } finally {
    // A consumer that stops early (the run ended) closes the connection.
    await reader.cancel().catch(() => undefined);
  }
}
