import { describe, expect, it } from 'vitest';
import { addressBlock } from '../../libs/telemetry/address-block.js';

describe('the network an address counts in', () => {
  it.each([
    ['127.0.0.1', '127.0.0.0/24'],
    ['127.0.0.254', '127.0.0.0/24'],
    ['203.0.113.77', '203.0.113.0/24'],
    ['::ffff:203.0.113.77', '203.0.113.0/24'],
    ['2001:db8:1:2:aaaa:bbbb:cccc:dddd', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::1', '2001:db8:1:2::/64'],
    ['2001:0db8:0001:0002:ffff::', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['64:ff9b::192.0.2.33', '64:ff9b:0:0::/64'],
    ['not-an-address', 'not-an-address'],
  ])('counts %s in %s', (address, block) => {
    expect(addressBlock(address)).toBe(block);
  });

  it('puts two addresses of one /64 together and of two /64s apart', () => {
    expect(addressBlock('2001:db8:1:2::a')).toBe(addressBlock('2001:db8:1:2:ffff::b'));
    expect(addressBlock('2001:db8:1:2::a')).not.toBe(addressBlock('2001:db8:1:3::a'));
  });
});
