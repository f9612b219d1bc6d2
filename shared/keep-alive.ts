// Kept-alive connections closed where clients can see it coming. Node closes an
// idle kept-alive connection after server.keepAliveTimeout and, by default,
// tells clients exactly that number (`Keep-Alive: timeout=5`); clients that
// honour the hint (undici, node's Agent) keep the connection for the hint less
// one second. On a loaded host either side's event loop can lag past that
// second, so a request goes out on a socket the server is closing: a reset
// (`fetch failed`) with no access log line. The server now keeps idle
// connections well past what it announces and past common pools' idle times
// (load balancers keep 60 s), so a client that honours the hint never races
// the close.
import type { Server } from 'node:http';

/** What the server waits before closing an idle kept-alive connection. */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;
/** What it tells clients (Keep-Alive: timeout=N): 5 s below the close. */
export const KEEP_ALIVE_HINT_SECONDS = 60;

export function keepAliveBeyondHint(server: Server): void {
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  // before the app's listener, so every answer carries it (node keeps a Keep-Alive header set by the app)
  server.prependListener('request', (_req, res) => {
    res.setHeader('Keep-Alive', `timeout=${KEEP_ALIVE_HINT_SECONDS}`);
  });
}
