import { describe, expect, it } from 'vitest';
import { canonicalHost, EgressGuard, judgeOriginAtCreation } from '../../libs/egress/index.js';

const none = new EgressGuard({ allowCidrs: [], ownPorts: [] });
const loopback = new EgressGuard({ allowCidrs: ['127.0.0.0/8', '::1/128'], ownPorts: [3001, 6379] });

describe('the egress address guard', () => {
  it.each([
    '127.0.0.1',
    '127.255.255.254',
    '10.1.2.3',
    '172.16.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::',
    '::1',
    'fe80::1',
    'fc00::1',
    'fd00:ec2::254',
    'ff02::1',
  ])(
    'refuses the loopback, private, link-local, unique-local, multicast or metadata address %s',
    (address) => {
      expect(none.judge(address, 80)).toMatchObject({ allowed: false, reason: 'private_address' });
    },
  );

  it.each([
    ['::ffff:127.0.0.1', 'IPv4-mapped'],
    ['::ffff:7f00:1', 'IPv4-mapped, hex'],
    ['::ffff:169.254.169.254', 'IPv4-mapped metadata'],
    ['::127.0.0.1', 'IPv4-compatible'],
    ['::7f00:1', 'IPv4-compatible, hex'],
    ['::8.8.8.8', 'IPv4-compatible (deprecated, never routed)'],
    ['::ffff:0:127.0.0.1', 'IPv4-translated'],
    ['::ffff:0:7f00:1', 'IPv4-translated, hex'],
    ['64:ff9b::127.0.0.1', 'NAT64'],
    ['64:ff9b::a9fe:a9fe', 'NAT64 metadata'],
    ['64:ff9b:1::7f00:1', 'local-use NAT64'],
    ['2002:7f00:1::', '6to4 of loopback'],
    ['2002:a9fe:a9fe::1', '6to4 of the metadata address'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo'],
  ])('refuses an IPv6 address that embeds a refused IPv4 address: %s (%s)', (address) => {
    expect(none.judge(address, 80).allowed).toBe(false);
  });

  it.each([
    '93.184.215.14',
    '8.8.8.8',
    '2606:2800:21f:cb07:6820:80da:af6b:8b2c',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
    '2002:808:808::1',
  ])('allows the public address %s', (address) => {
    expect(none.judge(address, 443)).toEqual({ allowed: true });
  });

  it('allows what the allowance names, and no more', () => {
    const only = new EgressGuard({ allowCidrs: ['127.0.0.2/32'], ownPorts: [] });
    expect(only.judge('127.0.0.2', 80)).toEqual({ allowed: true });
    expect(only.judge('::ffff:127.0.0.2', 80)).toEqual({ allowed: true });
    expect(only.judge('127.0.0.1', 80).allowed).toBe(false);
    expect(only.judge('::1', 80).allowed).toBe(false);
    expect(loopback.judge('127.0.0.1', 8080)).toEqual({ allowed: true });
    expect(loopback.judge('::1', 8080)).toEqual({ allowed: true });
    expect(loopback.judge('10.0.0.1', 8080).allowed).toBe(false);
    // The translated and compatible forms are never routed: an allowance of loopback does not open them.
    expect(loopback.judge('::127.0.0.1', 8080).allowed).toBe(false);
    expect(loopback.judge('::ffff:0:127.0.0.1', 8080).allowed).toBe(false);
  });

  it("refuses the fleet's own ports on an allowed address, and ports added later", () => {
    expect(loopback.judge('127.0.0.1', 3001)).toMatchObject({ allowed: false, reason: 'own_port' });
    expect(loopback.judge('::ffff:127.0.0.1', 6379)).toMatchObject({ allowed: false, reason: 'own_port' });
    expect(loopback.judge('::1', 6379)).toMatchObject({ allowed: false, reason: 'own_port' });
    const guard = new EgressGuard({ allowCidrs: ['127.0.0.0/8'], ownPorts: [] });
    expect(guard.judge('127.0.0.1', 40_000)).toEqual({ allowed: true });
    guard.refusePort(40_000);
    expect(guard.judge('127.0.0.1', 40_000)).toMatchObject({ allowed: false, reason: 'own_port' });
    // A public address on the same number is some other service.
    expect(guard.judge('8.8.8.8', 40_000)).toEqual({ allowed: true });
  });

  it('refuses what is no address', () => {
    expect(none.judge('localhost', 80).allowed).toBe(false);
    expect(none.judge('', 80).allowed).toBe(false);
  });
});

describe('host spellings', () => {
  it.each([
    ['2130706433', '127.0.0.1'],
    ['0x7f.1', '127.0.0.1'],
    ['0177.0.0.1', '127.0.0.1'],
    ['127.1', '127.0.0.1'],
    ['0x7F000001', '127.0.0.1'],
    ['[::ffff:127.0.0.1]', '::ffff:7f00:1'],
    ['::ffff:127.0.0.1', '::ffff:7f00:1'],
    ['[::127.0.0.1]', '::7f00:1'],
    ['LOCALHOST', 'localhost'],
    ['Example.COM', 'example.com'],
  ])('reads %s as %s', (raw, canonical) => {
    expect(canonicalHost(raw)).toBe(canonical);
  });

  it.each(['a b', 'x@y', 'x/y', '1.2.3.4.5', '[fe80::1%eth0]', ''])(
    'refuses the malformed host %j',
    (raw) => {
      expect(canonicalHost(raw)).toBeUndefined();
    },
  );
});

describe('an origin judged at profile creation', () => {
  it.each([
    'http://169.254.169.254',
    'http://[::ffff:127.0.0.1]',
    'http://[::ffff:a9fe:a9fe]',
    'http://2130706433',
    'http://0x7f.1:8080',
    'http://0177.0.0.1',
    'http://[::127.0.0.1]:3000',
    'http://localhost:3000',
    'https://admin.localhost',
    'http://redis:6379'.replace('redis', '10.0.0.7'),
  ])('refuses %s', (origin) => {
    expect(judgeOriginAtCreation(origin, none)).toMatchObject({ allowed: false });
  });

  it('accepts names, which are judged at connection, and public literals', () => {
    expect(judgeOriginAtCreation('https://example.com', none)).toEqual({ allowed: true });
    expect(judgeOriginAtCreation('http://redis:6379', none)).toEqual({ allowed: true });
    expect(judgeOriginAtCreation('http://8.8.8.8', none)).toEqual({ allowed: true });
  });

  it('judges the port too: an allowed loopback origin on an own port is refused', () => {
    expect(judgeOriginAtCreation('http://127.0.0.1:8080', loopback)).toEqual({ allowed: true });
    expect(judgeOriginAtCreation('http://localhost:3001', loopback)).toMatchObject({
      allowed: false,
      reason: 'own_port',
    });
    expect(judgeOriginAtCreation('http://[::1]:6379', loopback)).toMatchObject({ allowed: false });
  });
});
