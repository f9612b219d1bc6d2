// Baseline: a bare Koa server answering the same JSON bodies with no auth,
// limits, validation or logging. Prints its URL on stdout.
import Koa from 'koa';
import getRawBody from 'raw-body';
import type { AddressInfo } from 'node:net';

const status = { run_id: '00000000-0000-0000-0000-000000000000', status: 'queued', phase: 'queued', halt_class: null, failure_help: null, created_at: new Date().toISOString(), updated_at: new Date().toISOString(), ended_at: null };

const app = new Koa();
app.use(async (ctx) => {
  if (ctx.method === 'GET') {
    ctx.body = status;
    return;
  }
  // read and parse the body, as any JSON route must
  const raw = await getRawBody(ctx.req, { limit: '1mb' });
  JSON.parse(raw.toString('utf8'));
  ctx.body = { run_id: status.run_id, status: 'queued' };
});
const server = app.listen(0, '127.0.0.1', () => {
  process.stdout.write(`http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
