import { expect } from 'chai';
import { mkdir, writeFile, symlink } from 'node:fs/promises';
import path from 'node:path';
import { startGateway, newToken, step, type TestGateway } from '../support/gateway.ts';

describe('POST /v1/predict: plans, policies and idempotency', () => {
  let gw: TestGateway;
  const acme = newToken();
  const other = newToken();
  const fenced = newToken();
  const capped = newToken();
  const byAddress = newToken();
  const badRange = newToken();

  before(async () => {
    const dir = (await import('node:fs/promises')).mkdtemp(path.join((await import('node:os')).tmpdir(), 'runplane-plans-'));
    const root = await dir;
    const plans = path.join(root, 'plans');
    await mkdir(path.join(plans, 'shop'), { recursive: true });
    await writeFile(path.join(plans, 'shop', 'listings.json'), JSON.stringify({ steps: [step({ url: 'https://shop.example.com/list' })], runtime: { compute_backend: 'dom_plane' } }));
    await writeFile(path.join(plans, 'broken.json'), JSON.stringify([{ type: 'click' }]));
    await writeFile(path.join(root, 'secret.json'), JSON.stringify([step()]));
    await symlink(path.join(root, 'secret.json'), path.join(plans, 'escape.json'));
    // one served brain (no run executes here, so its backend is never called): the others stay accepted but not served
    const brains = path.join(root, 'brains.json');
    await writeFile(brains, JSON.stringify({ brains: { 'compact-cua': { protocol: 'compact-cua', base_url: 'http://127.0.0.1:9/v1', model: 'compact-cua' } } }));
    gw = await startGateway({
      dir: root,
      env: { SERVICE_PLANS_DIR: plans, SERVICE_MAX_LOOP_ITERATIONS: '7', SERVICE_BRAINS_PATH: brains },
      keys: {
        [acme]: { tenant_id: 'acme', rate_limit_per_minute: 0, max_concurrent_runs: 1000 },
        [other]: { tenant_id: 'other', rate_limit_per_minute: 0, max_concurrent_runs: 1000 },
        [fenced]: { tenant_id: 'fenced', rate_limit_per_minute: 0, max_concurrent_runs: 1000, allowed_domains: ['*.example.com', 'exact.org'] },
        [byAddress]: { tenant_id: 'by-address', rate_limit_per_minute: 0, max_concurrent_runs: 1000, allowed_domains: ['127.0.0.1', '[::1]', '10.0.0.0/8', 'fd00::/8'] },
        [badRange]: { tenant_id: 'bad-range', rate_limit_per_minute: 0, max_concurrent_runs: 1000, allowed_domains: ['10.0.0.0/33'] },
        [capped]: { tenant_id: 'capped', rate_limit_per_minute: 0, max_concurrent_runs: 1000, max_cost_per_run: 2, max_time_minutes_per_run: 10, default_compute_backend: 'dom_plane' },
      },
    });
  });
  after(() => gw.close());

  const run = (token: string, body: unknown, headers?: Record<string, string>) => gw.req('POST', '/v1/predict', { token, body, headers });
  const record = async (token: string, runId: string) => gw.gateway.services.runs.get((await gw.gateway.services.tenants.resolve(token))!, runId);

  describe('400 with a {detail} naming the failing field', () => {
    const cases: Array<[string, unknown, RegExp]> = [
      ['a step missing intent', { plan: [{ type: 'click' }] }, /^plan\[0\]\.intent: is required/],
      ['a step missing type', { plan: { steps: [step(), { intent: 'x' }] } }, /^plan\.steps\[1\]\.type: is required/],
      ['a nested step missing intent', { plan: [{ intent: 'loop', type: 'loop', steps: [step(), { intent: 'l2', type: 'loop', steps: [{ type: 'click' }] }] }] }, /^plan\[0\]\.steps\[1\]\.steps\[0\]\.intent: is required/],
      ['an empty intent', { plan: [{ intent: '', type: 'click' }] }, /^plan\[0\]\.intent: must NOT have fewer than 1 characters/],
      ['a wrong type', { plan: [step({ wait_for_load: 'yes' })] }, /^plan\[0\]\.wait_for_load: must be boolean/],
      ['a negative loop_count', { plan: [{ intent: 'l', type: 'loop', loop_count: -1, steps: [step()] }] }, /^plan\[0\]\.loop_count: must be >= 0/],
      ['a loop_target below -1', { plan: [{ intent: 'l', type: 'loop', loop_target: -2 }] }, /^plan\[0\]\.loop_target: must be >= -1/],
      ['a bad runtime enum', { plan: { steps: [step()], runtime: { compute_backend: 'gpu_plane' } } }, /^plan\.runtime\.compute_backend: must be one of "computer_plane", "dom_plane"/],
      ['a zero max_time_minutes in runtime', { plan: { steps: [step()], runtime: { max_time_minutes: 0 } } }, /^plan\.runtime\.max_time_minutes: must be >= 1/],
      ['an ExtractField without type', { plan: [{ intent: 'e', type: 'hosted-api', extract: { fields: [{ name: 'title' }] } }] }, /^plan\[0\]\.extract\.fields\[0\]\.type: is required/],
      ['an ExtractField type outside the enum', { plan: [{ intent: 'e', type: 'extract_data', extract: { fields: [{ name: 't', type: 'date' }] } }] }, /^plan\[0\]\.extract\.fields\[0\]\.type: must be one of/],
      ['a plan that is neither form', { plan: 'navigate somewhere' }, /^plan: must be an array of steps or an object with steps/],
      ['an object plan without steps', { plan: { runtime: {} } }, /^plan\.steps: is required/],
      ['an empty plan', { plan: [] }, /^plan: a plan needs at least one step/],
      ['an unresolved template in a navigate URL', { plan: [step(), { intent: 'l', type: 'loop', steps: [step({ url: 'https://example.com/{{city}}/list' })] }] }, /^plan\[1\]\.steps\[0\]\.url: has unresolved \{\{template\}\}/],
      ['no plan at all', { action: 'run' }, /^plan: is required/],
      ['both plan and micro', { plan: [step()], micro: 'shop/listings' }, /either plan or micro/],
      ['a wrong body field type', { plan: [step()], max_cost: 'cheap' }, /^max_cost: must be number/],
      ['an unknown action', { action: 'explode' }, /^action: must be one of/],
      ['an unknown brain', { plan: [step()], cua_model: 'gpt-9' }, /^cua_model: unknown brain/],
      ['a non-http callback_url', { plan: [step()], callback_url: 'file:///etc/passwd' }, /^callback_url: only http and https/],
      ['an unknown capture_mode', { plan: [step()], capture_mode: 'everything' }, /^capture_mode: must be one of "off", "metadata", "trace"/],
      ['a capture_mode above the gateway', { plan: [step()], capture_mode: 'full' }, /^capture_mode: 'full' records more than this deployment allows \(SERVICE_TRACE_CAPTURE_MODE model_io\)/],
      ['a capture_mode above the gateway in the plan', { plan: { steps: [step()], runtime: { capture_mode: 'replay' } } }, /^capture_mode: 'replay' records more/],
      ['a status read without run_id', { action: 'status' }, /^run_id: is required for action status/],
    ];
    for (const [name, body, detail] of cases) {
      it(name, async () => {
        const r = await run(acme, body);
        expect(r.status, r.text).to.equal(400);
        expect(r.body.detail).to.match(detail);
      });
    }

    it('refuses file:, javascript:, data: and chrome: URLs whatever the allowlist', async () => {
      for (const url of ['file:///etc/passwd', 'javascript:alert(1)', 'data:text/html,hi', 'chrome://settings']) {
        for (const token of [acme, fenced]) {
          const r = await run(token, { plan: [step({ url })] });
          expect(r.status, url).to.equal(400);
          expect(r.body.detail).to.match(/^plan\[0\]\.url: (scheme|is not)/);
        }
      }
    });

    it('refuses a plan over the step limit, counting loop bodies', async () => {
      const body = Array.from({ length: 10 }, () => ({ intent: 'l', type: 'loop', steps: Array.from({ length: 50 }, () => step()) }));
      const r = await run(acme, { plan: body });
      expect(r.status).to.equal(400);
      expect(r.body.detail).to.match(/more than 500 steps/);
    });
  });

  describe('allowed_domains', () => {
    it('accepts subdomains of *.example.com at any depth and the exact hosts listed', async () => {
      for (const url of ['https://shop.example.com/', 'https://a.b.example.com/x', 'http://EXACT.org./y', 'https://shop.example.com:8443/']) {
        const r = await run(fenced, { plan: [step({ url })] });
        expect(r.status, url).to.equal(200);
      }
    });

    it('gives 403 for a host outside the patterns anywhere in the plan, the apex of *.example.com included', async () => {
      for (const url of ['https://example.com/', 'https://evil.com/', 'https://example.com.evil.com/', 'https://sub.exact.org/']) {
        const r = await run(fenced, { plan: [step({ url: 'https://ok.example.com/' }), { intent: 'l', type: 'loop', steps: [step({ url })] }] });
        expect(r.status, url).to.equal(403);
        expect(r.body.detail).to.match(/^plan\[1\]\.steps\[0\]\.url: host .* outside the tenant's allowed_domains/);
      }
    });

    it('checks hints.fallback_url too, and a tenant without patterns is unrestricted', async () => {
      const r = await run(fenced, { plan: [{ intent: 'c', type: 'click', hints: { fallback_url: 'https://evil.com/' } }] });
      expect(r.status).to.equal(403);
      expect((await run(acme, { plan: [step({ url: 'https://anything.net/' })] })).status).to.equal(200);
    });

    it('matches IP literals as addresses and CIDR ranges, and refuses a tenant whose range is malformed', async () => {
      for (const url of ['http://127.0.0.1:8080/', 'http://127.1/', 'http://[::1]:9/', 'http://[0:0::1]/', 'http://10.1.2.3/', 'http://[fd00::7]/']) {
        const r = await run(byAddress, { plan: [step({ url })] });
        expect(r.status, url).to.equal(200);
      }
      for (const url of ['http://127.0.0.2/', 'http://11.0.0.1/', 'http://[::2]/', 'https://example.com/']) {
        const r = await run(byAddress, { plan: [step({ url })] });
        expect(r.status, url).to.equal(403);
        expect(r.body.detail).to.match(/outside the tenant's allowed_domains/);
      }
      const refused = await run(badRange, { plan: [step({ url: 'http://10.1.2.3/' })] });
      expect(refused.status).to.equal(401);
    });
  });

  describe('brain ids', () => {
    it('accepts all eight ids, and refuses a plan whose brain is accepted but not served with 404 {detail} naming /v1/models', async () => {
      for (const id of ['default-cua', 'compact-cua', 'tuned-cua', 'mid-cua-8b', 'mid-cua-32b', 'large-cua-32b', 'large-cua-72b', 'hosted-api']) {
        const r = await run(acme, { plan: [step()], cua_model: id });
        expect(r.status, id).to.equal(200);
      }
      const served = await run(acme, { plan: [{ intent: 'look around', type: 'default-cua' }], cua_model: 'compact-cua' });
      expect(served.status).to.equal(200);
      const unserved = await run(acme, { plan: [step(), { intent: 'look around', type: 'default-cua' }], cua_model: 'large-cua-72b' });
      expect(unserved.status).to.equal(404);
      expect(unserved.body).to.deep.equal({
        detail: "plan[1] (default-cua) needs a brain, and the model 'large-cua-72b' is accepted but not served by this deployment (no backend is configured for it); GET /v1/models lists the accepted ids, with served: true on those served here",
      });
      // an unknown step type falls back to the run's brain (default-cua when cua_model is absent), at any depth
      const nested = await run(acme, { plan: { steps: [{ intent: 'l', type: 'loop', steps: [{ intent: 'x', type: 'teleport' }] }] } });
      expect(nested.status).to.equal(404);
      expect(nested.body.detail).to.match(/^plan\.steps\[0\]\.steps\[0\] \(teleport\) needs a brain, and the model 'default-cua' is accepted but not served/);
      const hosted = await run(acme, { plan: [{ intent: 'read it', type: 'hosted-api' }], cua_model: 'compact-cua' });
      expect(hosted.status).to.equal(404);
      expect(hosted.body.detail).to.match(/^plan\[0\] \(hosted-api\) needs a brain, and the model 'hosted-api' is accepted but not served/);
    });
  });

  describe('micro plan references', () => {
    it('runs a plan from the plans directory, with or without .json', async () => {
      for (const micro of ['shop/listings', 'shop/listings.json']) {
        const r = await run(acme, { micro });
        expect(r.status, r.text).to.equal(200);
        const rec = await record(acme, r.body.run_id);
        expect(rec.plan.steps[0]!.url).to.equal('https://shop.example.com/list');
        expect(rec.runtime.compute_backend).to.equal('dom_plane');
      }
    });

    it('refuses traversal, absolute paths and symlinks leading outside with 400', async () => {
      for (const micro of ['../secret.json', 'shop/../../secret', '/etc/passwd', 'escape.json', 'escape']) {
        const r = await run(acme, { micro });
        expect(r.status, micro).to.equal(400);
        expect(r.body.detail).to.match(/^micro: /);
      }
    });

    it('validates the referenced plan and reports a missing one', async () => {
      const broken = await run(acme, { micro: 'broken' });
      expect(broken.status).to.equal(400);
      expect(broken.body.detail).to.match(/^micro\[0\]\.intent: is required/);
      const missing = await run(acme, { micro: 'nope/none' });
      expect(missing.status).to.equal(400);
      expect(missing.body.detail).to.match(/not found/);
    });
  });

  describe('normalization', () => {
    it('clamps loop_count to SERVICE_MAX_LOOP_ITERATIONS at every depth', async () => {
      const r = await run(acme, { plan: [{ intent: 'l', type: 'loop', loop_count: 500, steps: [{ intent: 'l2', type: 'loop', loop_count: 9, steps: [step()] }, { intent: 'l3', type: 'loop', loop_count: 3 }] }] });
      expect(r.status).to.equal(200);
      const rec = await record(acme, r.body.run_id);
      expect(rec.plan.steps[0]!.loop_count).to.equal(7);
      expect(rec.plan.steps[0]!.steps![0]!.loop_count).to.equal(7);
      expect(rec.plan.steps[0]!.steps![1]!.loop_count).to.equal(3);
    });

    it('clamps max_cost and max_time_minutes to the tenant caps; submission fields override the plan only when set', async () => {
      const plan = { steps: [step()], runtime: { max_cost: 1.5, max_time_minutes: 30, compute_backend: 'computer_plane', proxy_provider: 'residential-a' } };
      const planOnly = await record(capped, (await run(capped, { plan })).body.run_id);
      expect(planOnly.runtime).to.include({ max_cost: 1.5, max_time_minutes: 10, compute_backend: 'computer_plane', proxy_provider: 'residential-a' });
      const overridden = await record(capped, (await run(capped, { plan, max_cost: 100, max_time_minutes: 5, compute_backend: 'dom_plane' })).body.run_id);
      expect(overridden.runtime).to.include({ max_cost: 2, max_time_minutes: 5, compute_backend: 'dom_plane', proxy_provider: 'residential-a' });
      const defaults = await record(capped, (await run(capped, { plan: [step()] })).body.run_id);
      expect(defaults.runtime).to.include({ max_cost: 2, max_time_minutes: 10, compute_backend: 'dom_plane', proxy_provider: 'residential-c' });
      const acmeDefault = await record(acme, (await run(acme, { plan: [step()] })).body.run_id);
      expect(acmeDefault.runtime.compute_backend).to.equal('computer_plane');
    });

    it("records the run's capture_mode: the gateway's unless asked for less, the submission's over the plan's", async () => {
      const byDefault = await record(acme, (await run(acme, { plan: [step()] })).body.run_id);
      expect(byDefault.runtime.capture_mode).to.equal('model_io');
      const lean = await record(acme, (await run(acme, { plan: { steps: [step()], runtime: { capture_mode: 'screenshots' } }, capture_mode: 'trace' })).body.run_id);
      expect(lean.runtime.capture_mode).to.equal('trace');
      const fromPlan = await record(acme, (await run(acme, { plan: { steps: [step()], runtime: { capture_mode: 'off' } } })).body.run_id);
      expect(fromPlan.runtime.capture_mode).to.equal('off');
      // and the run says so
      const shown = await gw.req('GET', `/v1/runs/${lean.run_id}`, { token: acme });
      expect(shown.body.capture_mode).to.equal('trace');
    });

    it('accepts unknown step types and extra properties, and stores profile and workflow ids tenant-prefixed', async () => {
      const r = await run(acme, { plan: [{ intent: 'do something novel', type: 'teleport', flavour: 'extra' }], profile_id: 'p1', workflow_id: 'wf-9', cua_model: 'compact-cua' });
      expect(r.status).to.equal(200);
      const rec = await record(acme, r.body.run_id);
      expect(rec.plan.steps[0]).to.include({ type: 'teleport', flavour: 'extra' });
      expect(rec).to.include({ profile_id: 'acme/p1', workflow_id: 'acme/wf-9', cua_model: 'compact-cua' });
      await gw.req('POST', `/v1/runs/${r.body.run_id}/cancel`, { token: acme });
    });

    it('accepts the mechanical extraction extension fields', async () => {
      const r = await run(acme, { plan: [{ intent: 'rows', type: 'extract_data', extract: { item_selector: '.card', max_items: 5, fields: [{ name: 'title', type: 'str', selector: 'h2' }, { name: 'link', type: 'str', selector: 'a', attr: 'href' }] } }] });
      expect(r.status, r.text).to.equal(200);
    });
  });

  describe('reading runs', () => {
    it('answers status, result and logs for the owner and 404 for another tenant', async () => {
      const { run_id } = (await run(acme, { plan: [step()] })).body;
      const status = await run(acme, { action: 'status', run_id });
      expect(status.body).to.include({ run_id, status: 'queued', phase: 'queued', halt_class: null, failure_help: null });
      const result = await run(acme, { action: 'result', run_id });
      expect(result.body).to.deep.include({ status: 'queued', run_id, steps: [], extraction_quality: { unknown_placeholder_row_count: 0, dropped_partial_row_count: 0, spam_row_count: 0, excluded_card_count: 0 } });
      const logs = await run(acme, { action: 'logs', run_id, tail: 1 });
      expect(logs.body.events).to.have.length(1);
      expect(logs.body.events[0]).to.match(/status queued/);
      for (const action of ['status', 'result', 'logs']) {
        const r = await run(other, { action, run_id });
        expect(r.status, action).to.equal(404);
      }
      for (const sub of ['', '/status', '/result', '/events', '/trace', '/video', '/artifacts/extracted_rows.json']) {
        expect((await gw.req('GET', `/v1/runs/${run_id}${sub}`, { token: other })).status, sub).to.equal(404);
      }
      expect((await gw.req('POST', `/v1/runs/${run_id}/cancel`, { token: other })).status).to.equal(404);
      const life = await gw.req('GET', `/v1/runs/${run_id}`, { token: acme });
      expect(life.body).to.include({ run_id, status: 'queued', compute_backend: 'computer_plane', cua_model: 'default-cua' });
      expect((await gw.req('GET', `/v1/runs/${run_id}/video`, { token: acme })).body.detail).to.match(/no video/);
    });

    it('cancels a run with a halt class, failure_help and debug surfaces', async () => {
      const { run_id } = (await run(acme, { plan: [step()] })).body;
      const c = await gw.req('POST', `/v1/runs/${run_id}/cancel`, { token: acme });
      expect(c.body).to.include({ status: 'cancelled', phase: 'halted', halt_class: 'cancelled' });
      expect(c.body.failure_help.debug_surfaces).to.have.keys('events', 'trace', 'logs', 'phase', 'status', 'result');
      expect(c.body.failure_help.retries_spent).to.equal(0);
    });
  });

  describe('profile lock', () => {
    it('refuses a second run on a busy profile with 409 naming the holder, and frees it on cancel', async () => {
      const first = await run(acme, { plan: [step()], profile_id: 'shared' });
      const second = await run(acme, { plan: [step()], profile_id: 'shared' });
      expect(second.status).to.equal(409);
      expect(second.body.detail).to.include(first.body.run_id);
      const elsewhere = await run(other, { plan: [step()], profile_id: 'shared' });
      expect(elsewhere.status, 'profiles are per tenant').to.equal(200);
      await gw.req('POST', `/v1/runs/${first.body.run_id}/cancel`, { token: acme });
      expect((await run(acme, { plan: [step()], profile_id: 'shared' })).status).to.equal(200);
    });

    it('takes the legacy state_key as the profile_id it names: tenant-prefixed and under the same lock', async () => {
      const first = await run(acme, { plan: [step()], state_key: 'legacy-acct' });
      expect(first.status, first.text).to.equal(200);
      const life = (await gw.req('GET', `/v1/runs/${first.body.run_id}`, { token: acme })).body;
      expect(life.profile_id).to.equal('acme/legacy-acct');
      const second = await run(acme, { plan: [step()], profile_id: 'legacy-acct' });
      expect(second.status, 'the same profile state, the same lock').to.equal(409);
      const both = await run(acme, { plan: [step()], profile_id: 'a', state_key: 'b' });
      expect(both.status).to.equal(400);
      expect(both.body.detail).to.match(/^state_key: is the legacy name of profile_id/);
      expect((await run(acme, { plan: [step()], state_key: '../x' })).status, 'the same safe pattern as profile_id').to.equal(400);
      await gw.req('POST', `/v1/runs/${first.body.run_id}/cancel`, { token: acme });
    });
  });

  describe('Idempotency-Key', () => {
    it('returns the first run_id for a repeat and starts nothing new', async () => {
      const key = `k-${newToken().slice(0, 12)}`;
      const body = { plan: [step()], workflow_id: 'w1' };
      const first = await run(acme, body, { 'Idempotency-Key': key });
      const again = await run(acme, { workflow_id: 'w1', plan: [step()] }, { 'Idempotency-Key': key });
      expect(again.status).to.equal(200);
      expect(again.body.run_id).to.equal(first.body.run_id);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
    });

    it('refuses the same key with a different body with 422', async () => {
      const key = `k-${newToken().slice(0, 12)}`;
      await run(acme, { plan: [step()] }, { 'Idempotency-Key': key });
      const r = await run(acme, { plan: [step({ url: 'https://example.com/other' })] }, { 'Idempotency-Key': key });
      expect(r.status).to.equal(422);
      expect(r.body.detail).to.match(/different request body/);
    });

    it('starts exactly one run for concurrent duplicates', async () => {
      const key = `k-${newToken().slice(0, 12)}`;
      const before = await gw.gateway.services.limits.runningCount('other');
      const results = await Promise.all(Array.from({ length: 8 }, () => run(other, { plan: [step()] }, { 'Idempotency-Key': key })));
      expect(results.every((r) => r.status === 200)).to.equal(true);
      expect(new Set(results.map((r) => r.body.run_id)).size).to.equal(1);
      expect(await gw.gateway.services.limits.runningCount('other')).to.equal(before + 1);
    });

    it('forgets a key after its TTL', async () => {
      const token = newToken();
      const short = await (await import('../support/gateway.ts')).startGateway({ env: { SERVICE_IDEMPOTENCY_TTL_SECONDS: '1' }, keys: { [token]: { tenant_id: 'ttl', rate_limit_per_minute: 0 } } });
      try {
        const first = await short.req('POST', '/v1/predict', { token, body: { plan: [step()] }, headers: { 'Idempotency-Key': 'ttl-key' } });
        const same = await short.req('POST', '/v1/predict', { token, body: { plan: [step()] }, headers: { 'Idempotency-Key': 'ttl-key' } });
        expect(same.body.run_id).to.equal(first.body.run_id);
        await new Promise((r) => setTimeout(r, 1100));
        const later = await short.req('POST', '/v1/predict', { token, body: { plan: [step()] }, headers: { 'Idempotency-Key': 'ttl-key' } });
        expect(later.status).to.equal(200);
        expect(later.body.run_id).not.to.equal(first.body.run_id);
      } finally {
        await short.close();
      }
    });

    it('is tenant-scoped and refuses a malformed key', async () => {
      const key = `k-${newToken().slice(0, 12)}`;
      const a = await run(acme, { plan: [step()] }, { 'Idempotency-Key': key });
      const b = await run(other, { plan: [step()] }, { 'Idempotency-Key': key });
      expect(b.status).to.equal(200);
      expect(b.body.run_id).not.to.equal(a.body.run_id);
      const bad = await run(acme, { plan: [step()] }, { 'Idempotency-Key': 'x'.repeat(300) });
      expect(bad.status).to.equal(400);
    });
  });
});
