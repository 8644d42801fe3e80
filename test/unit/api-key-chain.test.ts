import { describe, expect, it } from 'vitest';
import { inCreationChain, mcpDriverOf, scopesNotHeld } from '../../libs/contracts/index.js';

/** The pure rules of who made which key: an MCP driver's chain, and the scopes a maker may give. */
describe('API key creation chains', () => {
  // root made parent; parent made driver and sibling; driver made child; child made grandchild.
  const root = { keyId: 'key_root', makers: [] };
  const parent = { keyId: 'key_parent', makers: ['key_root'] };
  const driver = { keyId: 'key_driver', makers: ['key_root', 'key_parent'] };
  const sibling = { keyId: 'key_sibling', makers: ['key_root', 'key_parent'] };
  const child = { keyId: 'key_child', makers: ['key_root', 'key_parent', 'key_driver'] };
  const grandchild = { keyId: 'key_grandchild', makers: [...child.makers, 'key_child'] };
  const stranger = { keyId: 'key_stranger', makers: [] };

  it('puts the driver, every key that made it and every key it made in its chain', () => {
    for (const approver of [driver, parent, root, child, grandchild])
      expect(inCreationChain(approver, driver), approver.keyId).toBe(true);
  });

  it('leaves a sibling, a sibling’s keys and a key made apart outside it', () => {
    const nephew = { keyId: 'key_nephew', makers: [...sibling.makers, 'key_sibling'] };
    for (const approver of [sibling, nephew, stranger])
      expect(inCreationChain(approver, driver), approver.keyId).toBe(false);
  });

  it('reads the driver and its makers from a run driven over MCP, and nothing from any other run', () => {
    expect(
      mcpDriverOf({ input: { driver: 'mcp', driver_key_id: 'key_driver', driver_makers: ['key_root'] } }),
    ).toMatchObject({ driver_key_id: 'key_driver', driver_makers: ['key_root'] });
    // A run begun before runs kept the makers: the driver alone.
    expect(
      mcpDriverOf({ input: { driver: 'mcp', driver_key_id: 'key_driver' } })?.driver_makers,
    ).toBeUndefined();
    expect(mcpDriverOf({ input: { text: 'x' } })).toBeUndefined();
  });

  it('lets a maker give only scopes it holds, admin holding every tenant scope and never operator', () => {
    expect(scopesNotHeld(['runs:read', 'runs:write'], ['runs:read', 'approvals:write', 'admin'])).toEqual([
      'approvals:write',
      'admin',
    ]);
    expect(
      scopesNotHeld(['admin'], ['runs:read', 'runs:write', 'approvals:write', 'approvals:any', 'admin']),
    ).toEqual([]);
    expect(scopesNotHeld(['admin'], ['operator'])).toEqual(['operator']);
    expect(scopesNotHeld(['operator'], ['operator'])).toEqual([]);
  });
});
