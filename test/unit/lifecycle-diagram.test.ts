import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { RUN_TRANSITIONS, type RunTransitionRow } from '../../libs/contracts/index.js';
import { lifecycleBlock, lifecycleDiagram, readmeLifecycleBlock } from '../../scripts/lifecycle-diagram.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

describe('the run lifecycle diagram', () => {
  it("is the README's, generated from the transition table (run `npx tsx scripts/lifecycle-diagram.ts --write`)", () => {
    expect(readmeLifecycleBlock(readme), 'the README has a lifecycle block').toBeDefined();
    expect(readmeLifecycleBlock(readme)).toBe(lifecycleBlock());
  });

  it('draws every row of the table on the edge from its state to its status', () => {
    const edges = new Map(
      lifecycleDiagram()
        .split('\n')
        .flatMap((line) => {
          const match = /^ {2}(\S+) --> (\S+): (.*)$/.exec(line);
          return match ? [[`${match[1]} --> ${match[2]}`, match[3] ?? ''] as const] : [];
        }),
    );
    for (const row of RUN_TRANSITIONS) {
      const label = edges.get(`${row.from ?? '[*]'} --> ${row.to}`);
      expect(label, `${row.from} --${row.event}--> ${row.to}`).toContain(row.event);
      for (const actor of row.by) expect(label).toContain(actor);
    }
  });

  it('changes when a row is added, so the README cannot keep an old table', () => {
    const added: RunTransitionRow = {
      from: 'running',
      event: 'release',
      to: 'parked',
      by: ['lifecycle'],
      script: 'test',
    };
    expect(lifecycleBlock([...RUN_TRANSITIONS, added])).not.toBe(lifecycleBlock());
    expect(lifecycleDiagram([...RUN_TRANSITIONS, added])).toContain('running --> parked: park');
    expect(lifecycleDiagram([...RUN_TRANSITIONS, added])).toContain('release by lifecycle');
  });
});
