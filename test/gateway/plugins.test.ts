import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ESLint } from 'eslint';
import { loadConfig } from '../../gateway/config.ts';
import { createGateway } from '../../gateway/server.ts';
import { HostToolError, PluginLoadError, PluginRegistry } from '../../gateway/plugins/registry.ts';
import { loadPlugins, orderByDependencies } from '../../gateway/plugins/loader.ts';
import { createLogger } from '../../gateway/log.ts';
import { startGateway, newToken, step, type TestGateway } from '../support/gateway.ts';
import { startRedis } from '../support/redis.ts';
import { builtPath } from '../../shared/build.mjs';

const root = path.resolve(import.meta.dirname, '../..');
const fixtures = path.join(root, 'test/fixtures/plugins');

async function refusal(dir: string): Promise<PluginLoadError> {
  const data = await mkdtemp(path.join(tmpdir(), 'runplane-plugins-'));
  const config = loadConfig({ SERVICE_PORT: '0', SERVICE_DATA_DIR: data, SERVICE_RUNNER: 'off', SERVICE_PLUGINS_DIR: dir });
  try {
    const gw = await createGateway(config, { logStream: { write: () => {} } });
    await gw.close();
  } catch (err) {
    expect(err).to.be.instanceOf(PluginLoadError);
    return err as PluginLoadError;
  }
  throw new Error(`the gateway started with the plugins of ${dir}`);
}

describe('plugin host', () => {
  describe('refuses to start with a broken plugin, naming the plugin and the reason', () => {
    const cases: Array<[string, string, RegExp]> = [
      ['throws-on-import', 'boom', /^plugin 'boom' refused: import of \S+boom\.ts failed: kaboom while importing$/],
      ['throws-in-register', 'bad-register', /^plugin 'bad-register' refused: register\(\) failed: no database configured$/],
      ['unmet-dependency', 'needy', /^plugin 'needy' refused: depends on plugin 'not-installed', which is not loaded$/],
      ['cycle', 'chicken', /^plugin 'chicken' refused: dependency cycle: chicken -> egg -> chicken$/],
      ['wrong-api', 'from-the-future', /^plugin 'from-the-future' refused: apiVersion 2 is not supported; this gateway speaks plugin API 1$/],
      ['invalid-shape', 'shapeless', /^plugin 'shapeless' refused: register must be a function$/],
      ['no-default', 'helpers', /^plugin 'helpers' refused: the module has no default export/],
      ['name-collision', 'steps-core', /^plugin 'steps-core' refused: a plugin of that name is already loaded \(builtin, \S+plugins\/steps-core\/index\.ts\)/],
      ['step-collision', 'my-navigate', /^plugin 'my-navigate' refused: step type 'navigate' is already registered by plugin 'steps-core'$/],
      ['recipe-collision', 'more-recipes', /^plugin 'more-recipes' refused: recipe 'listing-cards' is already registered by plugin 'recipes'$/],
      ['tool-collision', 'tools-b', /^plugin 'tools-b' refused: host tool 'lookup' is already registered by plugin 'tools-a'$/],
      ['brain-collision', 'brains-b', /^plugin 'brains-b' refused: brain 'twin-cua' is already registered by plugin 'brains-a'$/],
      ['bad-recipe', 'wonky-recipe', /^plugin 'wonky-recipe' refused: recipe "wonky" is invalid: schema\.fields: /],
      ['folder-without-index', 'empty', /^plugin 'empty' refused: folder \S+ has no index\.ts, index\.mjs or index\.js$/],
      ['does-not-exist', 'does-not-exist', /^plugin 'does-not-exist' refused: SERVICE_PLUGINS_DIR \S+ cannot be read: ENOENT$/],
    ];
    for (const [dir, plugin, message] of cases) {
      it(`${dir}: ${plugin}`, async () => {
        const err = await refusal(path.join(fixtures, dir));
        expect(err.plugin).to.equal(plugin);
        expect(err.message).to.match(message);
      });
    }

    it('register-hangs: sleepy (a register() that never finishes)', async () => {
      const err = await loadPlugins({ builtinDir: path.join(root, 'plugins'), operatorDir: path.join(fixtures, 'register-hangs'), dataDir: tmpdir(), log: createLogger('silent'), registerTimeoutMs: 200 }).catch((e: unknown) => e);
      expect(err).to.be.instanceOf(PluginLoadError).and.include({ plugin: 'sleepy' });
      expect((err as Error).message).to.equal("plugin 'sleepy' refused: register() did not finish within 0.2 s");
    });

    it('orders by dependsOn (built-ins first, then by name, among those free to go) and names the cycle it finds', () => {
      const def = (name: string, dependsOn: string[] = [], source: 'builtin' | 'operator' = 'operator') => ({ def: { name, version: '1.0.0', apiVersion: 1, dependsOn, register() {} }, mod: { id: name, file: `${name}.ts`, source } });
      const order = orderByDependencies([def('top', ['left', 'right']), def('right', ['base']), def('left', ['base']), def('base'), def('core', [], 'builtin'), def('alone')]);
      expect(order.map((d) => d.def.name)).to.deep.equal(['core', 'alone', 'base', 'left', 'right', 'top']);
      expect(() => orderByDependencies([def('a', ['b']), def('b', ['c']), def('c', ['a']), def('d', ['a'])])).to.throw(PluginLoadError, "plugin 'a' refused: dependency cycle: a -> b -> c -> a");
      expect(() => orderByDependencies([def('self', ['self'])])).to.throw(PluginLoadError, 'dependency cycle: self -> self');
    });

    it('npm start prints the refusal on one line and exits 1, without a stack trace', async function () {
      this.timeout(30_000);
      const child = spawn(process.execPath, [builtPath('gateway/start.ts')], {
        cwd: root,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', TMPDIR: tmpdir(), SERVICE_PORT: '0', SERVICE_API_TOKEN: newToken(), SERVICE_RUNNER: 'off', SERVICE_DATA_DIR: await mkdtemp(path.join(tmpdir(), 'runplane-start-')), SERVICE_PLUGINS_DIR: path.join(fixtures, 'throws-in-register') },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let err = '';
      child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
      const [code] = await once(child, 'exit');
      expect(code).to.equal(1);
      expect(err.trim()).to.equal("runplane: start-up stopped: plugin 'bad-register' refused: register() failed: no database configured");
    });
  });

  it('refuses a mount on a path the gateway owns, a malformed prefix, a taken prefix and a second trace destination', () => {
    const registry = new PluginRegistry(createLogger('silent'));
    const a = registry.addPlugin({ name: 'a', version: '1', apiVersion: 1, register() {} }, 'operator', 'a.ts');
    const b = registry.addPlugin({ name: 'b', version: '1', apiVersion: 1, register() {} }, 'operator', 'b.ts');
    const handler = () => {};
    expect(() => registry.addMount(a, '/v1', handler)).to.throw(/plugin 'a' refused: mount prefix \/v1 belongs to the gateway/);
    expect(() => registry.addMount(a, 'trace', handler)).to.throw(/must be one path segment/);
    expect(() => registry.addMount(a, '/a/b', handler)).to.throw(/must be one path segment/);
    registry.addMount(a, '/svc', handler);
    expect(() => registry.addMount(b, '/svc', handler)).to.throw(/plugin 'b' refused: mount prefix \/svc is already mounted by plugin 'a'/);
    const dest = { dsnFor: async () => 'http://k@h', links: () => ({ manifest_url: '', trace_url: '' }) };
    registry.setTraceDestination(a, dest);
    expect(() => registry.setTraceDestination(b, dest)).to.throw(/already set by plugin 'a'/);
    expect(registry.mounts().map((m) => m.prefix)).to.deep.equal(['/svc']);
  });

  describe('with operator plugins loaded from SERVICE_PLUGINS_DIR', () => {
    let gw: TestGateway;
    const alice = newToken();
    const bob = newToken();
    const reader = newToken();
    before(async () => {
      gw = await startGateway({
        env: { SERVICE_PLUGINS_DIR: path.join(fixtures, 'working'), SERVICE_MAX_BODY_BYTES: '2048' },
        keys: { [alice]: { tenant_id: 'alice', rate_limit_per_minute: 0 }, [bob]: { tenant_id: 'bob', rate_limit_per_minute: 0 }, [reader]: { tenant_id: 'alice', scopes: ['status'] } },
      });
    });
    after(() => gw.close());

    it('GET /v1/plugins lists built-ins and operator plugins in dependency order, with what each registered', async () => {
      expect((await gw.req('GET', '/v1/plugins')).status).to.equal(401);
      const r = await gw.req('GET', '/v1/plugins', { token: reader });
      expect(r.status).to.equal(200);
      const list = r.body.plugins as Array<Record<string, any>>; // eslint-disable-line @typescript-eslint/no-explicit-any
      // notes sorts before zz-base but depends on it
      expect(list.map((p) => p.name)).to.deep.equal(['brains', 'recipes', 'steps-core', 'trace-ingest', 'viewer', 'zz-base', 'notes']);
      expect(list.map((p) => p.source)).to.deep.equal(['builtin', 'builtin', 'builtin', 'builtin', 'builtin', 'operator', 'operator']);
      expect(list[3]!.registered.mounts).to.deep.equal(['/trace']);
      const notes = list[6]!;
      expect(notes).to.include({ version: '1.2.3', apiVersion: 1, route_prefix: '/v1/plugins/notes' });
      expect(notes.dependsOn).to.deep.equal(['zz-base']);
      expect(notes.registered.trace_sinks).to.deep.equal(['memory', 'always-fails']);
      expect(notes.registered.routes).to.deep.include({ method: 'POST', path: '/notes' });
      expect(list[5]!.registered).to.deep.include({ host_tools: ['stamp'], step_types: ['stamp_step'] });
      expect(list[0]!.registered.step_types).to.deep.equal([]);
      expect(list[2]!.registered.step_types).to.include.members(['default-cua', '*', 'hosted-api']);
      expect(list[1]!.registered.recipes).to.deep.equal(['listing-cards']);
      expect(list[2]!.registered.step_types).to.include.members(['navigate', 'click', 'extract_data', 'tool_call', 'done']);
      const handlers = list[2]!.registered.step_handlers as Array<{ types: string[] }>;
      expect(handlers.find((h) => h.types[0] === 'submit')).to.deep.include({ checks: { stateChange: true, successContract: true } });
      expect(handlers.find((h) => h.types[0] === 'capture_link_in_new_tab')).to.deep.include({ needs: { domAware: true } });
      expect(handlers.find((h) => h.types[0] === 'extract_data')).to.deep.include({ needs: { recipe: true }, checks: { rows: true }, haltClass: 'extract_data_failed' });
      expect(JSON.stringify(r.body), 'no file system paths').not.to.include(root);
    });

    it('exposes the registries on services.plugins: exact step type, then the generic handler; recipes; brains', () => {
      const p = gw.gateway.services.plugins;
      expect(p.stepHandler('navigate')!.types).to.deep.equal(['navigate']);
      expect(p.stepHandler('stamp_step')!.description).to.equal('stamps the step');
      // steps-core serves unknown types with the run's brain
      expect(p.stepHandler('frobnicate')!.types).to.include('*');
      expect(p.recipe('listing-cards')!.schema.schema_name).to.equal('listing_cards');
      expect(p.recipe('nope')).to.equal(undefined);
      expect(p.brain('default-cua')).to.equal(undefined);
      expect(p.hostTool('stamp')!.description).to.match(/stamped/);
    });

    it('calls a host tool with schema-checked args, and throws a typed error for an unknown tool or bad args', async () => {
      const p = gw.gateway.services.plugins;
      const ctx = { runId: 'r', tenantId: 'alice', signal: new AbortController().signal };
      expect(await p.callTool('stamp', { label: 'ok' }, ctx)).to.deep.equal({ stamped: 'ok' });
      const unknown = await p.callTool('nope', {}, ctx).catch((e: unknown) => e);
      expect(unknown).to.be.instanceOf(HostToolError).and.include({ code: 'unknown_tool' });
      const bad = await p.callTool('stamp', { label: 'x'.repeat(21) }, ctx).catch((e: unknown) => e);
      expect(bad).to.be.instanceOf(HostToolError).and.include({ code: 'invalid_args' });
      expect((bad as Error).message).to.match(/args\.label: must NOT have more than 20 characters/);
    });

    it('serves plugin routes under /v1/plugins/<name>/ with auth, scopes and the tenant from the token only', async () => {
      expect((await gw.req('GET', '/v1/plugins/notes/ping')).body).to.deep.equal({ pong: true });
      expect((await gw.req('GET', '/v1/plugins/notes/data-dir', { token: reader })).body.dataDir).to.equal(path.join(gw.dir, 'plugins', 'notes'));
      const anon = await gw.req('GET', '/v1/plugins/notes/notes');
      expect(anon.status).to.equal(401);
      expect(anon.body.detail).to.match(/X-Service-Token/);
      const noScope = await gw.req('POST', '/v1/plugins/notes/notes', { token: reader, body: { text: 'hi' } });
      expect(noScope.status).to.equal(403);
      expect(noScope.body.detail).to.match(/'run' scope/);
      const echo = await gw.req('GET', '/v1/plugins/notes/echo?x=1', { token: alice, headers: { 'X-Tenant-Id': 'bob', Authorization: 'Api-Key secret' } });
      expect(echo.body).to.include({ path: '/echo', tenantId: 'alice' });
      expect(echo.body.query).to.deep.equal({ x: '1' });
      expect(echo.body.headers).not.to.have.any.keys('x-service-token', 'authorization');
      expect(JSON.stringify(echo.body)).not.to.include(alice);
    });

    it('keeps tenants apart on plugin routes', async () => {
      const made = await gw.req('POST', '/v1/plugins/notes/notes', { token: alice, body: { text: "alice's secret" } });
      expect(made.status).to.equal(201);
      expect((await gw.req('GET', `/v1/plugins/notes/notes/${made.body.id}`, { token: alice })).body.text).to.equal("alice's secret");
      expect((await gw.req('GET', '/v1/plugins/notes/notes', { token: bob })).body).to.deep.equal({ notes: [] });
      const other = await gw.req('GET', `/v1/plugins/notes/notes/${made.body.id}`, { token: bob });
      expect(other.status).to.equal(404);
      expect(other.body.detail).to.match(/not found/);
    });

    it('answers hostile input on plugin routes with {detail}, never the plugin internals', async () => {
      const cases: Array<[string, string, Parameters<TestGateway['req']>[2], number, RegExp]> = [
        ['POST', '/v1/plugins/notes/notes', { token: alice, raw: '{"text": ', headers: { 'Content-Type': 'application/json' } }, 400, /JSON/],
        ['POST', '/v1/plugins/notes/notes', { token: alice, raw: 'text=hi', headers: { 'Content-Type': 'application/x-www-form-urlencoded' } }, 415, /application\/json/],
        ['POST', '/v1/plugins/notes/notes', { token: alice, body: { text: 'x'.repeat(5000) } }, 400, /exceeds the limit of 2048 bytes/],
        ['POST', '/v1/plugins/notes/notes', { token: alice, raw: '['.repeat(100) + ']'.repeat(100), headers: { 'Content-Type': 'application/json' } }, 400, /nests deeper/],
        ['POST', '/v1/plugins/notes/notes', { token: alice, raw: '{"__proto__": {"text": "x"}}', headers: { 'Content-Type': 'application/json' } }, 400, /__proto__|forbidden/i],
        ['POST', '/v1/plugins/notes/notes', { token: alice, raw: Buffer.from([0x7b, 0xff, 0x7d]), headers: { 'Content-Type': 'application/json' } }, 400, /UTF-8/],
        ['POST', '/v1/plugins/notes/notes', { token: alice, body: { text: 42 } }, 400, /^text: must be a non-empty string$/],
        ['GET', '/v1/plugins/notes/boom', { token: alice }, 500, /^plugin 'notes' failed to answer \(request id /],
        ['GET', '/v1/plugins/notes/teapot', { token: alice }, 418, /^plugin 'notes' answered 418$/],
        ['GET', '/v1/plugins/notes/nowhere', { token: alice }, 404, /no route/],
        ['GET', '/v1/plugins/nobody/notes', { token: alice }, 404, /no route/],
        ['GET', '/v1/plugins/notes/..%2f..%2fruns', { token: alice }, 404, /no route/],
        ['DELETE', '/v1/plugins/notes/notes', { token: alice }, 405, /./],
      ];
      for (const [method, p, opts, status, detail] of cases) {
        const r = await gw.req(method, p, opts);
        expect(r.status, `${method} ${p} ${r.text}`).to.equal(status);
        expect(r.body.detail, `${method} ${p}`).to.be.a('string').and.match(detail);
        expect(r.text).not.to.include('secret internals');
      }
      expect(gw.logs.some((l) => l.includes('"plugin":"notes"') && l.includes('secret internals'))).to.equal(true);
    });

    it('fans every run event out to the trace sinks; a failing sink is logged and stops nothing', async () => {
      const r = await gw.req('POST', '/v1/predict', { token: alice, body: { plan: [step()] } });
      expect(r.status).to.equal(200);
      const seen = await gw.req('GET', '/v1/plugins/notes/events', { token: alice });
      const mine = (seen.body.events as Array<{ run_id: string; type: string; seq: number; data: Record<string, unknown> }>).filter((e) => e.run_id === r.body.run_id);
      expect(mine.map((e) => [e.seq, e.type, e.data.status])).to.deep.equal([[1, 'run.status', 'queued']]);
      expect((await gw.req('GET', '/v1/plugins/notes/events', { token: bob })).body.events).to.deep.equal([]);
      await new Promise((res) => setTimeout(res, 50));
      const failures = () => gw.logs.filter((l) => l.includes('trace sink failed') && l.includes('sink down')).map((l) => JSON.parse(l).failures as number);
      expect(failures()[0]).to.equal(1);
      // a sink that keeps failing is logged at its 1st, 10th, 100th ... failure, not once per event
      for (let i = 0; i < 12; i++) gw.gateway.services.plugins.emit({ seq: i + 1, run_id: 'r', tenant_id: 'alice', type: 'probe', ts: new Date().toISOString(), data: {} });
      await new Promise((res) => setTimeout(res, 50));
      expect(failures().filter((n) => n <= 14)).to.deep.equal([1, 10]);
    });

    it('documents GET /v1/plugins and the loaded plugins routes in the OpenAPI document', async () => {
      const doc = (await gw.req('GET', '/openapi.json')).body;
      expect(doc.paths['/v1/plugins'].get.security).to.deep.equal([{ serviceToken: [] }]);
      expect(doc.paths['/v1/plugins/notes/notes/{id}'].get.tags).to.deep.equal(['plugin:notes']);
      expect(doc.paths['/v1/plugins/notes/notes'].post['x-required-scope']).to.equal('run');
      expect(doc.paths['/v1/plugins/notes/ping'].get.security, 'a public route declares no security').to.deep.equal([]);
      expect(doc.tags.find((t: { name: string }) => t.name === 'plugins').description).to.include('/v1/plugins/<name>/');
    });
  });

  it('on Redis with two replicas, hands each run event to the trace sinks once, from the replica that appended it', async function () {
    this.timeout(30_000);
    const redis = await startRedis();
    const token = newToken();
    const keys = { [token]: { tenant_id: 'carol', rate_limit_per_minute: 0 } };
    const env = { SERVICE_REDIS_URL: redis.url, SERVICE_PLUGINS_DIR: path.join(fixtures, 'working') };
    const [g1, g2] = await Promise.all([startGateway({ keys, env }), startGateway({ keys, env })]);
    try {
      const run = await g1.req('POST', '/v1/predict', { token, body: { plan: [step()] } });
      expect((await g2.req('POST', `/v1/runs/${run.body.run_id}/cancel`, { token })).body.status).to.equal('cancelled');
      // both replicas run in this process and share the fixture's module state, so `events` shows what every sink saw
      await new Promise((res) => setTimeout(res, 200));
      const seen = (await g1.req('GET', '/v1/plugins/notes/events', { token })).body.events as Array<{ run_id: string; seq: number; type: string }>;
      expect(seen.filter((e) => e.run_id === run.body.run_id).map((e) => [e.seq, e.type])).to.deep.equal([
        [1, 'run.status'],
        [2, 'run.ended'],
      ]);
    } finally {
      await Promise.all([g1.close(), g2.close()]);
      await redis.stop();
    }
  });

  it('eslint holds plugins to the contract: no gateway internals, no dev packages; trace-ingest may use sdk/', async function () {
    this.timeout(30_000);
    const eslint = new ESLint({ cwd: root });
    const code = "import type { Logger } from '../../gateway/log.ts';\nimport type { StepHandler } from '../../gateway/plugins/contract.ts';\nimport type { Plan } from '../../schemas/types.gen.ts';\nimport { read } from '../../sdk/reader.ts';\nimport { expect } from 'chai';\nimport { readFileSync } from 'node:fs';\nexport type T = [Logger, StepHandler, Plan, typeof read, typeof expect, typeof readFileSync];\n";
    const lint = async (file: string) => (await eslint.lintText(code, { filePath: path.join(root, file) }))[0]!.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.line);
    expect(await lint('plugins/probe/index.ts')).to.deep.equal([1, 4, 5]);
    expect(await lint('examples/plugins/probe.ts')).to.deep.equal([1, 4, 5]);
    expect(await lint('plugins/trace-ingest/index.ts')).to.deep.equal([1, 5]);
    expect(await lint('gateway/probe.ts')).to.deep.equal([]);
  });
});
