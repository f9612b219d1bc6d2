// The trace bundle schemas (one file per record, each with its own
// schema_version): compiled once for validation, embedded byte-for-byte into
// every bundle's schema/ folder, and the source of trace/types.gen.ts.
// The SDK and the ingest service both import this module, so they serialize
// bundle files the same way (bundleJson) and a read returns the bytes the SDK wrote.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { SCHEMA_BASE, describeError } from '../index.ts';

export const TRACE_SCHEMA_FILES = [
  'common.schema.json',
  'verdict.schema.json',
  'judge-decision.schema.json',
  'subgoal-completion.schema.json',
  'task-spec.schema.json',
  'step.schema.json',
  'session.schema.json',
  'trace.schema.json',
  'manifest.schema.json',
  'decision-event.schema.json',
  'modelio.schema.json',
  'side-effect.schema.json',
  'reasoning.schema.json',
  'outcome.schema.json',
  'eval-candidate.schema.json',
  'heartbeat.schema.json',
  'findings.schema.json',
] as const;
export type TraceSchemaFile = (typeof TRACE_SCHEMA_FILES)[number];
/** Record kinds with a schema of their own (common.schema.json only holds shared definitions). */
export type TraceRecordKind = Exclude<TraceSchemaFile, 'common.schema.json'> extends `${infer K}.schema.json` ? K : never;

export const TRACE_SCHEMA_DIR = import.meta.dirname;

const bytes = new Map<string, Buffer>();

/** The exact bytes of a schema file (what a bundle embeds under schema/). */
export function traceSchemaBytes(file: TraceSchemaFile): Buffer {
  let b = bytes.get(file);
  if (!b) {
    b = readFileSync(path.join(TRACE_SCHEMA_DIR, file));
    bytes.set(file, b);
  }
  return b;
}

export function readTraceSchema(file: TraceSchemaFile): Record<string, unknown> {
  return JSON.parse(traceSchemaBytes(file).toString('utf8')) as Record<string, unknown>;
}

let versions: Readonly<Record<string, string>> | undefined;

/**
 * schema_version of every schema document, by record kind (file name without .schema.json).
 * Read once: every bundle's manifest asks several times, and parsing every document each
 * time was 6-7 ms of the gateway's CPU a run (bench/runs/profile.ts under --cpu-prof).
 */
export function traceSchemaVersions(): Readonly<Record<string, string>> {
  if (!versions) {
    const out: Record<string, string> = {};
    for (const f of TRACE_SCHEMA_FILES) out[f.replace('.schema.json', '')] = String(readTraceSchema(f).schema_version);
    versions = Object.freeze(out);
  }
  return versions;
}

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
let ajv: Ajv2020 | undefined;

function instance(): Ajv2020 {
  if (ajv) return ajv;
  // strict off: schema_version and descriptions are annotations ajv does not know
  ajv = new Ajv2020({ allErrors: false, strict: false, allowUnionTypes: true });
  addFormats(ajv);
  for (const f of TRACE_SCHEMA_FILES) ajv.addSchema(readTraceSchema(f));
  return ajv;
}

// ajv's getSchema resolves its key on every call: 40 us a record when steps come seconds apart (a cold cache), most of recordStep
const validators = new Map<string, ValidateFunction>();

function validatorOf(id: string, what: string): ValidateFunction {
  let v = validators.get(id);
  if (!v) {
    v = instance().getSchema(`${SCHEMA_BASE}trace/${id}`);
    if (!v) throw new Error(`unknown trace ${what}`);
    validators.set(id, v);
  }
  return v;
}

export function traceValidator<T = unknown>(kind: TraceRecordKind): ValidateFunction<T> {
  return validatorOf(`${kind}.schema.json`, `schema ${kind}`) as ValidateFunction<T>;
}

/** null when the value is a valid record of that kind, else a one-line reason naming the field. */
export function checkRecord(kind: TraceRecordKind, value: unknown, root = ''): string | null {
  const v = traceValidator(kind);
  return v(value) ? null : describeError(root, v.errors);
}

/** The one serialization of a JSON bundle file: 2-space indent and a trailing newline. */
export function bundleJson(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

/** The serialization of one JSON line (events/*.jsonl). */
export function jsonLine(value: unknown): string {
  return `${JSON.stringify(value)}\n`;
}

/** null when the value is valid against common.schema.json#/$defs/<name>, else a one-line reason. */
export function checkDef(name: string, value: unknown, root = ''): string | null {
  const v = validatorOf(`common.schema.json#/$defs/${name}`, `definition ${name}`);
  return v(value) ? null : describeError(root, v.errors);
}
