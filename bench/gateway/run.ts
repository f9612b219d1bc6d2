// bench/gateway: requests per second and p50/p99 latency on loopback of
//   (a) an authenticated GET /v1/runs/{id}/status
//   (b) POST /v1/predict validating a 50-step plan
//   (c) GET /v1/runs?limit=100 over 100 runs of 200 recorded steps each
//       (among 1,100 runs of three tenants)
// each on the in-memory store, the SQLite store of record (the embedded
// default) and PostgreSQL (a throwaway local cluster), the list also on Redis
// as the store of record (a throwaway redis-server), beside a bare Koa route
// answering the same JSON, in the same run; and a floor (floor-server.ts): the
// bare route plus the token lookup, the store read, a log line and a histogram
// that any authenticated service with a store of record does per request, and
// for POST /v1/predict the same with the schema check and one acceptance commit.
// Usage: npm run bench:gateway [-- --seconds 5 --connections 10]
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import autocannon from 'autocannon';
import { startPostgres } from '../../test/support/postgres.ts';
import { startRedis } from '../../test/support/redis.ts';
import { builtPath } from '../../shared/build.mjs';

const args = process.argv.slice(2);
const opt = (name: string, dflt: number) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const seconds = opt('seconds', 5);
const connections = opt('connections', 10);
const here = import.meta.dirname;

function start(file: string, ...argv: string[]): Promise<{ child: ChildProcess; line: string }> {
  const child = spawn(process.execPath, [builtPath(path.join(here, file)), ...argv], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.stdout!.once('data', (d: Buffer) => resolve({ child, line: d.toString().trim().split('\n')[0]! }));
    child.once('exit', (c) => reject(new Error(`${file} exited ${c}`)));
  });
}

const plan50 = Array.from({ length: 50 }, (_, i) =>
  i % 10 === 0
    ? { intent: `open page ${i}`, type: 'navigate', url: `https://shop.example.com/list?page=${i}`, wait_for_load: true }
    : i % 10 === 5
      ? { intent: 'read rows', type: 'extract_data', extract: { item_selector: '.card', max_items: 20, fields: [{ name: 'title', type: 'str', selector: 'h2' }, { name: 'price', type: 'float', selector: '.price' }] } }
      : { intent: `click item ${i}`, type: 'click', params: { selector: `#item-${i}` }, hints: { expect_url_contains: ['/item'] } },
);
const predictBody = JSON.stringify({ plan: { steps: plan50, runtime: { compute_backend: 'dom_plane', max_cost: 1 } }, detached: true });

interface Row {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
}

async function measure(name: string, url: string, opts: Partial<autocannon.Options>): Promise<Row> {
  // a short warm-up so JIT and connection setup are not in the numbers
  await autocannon({ url, connections, duration: 1, ...opts });
  const r = await autocannon({ url, connections, duration: seconds, ...opts });
  return { name, rps: Math.round(r.requests.average), p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx };
}

type Started = { url: string; token: string; run_id: string; big_run_id: string; list_token: string };

const pg = await startPostgres();
const redis = await startRedis();
const mem = await start('gateway-server.ts', 'memory');
const sql = await start('gateway-server.ts', 'sqlite');
const pgw = await start('gateway-server.ts', 'postgres', pg.url);
const rdw = await start('gateway-server.ts', 'redis', redis.url);
const bare = await start('bare-server.ts');
const floor = await start('floor-server.ts');
try {
  const stores = [
    { name: 'memory', ...(JSON.parse(mem.line) as Started) },
    { name: 'sqlite', ...(JSON.parse(sql.line) as Started) },
    { name: 'postgres', ...(JSON.parse(pgw.line) as Started) },
    { name: 'redis', ...(JSON.parse(rdw.line) as Started) },
  ];
  const rows: Row[] = [];
  rows.push(await measure('bare GET (same JSON)', `${bare.line}/status`, {}));
  const fl = JSON.parse(floor.line) as { url: string; token: string; run_id: string };
  const floorRow = await measure('floor GET status (auth, sqlite, log, metric)', `${fl.url}/v1/runs/${fl.run_id}/status`, { headers: { 'X-Service-Token': fl.token } });
  for (const g of stores.slice(0, 3)) rows.push(await measure(`gateway GET status (${g.name})`, `${g.url}/v1/runs/${g.run_id}/status`, { headers: { 'X-Service-Token': g.token } }));
  // the same route on a run with 50 steps recorded (~25 KB row): what a poll of a real run costs
  const bigRows: Row[] = [];
  for (const g of stores.slice(0, 3)) bigRows.push(await measure(`gateway GET status, 50-step run (${g.name})`, `${g.url}/v1/runs/${g.big_run_id}/status`, { headers: { 'X-Service-Token': g.token } }));
  // a page of 100 runs, each row ~60 KB (200 steps recorded): what a dashboard's list costs
  for (const g of stores) bigRows.push(await measure(`gateway GET runs list, 100 x 200 steps (${g.name})`, `${g.url}/v1/runs?limit=100`, { headers: { 'X-Service-Token': g.list_token } }));
  const post = (token: string) => ({ method: 'POST' as const, body: predictBody, headers: { 'Content-Type': 'application/json', 'X-Service-Token': token } });
  rows.push(await measure('bare POST (parse 50 steps)', `${bare.line}/v1/predict`, post('')));
  const floorPost = await measure('floor POST predict 50 (auth, schema, sqlite commit, log, metric)', `${fl.url}/v1/predict`, post(fl.token));
  for (const g of stores.slice(0, 3)) rows.push(await measure(`gateway POST predict 50 (${g.name})`, `${g.url}/v1/predict`, post(g.token)));
  console.log(`\nbench/gateway: ${seconds}s per case, ${connections} connections, loopback, ${predictBody.length} byte plan body, load average ${(await import('node:os')).loadavg().map((l) => l.toFixed(2)).join(' ')}\n`);
  console.log('case'.padEnd(44) + 'req/s'.padStart(9) + 'p50 ms'.padStart(9) + 'p99 ms'.padStart(9) + 'non2xx'.padStart(8));
  for (const r of [rows[0]!, floorRow, ...rows.slice(1, 5), floorPost, ...rows.slice(5), ...bigRows]) console.log(r.name.padEnd(44) + String(r.rps).padStart(9) + String(r.p50).padStart(9) + String(r.p99).padStart(9) + String(r.non2xx).padStart(8));
  const ratio = (a: Row, b: Row) => (a.rps / b.rps).toFixed(2);
  const [bareGet, gMem, gSql, gPg, barePost, pMem, pSql, pPg] = rows as [Row, Row, Row, Row, Row, Row, Row, Row];
  console.log(`\nthroughput ratio gateway/bare: status ${ratio(gMem, bareGet)} memory, ${ratio(gSql, bareGet)} sqlite, ${ratio(gPg, bareGet)} postgres; predict ${ratio(pMem, barePost)} memory, ${ratio(pSql, barePost)} sqlite, ${ratio(pPg, barePost)} postgres`);
  console.log(`status floor/bare ${ratio(floorRow, bareGet)} (the most any gateway doing those four parts can reach); gateway/floor: ${ratio(gMem, floorRow)} memory, ${ratio(gSql, floorRow)} sqlite`);
  console.log(`predict floor/bare ${ratio(floorPost, barePost)}; gateway/floor: ${ratio(pMem, floorPost)} memory, ${ratio(pSql, floorPost)} sqlite, ${ratio(pPg, floorPost)} postgres`);
  console.log(`status of a 50-step run / bare: ${bigRows.slice(0, 3).map((b, i) => `${ratio(b, bareGet)} ${stores[i]!.name}`).join(', ')}`);
  console.log(`store/memory: status ${ratio(gSql, gMem)} sqlite, ${ratio(gPg, gMem)} postgres; predict ${ratio(pSql, pMem)} sqlite, ${ratio(pPg, pMem)} postgres`);
} finally {
  const exits = [mem, sql, pgw, rdw, bare, floor].map((c) => new Promise((r) => (c.child.exitCode !== null ? r(null) : c.child.once('exit', r))));
  for (const c of [mem, sql, pgw, rdw, bare, floor]) c.child.kill('SIGTERM');
  await Promise.all(exits);
  await pg.stop();
  await redis.stop();
}
