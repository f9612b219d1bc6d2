// The host's own addresses as a target: a listener bound to every interface (a service
// bound to 0.0.0.0, as operators' services often are) and the non-loopback addresses
// it answers on, for the egress guard tests.
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';

/**
 * The host's non-loopback addresses a browser can be sent to (link-local ones need a
 * zone id, which a URL cannot carry). This machine has 192.0.2.2 and fd00::2 on eth0.
 * Throws rather than letting a test pass on nothing.
 */
export function ownAddresses(): string[] {
  const found = Object.values(networkInterfaces())
    .flatMap((l) => l ?? [])
    .filter((i) => !i.internal && !i.address.toLowerCase().startsWith('fe80:'))
    .map((i) => i.address);
  if (found.length === 0) throw new Error('os.networkInterfaces() reports no non-loopback address: this test needs one to aim at the host itself');
  return found;
}

export const urlFor = (address: string, port: number, p: string): string => `http://${address.includes(':') ? `[${address}]` : address}:${port}${p}`;

export interface HostListener {
  port: number;
  /** `METHOD /path?query` of every request that reached it */
  hits: string[];
  close(): Promise<void>;
}

/** A listener on every interface of the host (dual stack when the host has IPv6) that records what reaches it. */
export async function startHostListener(): Promise<HostListener> {
  const hits: string[] = [];
  const server: Server = createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`);
    res.writeHead(200, { 'content-type': 'text/html' }).end('<title>host service</title><h1>internal admin</h1>');
  });
  server.listen(0, '::');
  await Promise.race([once(server, 'listening'), once(server, 'error')]).catch(() => undefined);
  if (!server.listening) {
    server.listen(0, '0.0.0.0');
    await once(server, 'listening');
  }
  return {
    port: (server.address() as AddressInfo).port,
    hits,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
