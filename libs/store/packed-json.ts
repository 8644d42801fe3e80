import { deflateRawSync, inflateRawSync } from 'node:zlib';

/**
 * JSON values stored compressed when that pays (`redis_bytes_per_run`). A run's
 * transcript and steps are mostly the same names over and over — an observation's elements, a
 * step's outcome and timings — and each entry is read alone, so each is deflated alone, against a
 * preset dictionary of those names: the first entry of a run compresses as well as the tenth.
 *
 * A stored value is either plain JSON (it starts with `{`, `[`, `"`…: a small value, or one written
 * by a script) or a marker byte and the deflated JSON. The marker names the dictionary: a
 * dictionary, once values were stored with it, never changes; a new one takes a new marker.
 */

/** Marker byte: deflateRaw with {@link DICTIONARY_V1}. No JSON text starts with it. */
const DEFLATED_V1 = 0x01;

/** Shorter JSON is stored as it is: deflating it saves less than the marker and block cost. */
const PACK_MIN_CHARS = 96;

/**
 * The names a run's records repeat, generic to every page and tool (never one page's words). Deflate
 * finds matches anywhere in the window, and the nearest cost least, so the most frequent come last.
 */
const DICTIONARY_V1 = Buffer.from(
  [
    '{"seq":1,"started_at_ms":1,"status":"ended","ended_at_ms":1,"duration_ms":1,',
    '"model":{"input_tokens":0,"cached_input_tokens":0,"output_tokens":0,"cost_micro_usd":0,',
    '"tool_calls":[{"id":"call_1","name":"browser.act"}],"answered":false}}',
    '"tool":{"name":"browser.navigate","arguments":{"url":"https://"},',
    '"outcome":{"ok":false,"code":"element_not_found","message":"',
    '"outcome":{"ok":true,"code":null,"message":null},',
    '"postcondition":{"result":"satisfied","scope":"observation_window","observations":1,"elapsed_ms":',
    '"page":{"url":"http://","title":""},"screenshot":"shot-.jpg","approval_id":"apr_"}}',
    '{"kind":"input","text":"',
    '{"kind":"model","toolCalls":[],"answer":"',
    '{"kind":"model","toolCalls":[{"id":"call_1","name":"browser.navigate","args":{"url":"https://"}}]}',
    '{"kind":"model","toolCalls":[{"id":"call_2","name":"browser.act","args":{"revision":"","element":"e1",',
    '"action":"click","postcondition":{"role":"heading","name":"","wait_ms":2000}}}]}',
    '"action":"fill","text":"","usage":{"input_tokens":0,"output_tokens":0}',
    '{"kind":"tool","callId":"call_1","name":"browser.observe","outcome":{"ok":false,"code":"","message":""}}',
    '{"kind":"tool","callId":"call_1","name":"browser.navigate","outcome":{"ok":true,"result":{"observation":',
    '{"url":"https://","title":"","text":"","text_truncated":false,"revision":"",',
    '"settle":{"result":"dom_quiet","elapsed_ms":',
    '"blocked":{"popups":0,"frames":0,"subresources":0},',
    '"condition":{"result":"satisfied","scope":"observation_window","observations":1,"elapsed_ms":',
    '"window":{"offset":0,"count":1,"visible_seen":1,"candidates_checked":1,"candidate_limit_reached":false,"continuation":null}',
    '{"ref":"e1","role":"link","name":"","state":{}},',
    '{"ref":"e1","role":"textbox","name":"","state":{"disabled":true,"checked":false,"expanded":false}},',
    '{"ref":"e1","role":"heading","name":"","state":{}},',
    '"elements":[{"ref":"e1","role":"button","name":"","state":{}},{"ref":"e2","role":"button","name":"","state":{}},',
  ].join(''),
);

/** The value as stored: plain JSON text, or the marker and its deflated JSON where that is smaller. */
export function packJson(value: unknown): string | Buffer {
  const json = JSON.stringify(value);
  if (json.length < PACK_MIN_CHARS) return json;
  const deflated = deflateRawSync(json, { dictionary: DICTIONARY_V1, level: 9 });
  if (deflated.length + 1 >= Buffer.byteLength(json)) return json;
  return Buffer.concat([Buffer.of(DEFLATED_V1), deflated]);
}

/** A stored value read back as its JSON text, whichever way it was stored. */
export function unpackJsonText(stored: Buffer): string {
  if (stored[0] !== DEFLATED_V1) return stored.toString('utf8');
  return inflateRawSync(stored.subarray(1), { dictionary: DICTIONARY_V1 }).toString('utf8');
}

/** A stored value read back as the value it was. */
export function unpackJson<T>(stored: Buffer): T {
  return JSON.parse(unpackJsonText(stored)) as T;
}
