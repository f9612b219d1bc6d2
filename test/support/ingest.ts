// Starts a real trace-ingest service on a loopback port for a test, with
// helpers to make tenants (user + DSN) and log in. Its metadata is on the
// suite's store (test/support/store.ts): SQLite in the data dir, or with
// RUNPLANE_TEST_STORE=postgres a database of the suite's PostgreSQL, one per
// data dir, so a service restarted on the same dir finds its metadata again.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createIngestApp, type IngestApp, type IngestOptions } from '../../plugins/trace-ingest/app.ts';
import { storeEnv } from './store.ts';
import { tempDir } from './trace.ts';

/** The metadata database URL for a data dir on the suite's store (undefined: SQLite in the dir). */
export const metaDatabaseUrl = async (dataDir: string): Promise<string | undefined> => (await storeEnv(dataDir)).SERVICE_DATABASE_URL;

export interface TestTenant {
  tenantId: string;
  email: string;
  password: string;
  dsn: string;
  key: string;
}

export interface TestIngest {
  url: string;
  ingest: IngestApp;
  dir: string;
  tenant(id: string, opts?: { modelio?: boolean; admin?: boolean }): Promise<TestTenant>;
  /** logs in; returns the Cookie header value */
  login(t: { email: string; password: string }): Promise<string>;
  get(path: string, cookie: string): Promise<Response>;
  /** GET with the cookie, parsed JSON */
  json(path: string, cookie: string): Promise<any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON
  close(): Promise<void>;
}

export async function startIngest(opts: Partial<IngestOptions> = {}, wrap?: (inner: http.RequestListener) => http.RequestListener): Promise<TestIngest> {
  const dir = opts.dataDir ?? (await tempDir('ingest-'));
  const ingest = await createIngestApp({ databaseUrl: await metaDatabaseUrl(dir), ...opts, dataDir: dir });
  const inner = ingest.callback();
  const server = http.createServer(wrap ? wrap(inner) : inner);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const svc = ingest.service;
  const t: TestIngest = {
    url,
    ingest,
    dir,
    async tenant(id, o = {}) {
      await svc.createTenant(id, { modelioEnabled: o.modelio ?? true });
      const email = `${o.admin ? 'admin' : 'user'}@${id}.test`;
      const password = `pw-${id}-0123456789`;
      await svc.createUser(email, password, id, o.admin ?? false);
      const minted = await svc.mintDsn(id, 'test', url);
      return { tenantId: id, email, password, dsn: minted.dsn, key: minted.key };
    },
    async login(u) {
      const res = await fetch(`${url}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: u.email, password: u.password }) });
      if (res.status !== 200) throw new Error(`login failed: ${res.status} ${await res.text()}`);
      return res.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
    },
    get(p, cookie) {
      return fetch(`${url}/api/v1${p}`, { headers: { cookie } });
    },
    async json(p, cookie) {
      return (await fetch(`${url}/api/v1${p}`, { headers: { cookie } })).json();
    },
    async close() {
      await ingest.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  return t;
}

/** A response body as JSON, typed loosely for assertions. */
export const body = async (res: Response): Promise<any> => res.json(); // eslint-disable-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON
