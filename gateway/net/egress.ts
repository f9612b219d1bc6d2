// The gateway's egress guard for webhook deliveries. The address classification and
// the resolve-once/pin logic live in shared/egress.ts so the plane agents' in-process
// egress proxy applies exactly the same rules.
export { EgressRefused, egressRefusal, isPrivateAddress, pinnedLookup, resolvePublic } from '../../shared/egress.ts';
