// The ingest service's OpenAPI document, as a running ingest serves it, passes
// a third-party linter: `redocly lint` (@redocly/cli) with the service's own
// config (plugins/trace-ingest/redocly.yaml): OpenAPI 3.1 structure, no two
// paths differing only by parameter names, every operation with a 2xx answer
// whose body has a schema. A copy broken in those ways is refused by the same
// config, so the lint can fail.
import { expect } from 'chai';
import path from 'node:path';
import { startIngest, type TestIngest } from '../support/ingest.ts';
import { redoclyLint } from '../support/redocly.ts';

const CONFIG = path.resolve(import.meta.dirname, '../../plugins/trace-ingest/redocly.yaml');
type Op = { responses: Record<string, { content?: Record<string, { schema?: unknown }> }> };
type Doc = { openapi: string; paths: Record<string, Record<string, Op>> };

/** redocly lint of doc with the ingest's config. */
const lint = (doc: unknown) => redoclyLint(doc, CONFIG);

describe('trace ingest OpenAPI document under redocly lint', function () {
  this.timeout(60_000);
  let ing: TestIngest;
  let doc: Doc;
  before(async () => {
    ing = await startIngest();
    doc = (await (await fetch(`${ing.url}/api/v1/openapi.json`)).json()) as Doc;
  });
  after(() => ing.close());

  it('lints clean (no errors) with the ingest config', async () => {
    expect(doc.openapi).to.match(/^3\.1\./);
    const { code, report } = await lint(doc);
    const errors = report.problems.filter((p) => p.severity === 'error').map((p) => `${p.ruleId}: ${p.message}`);
    expect(errors).to.deep.equal([]);
    expect(report.totals.errors).to.equal(0);
    expect(code).to.equal(0);
  });

  it('refuses a copy with paths differing only by parameter name and 2xx answers without a schema', async () => {
    const bad = structuredClone(doc);
    const stepPath = Object.keys(bad.paths).find((p) => p.endsWith('/runs/{run_id}/steps/{step_index}'));
    expect(stepPath, 'the step route is documented').to.be.a('string');
    bad.paths[stepPath!.replace('{step_index}', '{i}')] = JSON.parse(JSON.stringify(bad.paths[stepPath!]).replaceAll('"name":"step_index"', '"name":"i"'));
    const ops = Object.values(bad.paths).flatMap((item) => Object.values(item));
    const success = (op: Op) => op.responses[Object.keys(op.responses).find((c) => /^2\d\d$/.test(c))!]!;
    delete success(ops[0]!).content;
    for (const media of Object.values(success(ops[1]!).content ?? {})) delete media.schema;
    const { code, report } = await lint(bad);
    const rules = new Set(report.problems.filter((p) => p.severity === 'error').map((p) => p.ruleId));
    expect([...rules].sort()).to.include.members(['no-identical-paths', 'rule/success-has-content', 'rule/success-media-has-schema']);
    expect(code).to.not.equal(0);
  });
});
