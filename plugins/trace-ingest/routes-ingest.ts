// The ingest routes (DSN bearer): manifest, trace, steps, costs, events,
// screenshots, model io, logs, judge decisions, reasoning, side effects,
// outcomes, eval candidates, findings, preferences, heartbeat, commands.
import { TRACE_SCHEMA_FILES, checkDef, traceSchemaBytes } from '../../schemas/trace/index.ts';
import { idProblem } from '../../shared/ids.ts';
import { writeBytes } from '../../sdk/store.ts';
import { shortId } from '../../sdk/util.ts';
import { isPng } from '../../sdk/validate.ts';
import { IngestError, unprocessable } from './http.ts';
import { bodyStepIndex, ingestRun, intParam, obj, pad4, pathParamProblem, validate, type RouteDef } from './route-kit.ts';
import { IngestService, LOG_FILE_LIMIT } from './service.ts';

export const INGEST_ROUTES: RouteDef[] = [
  {
    method: 'POST', path: '/runs', auth: 'dsn', category: 'step', body: 'json', schema: 'manifest', batchable: true, ok: [201, 200],
    summary: 'Create or update a run from its manifest (idempotent on run_id)',
    async handler(svc, rc) {
      // an unsafe run id is 400 (as in every run path), before the schema's 422
      const runId = (rc.body as { run_id?: unknown } | null)?.run_id;
      const problem = typeof runId === 'string' ? idProblem('run_id', runId) : null;
      if (problem) throw new IngestError(400, problem);
      validate('manifest', rc.body);
      const m = rc.body as Record<string, unknown> & { run_id: string; branch_context?: { parent_run_id?: string } };
      const { entry, created } = await svc.claimRun(rc.principal!.tenant.tenant_id, m.run_id);
      await svc.write(rc, entry, async (store) => {
        await IngestService.putJson(store, 'manifest.json', m);
        // the embedded schema copies of a bundle, from the service's schema package
        if (!(await store.exists('schema/manifest.schema.json'))) for (const f of TRACE_SCHEMA_FILES) await writeBytes(store, `schema/${f}`, traceSchemaBytes(f));
      });
      Object.assign(entry, {
        status: typeof m.status === 'string' ? m.status : entry.status,
        client_name: m.client_name,
        debug_session_id: m.debug_session_id,
        step_count: typeof m.step_count === 'number' ? m.step_count : entry.step_count,
        parent_run_id: m.branch_context?.parent_run_id ?? null,
        group_id: typeof m.group_id === 'string' ? m.group_id : null,
        session_type: typeof m.session_type === 'string' ? m.session_type : null,
      });
      await svc.saveRun(entry);
      await svc.touchConnection(rc.principal!.tenant.tenant_id, rc.principal!.clientId, rc.principal!.dsn.dsn_id, { run_id: m.run_id, client_name: String(m.client_name) });
      return { status: created ? 201 : 200, body: { run_id: m.run_id, created } };
    },
  },
  {
    method: 'PUT', path: '/runs/:run_id/trace', auth: 'dsn', category: 'step', body: 'json', schema: 'trace', batchable: true,
    summary: 'Store the full trace.json document',
    async handler(svc, rc) {
      validate('trace', rc.body);
      const doc = rc.body as { session: { run_id: string; status?: string }; steps: unknown[] };
      if (doc.session.run_id !== rc.params.run_id) throw unprocessable('session.run_id does not match the path');
      const entry = await ingestRun(svc, rc);
      await svc.write(rc, entry, (store) => IngestService.putJson(store, 'trace.json', doc));
      entry.step_count = doc.steps.length;
      if (doc.session.status) entry.status = doc.session.status;
      await svc.saveRun(entry);
      return { body: { run_id: entry.run_id, steps: doc.steps.length } };
    },
  },
  {
    method: 'PUT', path: '/runs/:run_id/steps/:step_index', auth: 'dsn', category: 'step', body: 'json', schema: 'step', batchable: true, pipelined: true,
    summary: 'Store one step record; a step_id other than the canonical one is stored as an iteration (steps/NNNN/<short_id>.json)',
    async handler(svc, rc) {
      const idx = intParam(rc.params.step_index, 'step_index');
      validate('step', rc.body);
      const step = rc.body as { step_index: number; step_id: string; step_iterations?: number };
      if (step.step_index !== idx) throw unprocessable('step_index does not match the path');
      const entry = await ingestRun(svc, rc);
      const rel = await svc.write(rc, entry, async (store) => {
        const canonical = await svc.canonicalStep(entry, idx, step.step_id);
        const iterRel = `steps/${pad4(idx)}/${shortId(step.step_id)}.json`;
        if (canonical !== step.step_id) {
          await IngestService.putJson(store, iterRel, step);
          return iterRel;
        }
        await IngestService.putJson(store, `steps/${pad4(idx)}.json`, step);
        if ((step.step_iterations ?? 1) > 1) await IngestService.putJson(store, iterRel, step);
        return `steps/${pad4(idx)}.json`;
        // a step's files (and its canonical claim) in a lane of their own: the steps of a batch claim in one commit
      }, { stepCount: idx + 1, lane: `steps/${pad4(idx)}` });
      return { body: { stored: rel } };
    },
  },
  {
    method: 'PUT', path: '/runs/:run_id/costs', auth: 'dsn', category: 'step', body: 'json', batchable: true,
    summary: 'Cumulative run-level costs (last write wins)',
    async handler(svc, rc) {
      const msg = checkDef('Costs', obj(rc.body));
      if (msg) throw unprocessable(msg);
      const entry = await ingestRun(svc, rc);
      await svc.write(rc, entry, (store) => IngestService.putJson(store, 'live/costs.json', rc.body));
      return { body: { run_id: entry.run_id } };
    },
  },
  {
    method: 'POST', path: '/runs/:run_id/events', auth: 'dsn', category: 'event', body: 'json', accepted: true, batchable: true,
    summary: 'Append decision events ({events, step_index?}) to events/<NNNN-or-run>.jsonl',
    async handler(svc, rc) {
      const b = obj(rc.body);
      if (!Array.isArray(b.events)) throw unprocessable('events: must be an array');
      const runIndex = bodyStepIndex(b.step_index);
      b.events.forEach((e, i) => validate('decision-event', e, `events[${i}]`));
      const entry = await ingestRun(svc, rc);
      const groups = new Map<string, unknown[]>();
      for (const e of b.events as Array<{ step_index?: number | null }>) {
        const idx = runIndex ?? bodyStepIndex(e.step_index);
        const name = typeof idx === 'number' ? pad4(idx) : 'run';
        groups.set(name, [...(groups.get(name) ?? []), e]);
      }
      // each events file in its own lane: its appends keep their order, beside the run's other writes
      for (const [name, events] of groups) {
        const rel = `events/${name}.jsonl`;
        svc.background(svc.write(rc, entry, (store) => IngestService.appendLines(store, rel, events), { lane: rel }));
      }
      svc.count('events', b.events.length);
      return { status: 202, body: { accepted: b.events.length } };
    },
  },
  {
    method: 'POST', path: '/runs/:run_id/screenshots/:step_index/:kind', auth: 'dsn', category: 'screenshot', body: 'multipart', accepted: true, batchable: true,
    summary: 'Store a screenshot (multipart part image, image/png; the bytes must be a PNG)',
    async handler(svc, rc) {
      const idx = intParam(rc.params.step_index, 'step_index');
      const kindProblem = pathParamProblem('kind', rc.params.kind);
      if (kindProblem) throw new IngestError(400, kindProblem);
      const part = rc.parts?.find((p) => p.name === 'image');
      if (!part) throw unprocessable('multipart part image is required');
      if (part.contentType !== 'image/png') throw new IngestError(415, `image must be image/png, got ${part.contentType.slice(0, 60)}`);
      if (!isPng(part.data)) throw new IngestError(415, 'image bytes are not a PNG');
      const entry = await ingestRun(svc, rc);
      const rel = `screenshots/${pad4(idx)}_${rc.params.kind}.png`;
      const data = Buffer.from(part.data);
      svc.background(svc.write(rc, entry, async (store) => {
        const w = await store.openWriteBinary(rel);
        w.write(data);
        await w.close();
      }, { lane: rel }));
      svc.count('screenshots');
      return { status: 202, body: { stored: rel } };
    },
  },
  {
    method: 'POST', path: '/runs/:run_id/modelio/:relpath', auth: 'dsn', category: 'modelio', body: 'json', schema: 'modelio', accepted: true, batchable: true,
    summary: 'Store one model-io record (403 when the tenant has not enabled model-io capture)',
    async handler(svc, rc) {
      if (!rc.principal!.tenant.modelio_enabled) throw new IngestError(403, 'model-io capture is not enabled for this tenant');
      const rel = rc.params.relpath!;
      const relProblem = pathParamProblem('relpath', rel);
      if (relProblem) throw new IngestError(400, relProblem);
      validate('modelio', rc.body);
      const entry = await ingestRun(svc, rc);
      svc.background(svc.write(rc, entry, (store) => IngestService.putJson(store, `modelio/${rel}`, rc.body)));
      svc.count('modelio');
      return { status: 202, body: { stored: `modelio/${rel}` } };
    },
  },
  {
    method: 'POST', path: '/runs/:run_id/logs', auth: 'dsn', category: 'event', body: 'json', accepted: true, batchable: true,
    summary: 'Append {text, name?, step_index?} to logs/<name>.log or logs/step-<idx>.log (1 MB per file)',
    async handler(svc, rc) {
      const b = obj(rc.body);
      if (typeof b.text !== 'string') throw unprocessable('text: must be a string');
      let name = 'run';
      const idx = bodyStepIndex(b.step_index);
      if (idx !== undefined) {
        name = `step-${idx}`;
      } else if (b.name !== undefined) {
        if (typeof b.name !== 'string' || !/^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}$/.test(b.name)) throw unprocessable('name: 1-64 of letters, digits, _ . -');
        name = b.name;
      }
      const entry = await ingestRun(svc, rc);
      const text = b.text;
      svc.background(svc.write(rc, entry, (store) => IngestService.appendText(store, `logs/${name}.log`, text, LOG_FILE_LIMIT)));
      return { status: 202, body: { log: `logs/${name}.log` } };
    },
  },
  {
    method: 'POST', path: '/runs/:run_id/steps/:step_index/judge-decisions', auth: 'dsn', category: 'event', body: 'json', schema: 'judge-decision', accepted: true, batchable: true,
    summary: 'One judge decision (mirrored live; the step record carries the ordered list)',
    async handler(svc, rc) {
      const idx = intParam(rc.params.step_index, 'step_index');
      validate('judge-decision', rc.body);
      const entry = await ingestRun(svc, rc);
      svc.background(svc.write(rc, entry, (store) => IngestService.appendLines(store, 'live/judge-decisions.jsonl', [{ step_index: idx, ...(rc.body as object) }])));
      return { status: 202, body: { accepted: 1 } };
    },
  },
  {
    method: 'POST', path: '/runs/:run_id/reasoning', auth: 'dsn', category: 'event', body: 'json', schema: 'reasoning', accepted: true, batchable: true,
    summary: 'Append one reasoning record to events/reasoning.jsonl (our live path)',
    async handler(svc, rc) {
      validate('reasoning', rc.body);
      const entry = await ingestRun(svc, rc);
      svc.background(svc.write(rc, entry, (store) => IngestService.appendLines(store, 'events/reasoning.jsonl', [rc.body])));
      return { status: 202, body: { accepted: 1 } };
    },
  },
  {
    method: 'PUT', path: '/runs/:run_id/side-effects/:side_effect_id', auth: 'dsn', category: 'step', body: 'json', schema: 'side-effect', batchable: true,
    summary: 'The current state of one side-effect ledger entry (side_effects/<step:04d>-<id>.json; our live path)',
    async handler(svc, rc) {
      const problem = pathParamProblem('side_effect_id', rc.params.side_effect_id);
      if (problem) throw new IngestError(400, problem);
      validate('side-effect', rc.body);
      const se = rc.body as { side_effect_id: string; step_index: number };
      bodyStepIndex(se.step_index);
      if (se.side_effect_id !== rc.params.side_effect_id) throw unprocessable('side_effect_id does not match the path');
      const entry = await ingestRun(svc, rc);
      await svc.write(rc, entry, (store) => IngestService.putJson(store, `side_effects/${pad4(se.step_index)}-${se.side_effect_id}.json`, se));
      return { body: { stored: `side_effects/${pad4(se.step_index)}-${se.side_effect_id}.json` } };
    },
  },
  {
    method: 'POST', path: '/runs/:run_id/outcomes', auth: 'dsn', category: 'step', body: 'json', schema: 'outcome', batchable: true, ok: [201],
    summary: 'Append one outcome record to outcomes.json (our live path)',
    async handler(svc, rc) {
      validate('outcome', rc.body);
      const entry = await ingestRun(svc, rc);
      await svc.write(rc, entry, async (store) => {
        const list = (await store.exists('outcomes.json')) ? (JSON.parse(await store.readText('outcomes.json')) as unknown[]) : [];
        list.push(rc.body);
        await IngestService.putJson(store, 'outcomes.json', list);
      });
      return { status: 201, body: { accepted: 1 } };
    },
  },
  {
    method: 'POST', path: '/runs/:run_id/eval-candidates', auth: 'dsn', category: 'step', body: 'json', schema: 'eval-candidate', batchable: true, ok: [201, 200],
    summary: 'Mark a step for evaluation in eval_candidates.json; idempotent per step (our live path)',
    async handler(svc, rc) {
      validate('eval-candidate', rc.body);
      const c = rc.body as { step_index: number };
      const entry = await ingestRun(svc, rc);
      const added = await svc.write(rc, entry, async (store) => {
        const list = (await store.exists('eval_candidates.json')) ? (JSON.parse(await store.readText('eval_candidates.json')) as Array<{ step_index: number }>) : [];
        if (list.some((x) => x.step_index === c.step_index)) return false;
        list.push(c);
        list.sort((a, b) => a.step_index - b.step_index);
        await IngestService.putJson(store, 'eval_candidates.json', list);
        return true;
      });
      return { status: added ? 201 : 200, body: { added } };
    },
  },
  {
    method: 'PUT', path: '/runs/:run_id/findings', auth: 'dsn', category: 'step', body: 'json', schema: 'findings', batchable: true,
    summary: 'Store diagnostics/findings.json',
    async handler(svc, rc) {
      validate('findings', rc.body);
      const entry = await ingestRun(svc, rc);
      await svc.write(rc, entry, (store) => IngestService.putJson(store, 'diagnostics/findings.json', rc.body));
      return { body: { stored: 'diagnostics/findings.json' } };
    },
  },
  {
    method: 'PUT', path: '/runs/:run_id/preferences/:step_index', auth: 'dsn', category: 'step', body: 'json', batchable: true,
    summary: 'A step preference record (preferences/<NNNN>.json)',
    async handler(svc, rc) {
      const idx = intParam(rc.params.step_index, 'step_index');
      const entry = await ingestRun(svc, rc);
      const body = obj(rc.body);
      await svc.write(rc, entry, (store) => IngestService.putJson(store, `preferences/${pad4(idx)}.json`, body));
      return { body: { stored: `preferences/${pad4(idx)}.json` } };
    },
  },
  {
    method: 'POST', path: '/heartbeat', auth: 'dsn', body: 'json', schema: 'heartbeat', accepted: true, batchable: true,
    summary: 'SDK heartbeat (every ingest call also counts)',
    async handler(svc, rc) {
      validate('heartbeat', rc.body);
      const h = rc.body as { client_id: string; client_name: string; client_version?: string | null; capture_mode?: string; run_id?: string | null; last_event?: string | null };
      const p = rc.principal!;
      // the heartbeat names its client: a call without X-Trace-Client-Id was counted under the DSN id
      if (p.clientId === p.dsn.dsn_id && h.client_id !== p.clientId) await svc.forgetConnection(p.tenant.tenant_id, p.clientId);
      await svc.touchConnection(p.tenant.tenant_id, h.client_id, p.dsn.dsn_id, {
        client_name: h.client_name,
        client_version: h.client_version ?? null,
        capture_mode: h.capture_mode ?? null,
        run_id: h.run_id ?? null,
        last_event: h.last_event ?? null,
      });
      return { status: 202, body: { ok: true } };
    },
  },
  {
    method: 'GET', path: '/runs/:run_id/commands', auth: 'dsn',
    summary: 'Long-poll intervention commands after ?cursor= (at least once; dedupe on command_id); ?timeout= seconds, at most 60',
    async handler(svc, rc) {
      const entry = await ingestRun(svc, rc);
      const cursor = rc.query.cursor ? intParam(rc.query.cursor, 'cursor') : 0;
      const timeout = Math.min(60, Math.max(0, Number(rc.query.timeout ?? 25) || 0));
      const out = await svc.pollCommands(entry, cursor, timeout * 1000, rc.signal);
      return { body: out };
    },
  },

];
