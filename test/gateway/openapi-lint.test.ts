// The gateway's OpenAPI document passes a linter we did not write
// (@redocly/cli, its recommended rules): public routes declare no security,
// every authenticated one names its scheme, servers are set. Built from a real
// gateway with its plugins' routes.
import { expect } from 'chai';
import { newToken, startGateway, type TestGateway } from '../support/gateway.ts';
import { redoclyLint } from '../support/redocly.ts';

describe('the OpenAPI document under a third-party linter (@redocly/cli)', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway({ keys: { [newToken()]: { tenant_id: 'lint' } } });
  });
  after(() => gw.close());

  it('has no errors under the recommended rules', async () => {
    const { report } = await redoclyLint((await gw.req('GET', '/openapi.json')).body);
    const errors = report.problems.filter((p) => p.severity === 'error').map((p) => `${p.ruleId} at ${p.location?.[0]?.pointer}: ${p.message}`);
    expect(errors).to.deep.equal([]);
    expect(report.totals.errors).to.equal(0);
  });
});
