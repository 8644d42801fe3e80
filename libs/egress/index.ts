export { canonicalHost, isLocalhostName } from './address-ranges.js';
export {
  describeRefusal,
  EgressGuard,
  type EgressPolicy,
  judgeOriginAtCreation,
  portOf,
  type RefusalReason,
  refusedProfileOrigin,
  type Verdict,
} from './egress-guard.js';
export {
  type EgressDoor,
  type EgressLog,
  EgressProxy,
  type EgressProxyOptions,
  parseAuthority,
} from './egress-proxy.js';
export {
  AddressRefused,
  type CheckedAddress,
  checkedLookup,
  type Resolution,
  resolveChecked,
} from './resolve-checked.js';
