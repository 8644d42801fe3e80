import { describe, expect, it } from 'vitest';
import { ScriptedModel, scriptSchema } from '../../libs/models/index.js';
import type { TranscriptEntry } from '../../libs/runtime/index.js';

const tools = [{ name: 'browser.act', description: '', parameters: {} }];
const limits = { deadlineMs: Date.now() + 1_000 };

function observationResult(revision: string, elements: Array<{ ref: string; role: string; name: string }>) {
  return { observation: { revision, elements } };
}

describe('the scripted model', () => {
  const script = scriptSchema.parse({
    steps: [
      { tool: 'browser.navigate', url: 'https://shop.test/' },
      { tool: 'browser.act', target: { role: 'button', name: 'Buy' }, action: 'click' },
    ],
    answer: 'bought',
  });

  it('takes its next step from the transcript, so a resumed run continues where it stopped', async () => {
    const model = new ScriptedModel(script);
    const first = await model.call({ transcript: [{ kind: 'input', text: 'go' }], tools }, limits);
    expect(first.toolCalls).toEqual([
      { id: 'call_1', name: 'browser.navigate', args: { url: 'https://shop.test/' } },
    ]);

    const transcript: TranscriptEntry[] = [
      { kind: 'input', text: 'go' },
      { kind: 'model', toolCalls: first.toolCalls },
      {
        kind: 'tool',
        callId: 'call_1',
        name: 'browser.navigate',
        outcome: {
          ok: true,
          result: observationResult('rev-7', [{ ref: 'e3', role: 'button', name: 'Buy' }]),
        },
      },
    ];
    // A fresh instance (another worker) gives the same next step.
    const second = await new ScriptedModel(script).call({ transcript, tools }, limits);
    expect(second.toolCalls).toEqual([
      { id: 'call_2', name: 'browser.act', args: { revision: 'rev-7', element: 'e3', action: 'click' } },
    ]);
    const done = await model.call(
      { transcript: [...transcript, { kind: 'model', toolCalls: second.toolCalls }], tools },
      limits,
    );
    expect(done).toMatchObject({ toolCalls: [], answer: 'bought' });
  });

  it('asks for its next step even when it may not use tools: its answer would claim undone steps', async () => {
    const asked = await new ScriptedModel(script).call({ transcript: [], tools: [] }, limits);
    expect(asked.answer).toBeUndefined();
    expect(asked.toolCalls).toEqual([
      { id: 'call_1', name: 'browser.navigate', args: { url: 'https://shop.test/' } },
    ]);
  });

  it('fails its step element_not_found when the named element is not on the latest observation', async () => {
    const transcript: TranscriptEntry[] = [
      { kind: 'model', toolCalls: [] },
      {
        kind: 'tool',
        callId: 'call_1',
        name: 'browser.navigate',
        outcome: { ok: true, result: observationResult('rev-1', [{ ref: 'e1', role: 'link', name: 'Buy' }]) },
      },
    ];
    expect(await new ScriptedModel(script).call({ transcript, tools }, limits)).toMatchObject({
      toolCalls: [],
      failedStep: { code: 'element_not_found', mayFail: false },
    });
  });

  it('refuses a script of unknown tools when it is given', () => {
    expect(scriptSchema.safeParse({ steps: [{ tool: 'shell.exec', args: {} }], answer: '' }).success).toBe(
      false,
    );
  });

  it('asks for a person at a `person` step, and acts on the page the person left', async () => {
    const withPerson = scriptSchema.parse({
      steps: [
        { tool: 'browser.navigate', url: 'https://shop.test/' },
        { person: 'Sign in, then hand back' },
        { tool: 'browser.act', target: { role: 'link', name: 'Orders' }, action: 'click' },
      ],
      answer: 'signed in',
    });
    const asked = await new ScriptedModel(withPerson).call(
      { transcript: [{ kind: 'model', toolCalls: [] }], tools },
      limits,
    );
    expect(asked.toolCalls).toEqual([
      { id: 'call_2', name: 'browser.request_person', args: { reason: 'Sign in, then hand back' } },
    ]);
    // A takeover of the running run is told as a note that carries the page as it is now.
    const transcript: TranscriptEntry[] = [
      { kind: 'model', toolCalls: [] },
      { kind: 'model', toolCalls: asked.toolCalls },
      {
        kind: 'input',
        text: 'A person held the page for 12 s and sent 8 inputs',
        personApprovalId: 'apr_1',
        observation: { revision: 'rev-9', elements: [{ ref: 'e4', role: 'link', name: 'Orders' }] },
      },
    ];
    const acted = await new ScriptedModel(withPerson).call({ transcript, tools }, limits);
    expect(acted.toolCalls).toEqual([
      { id: 'call_3', name: 'browser.act', args: { revision: 'rev-9', element: 'e4', action: 'click' } },
    ]);
    expect(scriptSchema.safeParse({ steps: [{ person: 'x'.repeat(501) }], answer: '' }).success).toBe(false);
    // A script as a run stores it (parsed once at submission) parses again to the same steps.
    expect(scriptSchema.parse(withPerson)).toEqual(withPerson);
  });
});
