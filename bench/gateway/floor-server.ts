// The floor: a bare Koa route plus only what any authenticated service with a
// store of record does per request, written as directly as it can be: the token
// looked up by its SHA-256 (a constant-time compare after), the run's head read
// from SQLite by a prepared statement and checked against the tenant, one access
// log line (pino, to a discarding stream) and one latency histogram (prom-client).
// No router, no request id, no limits, no error mapping. bench/gateway compares
// it with the bare route (what those four parts cost) and with the gateway (what
// the gateway adds above them). Arguments name the parts to leave out (auth,
// store, log, metric), to see what each costs. Prints `{url, token, run_id}` on
// stdout as JSON.
// POST /v1/predict has a floor of its own: the same token lookup, the body read
// (1 MB cap) and checked against predict.schema.json with the gateway's own
// validator, one acceptance commit (the run's row with its head and body, and
// the tenant's slot count, in one SQLite transaction, its log made durable by an
// fdatasync on the threadpool before the answer, as the gateway's committer does
// but without sharing one fsync between requests), the log line and the
// histogram; it answers {run_id, status: queued} with 201.
import Koa from 'koa';
import getRawBody from 'raw-body';
import { validator } from '../../schemas/index.ts';
import Database from 'better-sqlite3';
import { pino } from 'pino';
import { Histogram, Registry } from 'prom-client';
import { hash, timingSafeEqual, randomUUID } from 'node:crypto';
import { fdatasync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { AddressInfo } from 'node:net';

const dir = mkdtempSync(path.join(tmpdir(), 'runplane-bench-floor-'));
const db = new Database(path.join(dir, 'floor.sqlite'));
db.pragma('journal_mode = WAL');
db.exec('CREATE TABLE runs (run_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, head TEXT NOT NULL, body TEXT NOT NULL)');
const runId = randomUUID();
const now = new Date().toISOString();
const head = { run_id: runId, status: 'queued', phase: 'queued', halt_class: null, failure_help: null, created_at: now, updated_at: now, ended_at: null };
db.prepare('INSERT INTO runs VALUES (?, ?, ?, ?)').run(runId, 'bench', JSON.stringify(head), JSON.stringify({ plan: { steps: [] } }));
const read = db.prepare<[string], { tenant_id: string; head: string }>('SELECT tenant_id, head FROM runs WHERE run_id = ?');
db.pragma('synchronous = NORMAL');
db.exec('CREATE TABLE slots (tenant_id TEXT PRIMARY KEY, n INTEGER NOT NULL)');
const insertRun = db.prepare('INSERT INTO runs VALUES (?, ?, ?, ?)');
const takeSlot = db.prepare('INSERT INTO slots VALUES (?, 1) ON CONFLICT (tenant_id) DO UPDATE SET n = n + 1');
const accept = db.transaction((id: string, tenantId: string, headText: string, bodyText: string) => {
  insertRun.run(id, tenantId, headText, bodyText);
  takeSlot.run(tenantId);
});
const predictBody = validator('predict.schema.json');
// the write-ahead log exists once the first row is in: its frames are made durable per acceptance
const walFd = openSync(path.join(dir, 'floor.sqlite-wal'), 'r+');
const durable = () => new Promise<void>((resolve, reject) => fdatasync(walFd, (err) => (err ? reject(err) : resolve())));

const without = new Set(process.argv.slice(2));
const token = 'f'.repeat(64);
const digest = (t: string): Buffer => hash('sha256', t, 'buffer');
const tenants = new Map([[digest(token).toString('hex'), { digest: digest(token), tenant_id: 'bench' }]]);

const log = pino({ base: null }, new Writable({ write: (_c, _e, cb) => cb() }));
const registry = new Registry();
const seconds = new Histogram({ name: 'http_request_duration_seconds', help: 'latency', labelNames: ['route', 'status'], registers: [registry] });

const app = new Koa();
app.use(async (ctx, next) => {
  if (ctx.method !== 'POST') return next();
  const started = performance.now();
  const d = without.has('auth') ? undefined : digest(ctx.get('x-service-token'));
  const entry = d ? tenants.get(d.toString('hex')) : { digest: undefined, tenant_id: 'bench' };
  if (!entry || (d && !timingSafeEqual(d, entry.digest!)) || ctx.path !== '/v1/predict') {
    ctx.status = entry ? 404 : 401;
    ctx.body = { detail: entry ? 'not found' : 'invalid token' };
  } else {
    let body: unknown;
    try {
      body = JSON.parse((await getRawBody(ctx.req, { limit: '1mb' })).toString('utf8'));
    } catch {
      body = undefined;
    }
    if (body === undefined || !predictBody(body)) {
      ctx.status = 400;
      ctx.body = { detail: 'invalid body' };
    } else {
      const id = randomUUID();
      const at = new Date().toISOString();
      const runHead = { run_id: id, status: 'queued', phase: 'queued', halt_class: null, failure_help: null, created_at: at, updated_at: at, ended_at: null };
      if (!without.has('store')) {
        accept(id, entry.tenant_id, JSON.stringify(runHead), JSON.stringify({ ...runHead, request: body }));
        await durable();
      }
      ctx.status = 201;
      ctx.body = { run_id: id, status: 'queued' };
    }
  }
  if (!without.has('metric')) seconds.observe({ route: 'predict', status: ctx.status }, (performance.now() - started) / 1000);
  if (!without.has('log')) log.info({ method: ctx.method, path: ctx.path, status: ctx.status, ms: performance.now() - started, tenant_id: entry?.tenant_id }, 'request');
});
app.use(async (ctx) => {
  const started = performance.now();
  const raw = ctx.get('x-service-token');
  const d = without.has('auth') ? undefined : digest(raw);
  const entry = d ? tenants.get(d.toString('hex')) : { digest: undefined, tenant_id: 'bench' };
  const m = /^\/v1\/runs\/([0-9a-f-]{36})\/status$/.exec(ctx.path);
  const authentic = entry && (!d || timingSafeEqual(d, entry.digest!));
  const row = authentic && m ? (without.has('store') ? { tenant_id: 'bench', head: JSON.stringify(head) } : read.get(m[1]!)) : undefined;
  if (!entry) {
    ctx.status = 401;
    ctx.body = { detail: 'invalid token' };
  } else if (!row || row.tenant_id !== entry.tenant_id) {
    ctx.status = 404;
    ctx.body = { detail: 'run not found' };
  } else {
    ctx.type = 'application/json';
    ctx.body = row.head;
  }
  if (!without.has('metric')) seconds.observe({ route: 'status', status: ctx.status }, (performance.now() - started) / 1000);
  if (!without.has('log')) log.info({ method: ctx.method, path: ctx.path, status: ctx.status, ms: performance.now() - started, tenant_id: entry?.tenant_id }, 'request');
});
const server = app.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, token, run_id: runId })}\n`);
});
process.on('SIGTERM', () =>
  server.close(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  }),
);
