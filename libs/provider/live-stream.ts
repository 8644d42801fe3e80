import { EventSourceParserStream } from 'eventsource-parser/stream';
import {
  type LiveEvent,
  liveBlockedSchema,
  liveDialogSchema,
  liveFrameSchema,
  liveStateSchema,
} from '../contracts/index.js';

const SCHEMAS = {
  frame: liveFrameSchema,
  state: liveStateSchema,
  blocked: liveBlockedSchema,
  dialog: liveDialogSchema,
} as const;

/**
 * The live view's server-sent events, read from a data-plane stream as they arrive (parsed by
 * `eventsource-parser`). Events of a name this side does not know, and comment lines
 * (keep-alives), are passed over; an event whose data does not parse ends the stream (a worker
 * speaking another contract).
 */
export async function* readLiveEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<LiveEvent> {
  // DOM's typing of TextDecoderStream takes any BufferSource, which TypeScript will not narrow.
  const text = body.pipeThrough(new TextDecoderStream() as ReadableWritablePair<string, Uint8Array>);
  const reader = text.pipeThrough(new EventSourceParserStream()).getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      const event = liveEventOf(value.event, value.data);
      if (event) yield event;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

function liveEventOf(name: string | undefined, data: string): LiveEvent | undefined {
  if (name === undefined || !(name in SCHEMAS) || data === '') return undefined;
  const schema = SCHEMAS[name as keyof typeof SCHEMAS];
  const parsed = schema.safeParse(JSON.parse(data));
  if (!parsed.success) throw new Error(`the live view's ${name} event does not parse`);
  return { event: name, data: parsed.data } as LiveEvent;
}
