import { expect } from 'chai';
import { startGateway, newToken, step, request, type TestGateway } from '../support/gateway.ts';

interface Hostile {
  name: string;
  raw: string | Buffer;
  type?: string;
  status: number;
  detail: RegExp;
}

const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
const big = 'x'.repeat(10 * 1024 * 1024);

const corpus = (valid: unknown): Hostile[] => [
  { name: 'malformed JSON', raw: '{"plan": [', status: 400, detail: /malformed JSON/ },
  { name: 'trailing garbage', raw: JSON.stringify(valid) + '}', status: 400, detail: /malformed JSON/ },
  { name: 'an array body', raw: '[]', status: 400, detail: /must be a JSON object/ },
  { name: 'a string body', raw: '"hello"', status: 400, detail: /must be a JSON object/ },
  { name: 'a number body', raw: '42', status: 400, detail: /must be a JSON object/ },
  { name: 'null', raw: 'null', status: 400, detail: /must be a JSON object/ },
  { name: 'wrong field types', raw: JSON.stringify({ plan: 5, name: 7, schema: [], action: 1 }), status: 400, detail: /: / },
  { name: 'a 10 MB string', raw: JSON.stringify({ ...(valid as object), notes: big }), status: 400, detail: /exceeds the limit/ },
  { name: '10,000-deep nesting', raw: `{"plan": ${deep(10_000)}}`, status: 400, detail: /nests deeper/ },
  { name: '10,000-deep nesting inside strings is fine but still invalid', raw: `{"plan": "${'['.repeat(10_000)}"}`, status: 400, detail: /plan|name|schema/ },
  { name: 'a __proto__ key', raw: `{"__proto__": {"polluted": "yes"}, "plan": [${JSON.stringify(step())}]}`, status: 400, detail: /forbidden key/ },
  { name: 'a nested __proto__ key', raw: `{"name":"x","schema":{"fields":[{"name":"a","type":"str","__proto__":{"polluted":"yes"}}]}}`, status: 400, detail: /forbidden key/ },
  { name: 'constructor.prototype', raw: `{"constructor": {"prototype": {"polluted": "yes"}}}`, status: 400, detail: /forbidden key/ },
  { name: 'invalid UTF-8', raw: Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}')]), status: 400, detail: /UTF-8/ },
  { name: 'text/plain', raw: JSON.stringify(valid), type: 'text/plain', status: 415, detail: /application\/json/ },
  { name: 'a form post', raw: 'a=1&b=2', type: 'application/x-www-form-urlencoded', status: 415, detail: /application\/json/ },
  { name: 'multipart', raw: '--b\r\n\r\nx\r\n--b--', type: 'multipart/form-data; boundary=b', status: 415, detail: /application\/json/ },
  { name: 'a non-utf-8 charset', raw: JSON.stringify(valid), type: 'application/json; charset=latin1', status: 415, detail: /utf-8/ },
  { name: 'an empty body', raw: '', status: 400, detail: /required|empty/ },
  { name: 'a whitespace body', raw: '   \n ', status: 400, detail: /empty/ },
];

describe('hostile input on every route', () => {
  let gw: TestGateway;
  const token = newToken();

  before(async () => {
    gw = await startGateway({ keys: { [token]: { tenant_id: 'victim', rate_limit_per_minute: 0, max_concurrent_runs: 1000 } } });
  });
  after(() => gw.close());

  const bodies: Array<[string, unknown]> = [
    ['/v1/predict', { plan: [step()] }],
    ['/production/predict', { plan: [step()] }],
    ['/v1/recipes', { name: 'r', schema: { fields: [{ name: 'a', type: 'str' }] } }],
  ];

  for (const [route, valid] of bodies) {
    describe(`POST ${route}`, () => {
      for (const h of corpus(valid)) {
        it(`answers ${h.name} with ${h.status} {detail} and keeps serving`, async () => {
          const headers: Record<string, string> = { 'X-Service-Token': token };
          headers['Content-Type'] = h.type ?? 'application/json';
          const r = await request(gw.url, 'POST', route, { raw: h.raw, headers });
          expect(r.status, r.text.slice(0, 200)).to.equal(h.status);
          expect(r.body, r.text.slice(0, 200)).to.have.property('detail').that.matches(h.detail);
          expect(r.text.length).to.be.lessThan(1000);
          expect(r.text).not.to.match(/\bat .+:\d+:\d+/);
          expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
          expect(Object.prototype).not.to.have.property('polluted');
          const ok = await gw.req('GET', '/health');
          expect(ok.status).to.equal(200);
        });
      }
    });
  }

  it('answers a body without Content-Type with 415, and a missing body with 400', async () => {
    // a Buffer body makes fetch send no Content-Type at all
    const noType = await request(gw.url, 'POST', '/v1/predict', { raw: Buffer.from('{"plan":[]}'), headers: { 'X-Service-Token': token } });
    expect(noType.status).to.equal(415);
    expect(noType.body.detail).to.match(/application\/json/);
    const none = await request(gw.url, 'POST', '/v1/predict', { headers: { 'X-Service-Token': token } });
    expect(none.status).to.equal(400);
    expect(none.body.detail).to.match(/required/);
  });

  it('answers hostile path parameters on every GET route with 4xx {detail}', async () => {
    const ids = ['%00', 'x'.repeat(2000), '..%2f..%2fetc%2fpasswd', '%E2%80%AE', '__proto__', 'constructor', '%ff'];
    for (const id of ids) {
      for (const p of [`/v1/runs/${id}`, `/v1/runs/${id}/status`, `/v1/runs/${id}/result`, `/v1/runs/${id}/events`, `/v1/runs/${id}/video`, `/v1/recipes/${id}`]) {
        const r = await gw.req('GET', p, { token });
        expect(r.status, p.slice(0, 80)).to.be.within(400, 499);
        expect(r.body, p.slice(0, 80)).to.have.property('detail');
      }
      const del = await gw.req('DELETE', `/v1/recipes/${id}`, { token });
      expect(del.status).to.be.within(400, 499);
      const cancel = await gw.req('POST', `/v1/runs/${id}/cancel`, { token });
      expect(cancel.status).to.be.within(400, 499);
    }
  });

  it('answers unknown routes with 404 and wrong methods with 405, both {detail}', async () => {
    const unknown = await gw.req('GET', '/v1/nothing-here');
    expect(unknown.status).to.equal(404);
    expect(unknown.body.detail).to.be.a('string');
    const wrong = await gw.req('PUT', '/v1/predict', { token, body: {} });
    expect(wrong.status).to.equal(405);
    expect(wrong.body.detail).to.be.a('string');
  });

  it('accepts a hostile-looking but valid plan and stores its strings verbatim', async () => {
    const intent = '<script>alert(1)</script> \u202e ${jndi:ldap://x} {{not-a-url-field}}';
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan: [step({ intent })] } });
    expect(r.status).to.equal(200);
    const rec = await gw.gateway.services.runs.get((await gw.gateway.services.tenants.resolve(token))!, r.body.run_id);
    expect(rec.plan.steps[0]!.intent).to.equal(intent);
  });

  it('answers an oversized body with its 400 {detail} every time, 20 fetches in a row (no EPIPE before the answer)', async () => {
    const body = JSON.stringify({ plan: [step()], notes: 'x'.repeat(12 * 1024 * 1024) });
    for (let i = 0; i < 20; i++) {
      const r = await fetch(`${gw.url}/v1/predict`, { method: 'POST', headers: { 'X-Service-Token': token, 'Content-Type': 'application/json' }, body });
      expect(r.status, `try ${i + 1}`).to.equal(400);
      expect(((await r.json()) as { detail: string }).detail, `try ${i + 1}`).to.match(/exceeds the limit/);
    }
  });
});
