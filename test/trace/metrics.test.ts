// The ingest service's Prometheus metrics: help text on every family, and
// requests counted under the route that served them (not "unmatched").
import { expect } from 'chai';
import { startIngest, type TestIngest } from '../support/ingest.ts';
import { png } from '../support/trace.ts';

describe('trace ingest metrics (prom-client)', () => {
  let ing: TestIngest;
  before(async () => {
    ing = await startIngest();
  });
  after(() => ing.close());

  const scrape = async () => {
    const res = await fetch(`${ing.url}/api/v1/metrics`);
    expect(res.headers.get('content-type')).to.match(/^text\/plain/);
    return res.text();
  };

  it('labels requests with the router path of their route, unmatched only when no route matched', async () => {
    const t = await ing.tenant('met');
    const auth = { authorization: `Bearer ${t.key}` };
    const form = new FormData();
    form.append('image', new Blob([await png(1)], { type: 'image/png' }), 'x.png');
    expect((await fetch(`${ing.url}/api/v1/runs/met-run/screenshots/3/pre`, { method: 'POST', headers: auth, body: form })).status).to.equal(202);
    expect((await fetch(`${ing.url}/api/v1/runs/met-run/logs`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{"text": 5}' })).status).to.equal(422);
    expect((await fetch(`${ing.url}/api/v1/nowhere/at/all`)).status).to.equal(404);
    const text = await scrape();
    expect(text).to.include('trace_ingest_http_requests_total{route="/runs/:run_id/screenshots/:step_index/:kind",method="POST",status="202"} 1');
    expect(text).to.include('trace_ingest_http_requests_total{route="/runs/:run_id/logs",method="POST",status="422"} 1');
    expect(text).to.include('trace_ingest_http_requests_total{route="unmatched",method="GET",status="404"} 1');
    expect(text).to.not.match(/route="[^"]*met-run/); // never the raw path
    expect(text).to.match(/^trace_ingest_http_request_duration_seconds_count\{route="\/runs\/:run_id\/logs",method="POST"\} 1$/m);
    expect(text).to.match(/^trace_ingest_records_total\{kind="screenshots"\} 1$/m);
  });

  it('gives every metric family help text and keeps the queue gauges', async () => {
    const text = await scrape();
    const families = [...text.matchAll(/^# TYPE (\S+) \S+$/gm)].map((m) => m[1]!);
    expect(families).to.include.members(['trace_ingest_queue_depth', 'trace_ingest_queue_limit', 'trace_ingest_queue_rejected_total', 'trace_ingest_writes_total', 'trace_ingest_records_total', 'trace_ingest_http_requests_total', 'trace_ingest_http_request_duration_seconds']);
    for (const f of families) expect(text, f).to.match(new RegExp(`^# HELP ${f} \\S.+$`, 'm'));
    expect(text).to.match(/^trace_ingest_queue_depth \d+$/m);
    expect(text).to.match(/^trace_ingest_queue_limit 1024$/m);
  });
});
