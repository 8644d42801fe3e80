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
 * The live view's server-sent events, read from a data-plane stream as they arrive. Events of a name
 * this side does not know, and comment lines (keep-alives), are passed over; an event whose data does
 * not parse ends the stream (a worker speaking another contract).
 */
export async function* readLiveEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<LiveEvent> {
  const decoder = new TextDecoder();
  let buffered = '';
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffered += decoder.decode(value, { stream: true });
      for (;;) {
        const end = buffered.indexOf('\n\n');
        if (end === -1) break;
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const event = parseEvent(block);
        if (event) yield event;
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

function parseEvent(block: string): LiveEvent | undefined {
  let name = '';
  let data = '';
  for (const line of block.split('\n')) {
    if (line.startsWith('event: ')) name = line.slice(7);
    else if (line.startsWith('data: ')) data += line.slice(6);
  }
  if (!(name in SCHEMAS) || data === '') return undefined;
  const schema = SCHEMAS[name as keyof typeof SCHEMAS];
  const parsed = schema.safeParse(JSON.parse(data));
  if (!parsed.success) throw new Error(`the live view's ${name} event does not parse`);
  return { event: name, data: parsed.data } as LiveEvent;
}
