// A fuzz test driven by the OpenAPI document the gateway serves: for every
// operation with a JSON body, bodies are made from its schema (each declared
// property given values of every other JSON type, out-of-range and hostile
// strings, removed, or joined by an unknown one; whole bodies of the wrong
// type; deep nesting) on top of a valid seed, and sent to a real gateway. No
// answer may be a 5xx; an error answer is {detail} (or OpenAI's error shape on
// the OpenAI-compatible routes); a success answer validates against the
// schema the document names for it. Seeded, so a failure reproduces.
import { expect } from 'chai';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { newToken, startGateway, type TestGateway } from '../support/gateway.ts';

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

/** mulberry32: a small seeded PRNG, so a failing case is the same on every run */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const HOSTILE: Json[] = [null, true, 0, -1, 1e308, -0.5, 2 ** 53 + 1, '', ' ', 'x'.repeat(70_000), '\u0000', '../../etc/passwd', '%2e%2e%2f', '😀'.repeat(100), '<script>alert(1)</script>', [], [null], {}, { __proto__: { polluted: true } }, { constructor: { prototype: { polluted: true } } }];

/** Valid seeds per operation (the fuzz mutates from here, so the deep paths are reached too). */
const SEEDS: Record<string, Json> = {
  'POST /v1/predict': { plan: [{ intent: 'open', type: 'navigate', url: 'https://example.com/' }], detached: true },
  'POST /v1/recipes': { name: 'fuzz', schema: { item_selector: '.card', fields: [{ name: 'title', type: 'str', selector: 'h2' }] } },
  'POST /v1/cua': { task: 'click the button', screenshot: 'iVBORw0KGgo=' },
  'POST /v1/chat/completions': { model: 'default-cua', messages: [{ role: 'user', content: 'hello' }] },
  'POST /v1/diagnose/fingerprint': {},
};

describe('contract fuzz from the OpenAPI document (real gateway)', function () {
  this.timeout(240_000);
  let gw: TestGateway;
  let doc: Json;
  let ajv: Ajv2020;
  const token = newToken();

  before(async () => {
    // no runner: accepted runs stay queued, so thousands of bodies start nothing
    gw = await startGateway({ keys: { [token]: { tenant_id: 'fuzz', rate_limit_per_minute: 0, max_concurrent_runs: 100_000 } } });
    doc = (await gw.req('GET', '/openapi.json')).body;
    ajv = new Ajv2020({ strict: false, allErrors: true });
    (addFormats as unknown as (a: Ajv2020) => void)(ajv);
    ajv.addSchema({ $id: 'openapi', components: doc.components });
  });
  after(() => gw.close());

  const deref = (s: Json): Json => (s?.$ref ? deref(doc.components.schemas[String(s.$ref).split('/').pop() ?? '']) : s);

  /** Bodies for an operation: the seed, then mutations of each property its schema declares. */
  function bodies(schema: Json, seed: Json, rand: () => number, n: number): Json[] {
    const props = Object.keys(deref(schema)?.properties ?? {});
    const pick = <T>(xs: T[]): T => xs[Math.floor(rand() * xs.length)]!;
    const out: Json[] = [seed, ...HOSTILE.map((h) => h)];
    for (let i = 0; i < n; i++) {
      const b: Json = structuredClone(seed);
      const k = props.length ? pick(props) : 'x';
      const r = rand();
      if (r < 0.55) b[k] = pick(HOSTILE);
      else if (r < 0.7) delete b[k];
      else if (r < 0.8) b[`unknown_${Math.floor(rand() * 1000)}`] = pick(HOSTILE);
      else if (r < 0.9) {
        // deep inside: the first array's first item, when the seed has one
        const arr = Object.values(b).find((v) => Array.isArray(v) && v.length) as Json[] | undefined;
        if (arr && arr[0] && typeof arr[0] === 'object') arr[0][pick([...Object.keys(arr[0]), 'type', 'extra'])] = pick(HOSTILE);
        else b[k] = pick(HOSTILE);
      } else {
        let deep: Json = {};
        for (let d = 0; d < 200; d++) deep = { a: deep };
        b[k] = deep;
      }
      out.push(b);
    }
    return out;
  }

  for (const [key, seed] of Object.entries(SEEDS)) {
    it(`${key}: no 5xx, errors as documented, successes as their schema`, async () => {
      const [method, path] = key.split(' ') as [string, string];
      const op = doc.paths[path]?.[method.toLowerCase()];
      expect(op, `${key} is in the document`).to.be.an('object');
      const openai = path.startsWith('/v1/chat/');
      const okRef = op.responses['200']?.content?.['application/json']?.schema?.$ref as string | undefined;
      const validateOk = okRef ? ajv.getSchema(`openapi${okRef}`) : undefined;
      const rand = prng(0x5eed ^ key.length);
      const problems: string[] = [];
      const statuses: Record<number, number> = {};
      for (const body of bodies(op.requestBody.content['application/json'].schema, seed, rand, 150)) {
        const r = await gw.req(method, path, { token, body });
        statuses[r.status] = (statuses[r.status] ?? 0) + 1;
        const where = `${r.status} for ${JSON.stringify(body).slice(0, 160)}`;
        if (r.status >= 500) problems.push(`5xx: ${where}: ${r.text.slice(0, 200)}`);
        else if (r.status >= 400) {
          const shaped = openai ? typeof r.body?.error?.message === 'string' : typeof r.body?.detail === 'string';
          if (!shaped) problems.push(`error without its shape: ${where}: ${r.text.slice(0, 200)}`);
        } else if (validateOk && !validateOk(r.body)) problems.push(`success off its schema: ${where}: ${JSON.stringify(validateOk.errors).slice(0, 300)}`);
      }
      if (process.env.FUZZ_DEBUG) console.log(key, statuses);
      expect(problems.slice(0, 10), `${problems.length} problems`).to.deep.equal([]);
    });
  }
});
