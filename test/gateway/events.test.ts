import { expect } from 'chai';
import { sign, signingKey } from '../../gateway/runs/webhooks.ts';
import { Webhook } from 'standardwebhooks';
import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import { createHmac } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import WebSocket from 'ws';
import { startGateway, newToken, step, sleep, until, type TestGateway } from '../support/gateway.ts';
import { startRedis, type RedisHandle } from '../support/redis.ts';
import { isPrivateAddress, resolvePublic } from '../../gateway/net/egress.ts';

interface Ev {
  seq: number;
  type: string;
  run_id: string;
  data: Record<string, unknown>;
}

/** Reads an SSE stream until it ends (or `limit` events), returning the parsed events with their ids. */
async function readSse(url: string, token: string, opts: { lastEventId?: string; onOpen?: () => void; limit?: number } = {}): Promise<Array<{ id: string; event: string; data: Ev }>> {
  const headers: Record<string, string> = { 'X-Service-Token': token };
  if (opts.lastEventId) headers['Last-Event-ID'] = opts.lastEventId;
  const res = await fetch(url, { headers });
  expect(res.status).to.equal(200);
  expect(res.headers.get('content-type')).to.match(/text\/event-stream/);
  opts.onOpen?.();
  const out: Array<{ id: string; event: string; data: Ev }> = [];
  const decoder = new TextDecoder();
  let buf = '';
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buf += decoder.decode(chunk, { stream: true });
    let i: number;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const fields = Object.fromEntries(block.split('\n').filter((l) => l && !l.startsWith(':')).map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]));
      if (fields.data) out.push({ id: fields.id!, event: fields.event!, data: JSON.parse(fields.data) as Ev });
      if (opts.limit && out.length >= opts.limit) return out;
    }
  }
  return out;
}

function wsEvents(url: string, options: WebSocket.ClientOptions, protocols?: string[]): { events: Ev[]; closed: Promise<{ code: number }>; opened: Promise<void> } {
  const ws = protocols ? new WebSocket(url, protocols, options) : new WebSocket(url, options);
  const events: Ev[] = [];
  ws.on('message', (m) => events.push(JSON.parse(String(m)) as Ev));
  const closed = new Promise<{ code: number }>((resolve) => ws.on('close', (code) => resolve({ code })));
  const opened = new Promise<void>((resolve, reject) => {
    ws.on('open', () => resolve());
    ws.on('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    ws.on('error', reject);
  });
  return { events, closed, opened };
}

describe('run events: JSON, SSE, WebSocket, webhooks', () => {
  let gw: TestGateway;
  const token = newToken();
  const other = newToken();
  const noLogs = newToken();

  before(async () => {
    gw = await startGateway({
      keys: {
        [token]: { tenant_id: 'watcher', rate_limit_per_minute: 0, max_concurrent_runs: 100 },
        [other]: { tenant_id: 'stranger', rate_limit_per_minute: 0 },
        [noLogs]: { tenant_id: 'watcher', scopes: ['run', 'status'] },
      },
    });
  });
  after(() => gw.close());

  const start = async (t = token) => (await gw.req('POST', '/v1/predict', { token: t, body: { plan: [step()] } })).body.run_id as string;
  const cancel = (id: string, t = token) => gw.req('POST', `/v1/runs/${id}/cancel`, { token: t });
  const wsUrl = (p: string) => gw.url.replace('http', 'ws') + p;

  it('lists the ordered events of a run as JSON, with ?after=', async () => {
    const id = await start();
    await cancel(id);
    const all = await gw.req('GET', `/v1/runs/${id}/events`, { token });
    expect(all.body.events.map((e: Ev) => [e.seq, e.type])).to.deep.equal([
      [1, 'run.status'],
      [2, 'run.ended'],
    ]);
    expect(all.body.events[1].data).to.include({ status: 'cancelled', halt_class: 'cancelled' });
    const after = await gw.req('GET', `/v1/runs/${id}/events?after=1`, { token });
    expect(after.body.events.map((e: Ev) => e.seq)).to.deep.equal([2]);
  });

  it('streams SSE with ids, ends after run.ended, and resumes after Last-Event-ID', async () => {
    const id = await start();
    const live = readSse(`${gw.url}/v1/runs/${id}/events?sse=true`, token, { onOpen: () => setTimeout(() => void cancel(id), 100) });
    const got = await live;
    expect(got.map((e) => [e.id, e.event])).to.deep.equal([
      ['1', 'run.status'],
      ['2', 'run.ended'],
    ]);
    const resumed = await readSse(`${gw.url}/v1/runs/${id}/events?sse=true`, token, { lastEventId: '1' });
    expect(resumed.map((e) => e.id)).to.deep.equal(['2']);
  });

  it('ends a reconnect after the final event at once: SSE 204 (EventSource stops), WebSocket closed 1000', async () => {
    const id = await start();
    await cancel(id);
    const all = (await gw.req('GET', `/v1/runs/${id}/events`, { token })).body.events as Array<{ seq: number; type: string }>;
    const last = all.at(-1)!;
    expect(last.type).to.equal('run.ended');
    const t0 = Date.now();
    const r = await fetch(`${gw.url}/v1/runs/${id}/events?sse=true`, { headers: { 'X-Service-Token': token, 'Last-Event-ID': String(last.seq), Accept: 'text/event-stream' } });
    expect(r.status).to.equal(204);
    expect(await r.text()).to.equal('');
    // one event before the end still resumes into a stream that delivers it and ends
    const resumed = await readSse(`${gw.url}/v1/runs/${id}/events?sse=true`, token, { lastEventId: String(last.seq - 1) });
    expect(resumed.map((e) => e.event)).to.deep.equal(['run.ended']);
    const ws = wsEvents(wsUrl(`/v1/runs/${id}/ws?after=${last.seq}`), { headers: { 'X-Service-Token': token } });
    const closed = await ws.closed;
    expect(closed.code).to.equal(1000);
    expect(ws.events).to.deep.equal([]);
    expect(Date.now() - t0, 'no stream was left hanging').to.be.below(5_000);
  });

  it('sends WebSocket watchers the same ordered events as SSE and closes on run end', async () => {
    const id = await start();
    const ws = wsEvents(wsUrl(`/v1/runs/${id}/ws`), { headers: { 'X-Service-Token': token } });
    await ws.opened;
    const sse = readSse(`${gw.url}/v1/runs/${id}/events?sse=true`, token);
    await sleep(100);
    await cancel(id);
    const closed = await ws.closed;
    expect(closed.code).to.equal(1000);
    expect(ws.events).to.deep.equal((await sse).map((e) => e.data));
    expect(ws.events.map((e) => e.type)).to.deep.equal(['run.status', 'run.ended']);
  });

  it('opens a browser watcher with a single-use ticket subprotocol, never a token in the URL', async () => {
    const id = await start();
    const t = await gw.req('POST', '/v1/ws-tickets', { token });
    expect(t.status).to.equal(200);
    expect(t.body.expires_in).to.equal(30);
    const ws = wsEvents(wsUrl(`/v1/runs/${id}/ws`), {}, t.body.protocol);
    await ws.opened;
    await cancel(id);
    await ws.closed;
    expect(ws.events.map((e) => e.type)).to.deep.equal(['run.status', 'run.ended']);
    const reused = wsEvents(wsUrl(`/v1/runs/${id}/ws`), {}, t.body.protocol);
    let err = '';
    await reused.opened.catch((e: Error) => (err = e.message));
    expect(err).to.equal('HTTP 401');
  });

  it('refuses watchers without credentials (401), without the logs scope (403), and on another tenant run (404)', async () => {
    const id = await start();
    const cases: Array<[WebSocket.ClientOptions, string]> = [
      [{}, 'HTTP 401'],
      [{ headers: { 'X-Service-Token': newToken() } }, 'HTTP 401'],
      [{ headers: { 'X-Service-Token': noLogs } }, 'HTTP 403'],
      [{ headers: { 'X-Service-Token': other } }, 'HTTP 404'],
    ];
    for (const [opts, want] of cases) {
      let err = '';
      await wsEvents(wsUrl(`/v1/runs/${id}/ws`), opts).opened.catch((e: Error) => (err = e.message));
      expect(err).to.equal(want);
    }
    let err = '';
    await wsEvents(wsUrl('/v1/elsewhere'), { headers: { 'X-Service-Token': token } }).opened.catch((e: Error) => (err = e.message));
    expect(err).to.equal('HTTP 404');
    await cancel(id);
  });

  it('streams every run of the tenant on /v1/ws, and nothing of other tenants', async () => {
    const ws = wsEvents(wsUrl('/v1/ws'), { headers: { 'X-Service-Token': token } });
    await ws.opened;
    const a = await start();
    const b = await start();
    const foreign = await start(other);
    await cancel(a);
    await cancel(b);
    await cancel(foreign, other);
    await sleep(200);
    const runs = new Set(ws.events.map((e) => e.run_id));
    expect([...runs].sort()).to.deep.equal([a, b].sort());
    expect(ws.events.filter((e) => e.run_id === a).map((e) => e.seq)).to.deep.equal([1, 2]);
  });

  describe('webhooks (Standard Webhooks signatures)', () => {
    let receiver: ReturnType<typeof createServer>;
    let receiverUrl = '';
    const received: Array<{ headers: IncomingMessage['headers']; body: string }> = [];
    let failFirst = 0;
    const secret = 'whsec_' + Buffer.from('super-secret-signing-key-32bytes!').toString('base64');
    let hooked: TestGateway;
    const hookToken = newToken();

    before(async () => {
      receiver = createServer((req, res) => {
        let body = '';
        req.on('data', (d: Buffer) => (body += d.toString()));
        req.on('end', () => {
          received.push({ headers: req.headers, body });
          if (failFirst > 0) {
            failFirst--;
            res.writeHead(500).end();
          } else res.writeHead(204).end();
        });
      });
      receiver.listen(0, '127.0.0.1');
      await once(receiver, 'listening');
      receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
      const dir = (await import('node:fs/promises')).mkdtemp(path.join((await import('node:os')).tmpdir(), 'runplane-hooks-'));
      const root = await dir;
      await mkdir(path.join(root, 'secrets'));
      await writeFile(path.join(root, 'secrets', 'hook_secret'), secret + '\n');
      hooked = await startGateway({
        dir: root,
        env: { SERVICE_ALLOW_PRIVATE_NETWORKS: '1', SERVICE_WEBHOOK_RETRY_SECONDS: '0.05,0.05,0.05' },
        keys: { [hookToken]: { tenant_id: 'hooked', rate_limit_per_minute: 0, webhook_url: `${receiverUrl}?tenant-default=1`, webhook_secret_name: 'hook_secret' } },
      });
    });
    after(async () => {
      await hooked.close();
      receiver.close();
    });

    const verify = (h: IncomingMessage['headers'], body: string) => {
      const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
      const expected = createHmac('sha256', key).update(`${h['webhook-id']}.${h['webhook-timestamp']}.${body}`).digest('base64');
      return String(h['webhook-signature']).split(' ').includes(`v1,${expected}`);
    };

    it('delivers a signed completion webhook to callback_url that the receiver verifies, and logs the delivery on the run', async () => {
      received.length = 0;
      const r = await hooked.req('POST', '/v1/predict', { token: hookToken, body: { plan: [step()], callback_url: `${receiverUrl}?per-request=1` } });
      await hooked.req('POST', `/v1/runs/${r.body.run_id}/cancel`, { token: hookToken });
      expect(await until(async () => received.length > 0, 10_000), 'the webhook arrived').to.equal(true);
      expect(received).to.have.length(1);
      const { headers, body } = received[0]!;
      expect(verify(headers, body)).to.equal(true);
      expect(headers['webhook-id']).to.match(/^msg_/);
      expect(Math.abs(Number(headers['webhook-timestamp']) - Date.now() / 1000)).to.be.lessThan(10);
      const payload = JSON.parse(body);
      expect(payload.type).to.equal('run.cancelled');
      expect(payload.data).to.include({ run_id: r.body.run_id, status: 'cancelled', halt_class: 'cancelled' });
      expect(verify(headers, body.replace('cancelled', 'succeeded')), 'a tampered body fails verification').to.equal(false);
      // the delivery is logged on the run after the receiver answered (a store write, slower on a loaded host)
      const logged = async () => ((await hooked.req('GET', `/v1/runs/${r.body.run_id}`, { token: hookToken })).body.webhook?.deliveries?.length ?? 0) > 0;
      expect(await until(logged, 10_000), 'the delivery is logged on the run').to.equal(true);
      const life = await hooked.req('GET', `/v1/runs/${r.body.run_id}`, { token: hookToken });
      expect(life.body.webhook.url, 'query strings are not shown back').to.equal(receiverUrl);
      expect(life.body.webhook.signed).to.equal(true);
      expect(life.body.webhook.deliveries).to.have.length(1);
      expect(life.body.webhook.deliveries[0]).to.include({ attempt: 1, status: 204, error: null });
    });

    it('signs deliveries that the standardwebhooks package verifies, with and without the whsec_ prefix', async () => {
      received.length = 0;
      const r = await hooked.req('POST', '/v1/predict', { token: hookToken, body: { plan: [step()], callback_url: receiverUrl } });
      await hooked.req('POST', `/v1/runs/${r.body.run_id}/cancel`, { token: hookToken });
      expect(await until(async () => received.length > 0, 10_000), 'the webhook arrived').to.equal(true);
      const { headers, body } = received[0]!;
      const plain = { 'webhook-id': String(headers['webhook-id']), 'webhook-timestamp': String(headers['webhook-timestamp']), 'webhook-signature': String(headers['webhook-signature']) };
      const verified = new Webhook(secret).verify(body, plain) as { data: { run_id: string } };
      expect(verified.data.run_id).to.equal(r.body.run_id);
      // the same key without its prefix is the same secret to the reference library
      expect(() => new Webhook(secret.slice('whsec_'.length)).verify(body, plain)).to.not.throw();
      expect(() => new Webhook(secret).verify(body.replace('cancelled', 'succeeded'), plain)).to.throw();
    });

    it('signs with an unprefixed base64 secret exactly as the reference library derives it, and refuses a secret that is not base64', () => {
      const unprefixed = Buffer.from('another-signing-key').toString('base64');
      const id = 'msg_test';
      const ts = Math.floor(Date.now() / 1000);
      const payload = '{"type":"run.succeeded"}';
      const signature = sign(signingKey(unprefixed), id, ts, payload);
      expect(() => new Webhook(unprefixed).verify(payload, { 'webhook-id': id, 'webhook-timestamp': String(ts), 'webhook-signature': signature })).to.not.throw();
      expect(() => signingKey('not base64 at all!')).to.throw(/base64/);
    });

    it('retries a failing receiver on the backoff schedule without blocking the run', async () => {
      received.length = 0;
      failFirst = 2;
      const r = await hooked.req('POST', '/v1/predict', { token: hookToken, body: { plan: [step()] } });
      const t0 = Date.now();
      const c = await hooked.req('POST', `/v1/runs/${r.body.run_id}/cancel`, { token: hookToken });
      expect(c.status).to.equal(200);
      expect(Date.now() - t0).to.be.lessThan(1000);
      expect(await until(async () => received.length >= 3, 10_000), 'three deliveries arrived').to.equal(true);
      expect(received).to.have.length(3);
      expect(received[0]!.headers['webhook-id']).to.equal(received[2]!.headers['webhook-id']);
      expect(received.every((x) => verify(x.headers, x.body))).to.equal(true);
      const logged = async () => ((await hooked.req('GET', `/v1/runs/${r.body.run_id}`, { token: hookToken })).body.webhook?.deliveries?.length ?? 0) >= 3;
      expect(await until(logged, 10_000), 'the three deliveries are logged on the run').to.equal(true);
      const life = await hooked.req('GET', `/v1/runs/${r.body.run_id}`, { token: hookToken });
      expect(life.body.webhook.deliveries.map((d: { status: number }) => d.status)).to.deep.equal([500, 500, 204]);
    });

    it('refuses to deliver to a private address when private networks are not allowed', async () => {
      const guarded = await startGateway({
        env: { SERVICE_WEBHOOK_RETRY_SECONDS: '0.01' },
        keys: { [hookToken]: { tenant_id: 'hooked', rate_limit_per_minute: 0 } },
      });
      try {
        received.length = 0;
        const r = await guarded.req('POST', '/v1/predict', { token: hookToken, body: { plan: [step()], callback_url: receiverUrl } });
        await guarded.req('POST', `/v1/runs/${r.body.run_id}/cancel`, { token: hookToken });
        await sleep(300);
        expect(received).to.have.length(0);
        const life = await guarded.req('GET', `/v1/runs/${r.body.run_id}`, { token: hookToken });
        expect(life.body.webhook.signed).to.equal(false);
        expect(life.body.webhook.deliveries).to.have.length(2);
        expect(life.body.webhook.deliveries[0].error).to.match(/egress .* refused/);
      } finally {
        await guarded.close();
      }
    });
  });

  describe('across replicas on Redis', () => {
    let redis: RedisHandle;
    before(async () => {
      redis = await startRedis();
    });
    after(() => redis.stop());

    it('a watcher on one replica sees the events published by another', async () => {
      const keys = { [token]: { tenant_id: 'watcher', rate_limit_per_minute: 0 } };
      const g1 = await startGateway({ keys, env: { SERVICE_REDIS_URL: redis.url } });
      const g2 = await startGateway({ keys, env: { SERVICE_REDIS_URL: redis.url } });
      try {
        const id = (await g1.req('POST', '/v1/predict', { token, body: { plan: [step()] } })).body.run_id;
        const sse = readSse(`${g2.url}/v1/runs/${id}/events?sse=true`, token, { onOpen: () => setTimeout(() => void g1.req('POST', `/v1/runs/${id}/cancel`, { token }), 100) });
        expect((await sse).map((e) => [e.id, e.event])).to.deep.equal([
          ['1', 'run.status'],
          ['2', 'run.ended'],
        ]);
      } finally {
        await g1.close();
        await g2.close();
      }
    });
  });

  describe('egress guard', () => {
    it('classifies private, loopback, link-local, unique-local and metadata addresses', () => {
      for (const a of ['127.0.0.1', '127.8.9.10', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '::1', 'fc00::1', 'fd12::3', 'fe80::1', '::ffff:127.0.0.1', '0.0.0.0']) {
        expect(isPrivateAddress(a), a).to.equal(true);
      }
      for (const a of ['8.8.8.8', '1.1.1.1', '172.32.0.1', '2606:4700::1111']) expect(isPrivateAddress(a), a).to.equal(false);
    });

    it('refuses names that resolve to private addresses unless allowed', async () => {
      let err = '';
      await resolvePublic('localhost', false).catch((e: Error) => (err = e.message));
      expect(err).to.match(/refused/);
      expect((await resolvePublic('localhost', true)).address).to.match(/^(127\.0\.0\.1|::1)$/);
      await resolvePublic('[::1]', false).then(
        () => expect.fail('::1 must be refused'),
        (e: Error) => expect(e.message).to.match(/refused/),
      );
    });
  });
});
