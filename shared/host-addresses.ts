// The addresses of the host the guard runs on: every address of every interface
// (os.networkInterfaces(), both families, internal or not, zone ids dropped), plus
// 0.0.0.0 and ::, which connect to the host too. A service bound to 0.0.0.0 answers on
// the host's public address as well, so that address is refused like loopback. The
// list is read when first needed and read again when a check finds it older than
// maxAgeMs (1 s by default): an address added or changed (DHCP, a new interface) is
// refused within a second, without a timer and for about 50 µs per read.
import { networkInterfaces } from 'node:os';
import { addressBits } from './egress-ranges.ts';

type InterfaceSource = () => ReturnType<typeof networkInterfaces>;

export class HostAddresses {
  private bits = new Set<bigint>();
  private listed: string[] = [];
  private readAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly source: InterfaceSource = networkInterfaces,
    private readonly maxAgeMs = 1000,
    private readonly now: () => number = Date.now,
  ) {}

  private refresh(): void {
    if (this.now() - this.readAt < this.maxAgeMs) return;
    const listed = ['0.0.0.0', '::'];
    for (const list of Object.values(this.source())) for (const i of list ?? []) listed.push(i.address.split('%')[0] ?? i.address);
    const bits = new Set<bigint>();
    for (const a of listed) {
      const b = addressBits(a);
      if (b !== undefined) bits.add(b);
    }
    this.bits = bits;
    this.listed = listed;
    this.readAt = this.now();
  }

  /** True when the address (as addressBits gives it) is one of the host's. */
  has(bits: bigint): boolean {
    this.refresh();
    return this.bits.has(bits);
  }

  /** The host's addresses as last read (refreshed when stale). */
  list(): string[] {
    this.refresh();
    return [...this.listed];
  }
}

/** The process's view of its host, shared by every check. */
export const hostAddresses = new HostAddresses();
