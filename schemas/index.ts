// The JSON Schemas are the one source of truth: this module compiles them once
// at start for validation; the TypeScript types (types.gen.ts) and the OpenAPI
// document are derived from the same files.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';

export const SCHEMA_BASE = 'https://schemas.runplane.dev/';
export const SCHEMA_FILES = ['plan.schema.json', 'predict.schema.json', 'recipe.schema.json', 'tenant-keys.schema.json', 'brains.schema.json', 'cua.schema.json', 'chat.schema.json', 'diagnose.schema.json', 'proxy-providers.schema.json', 'plane-registration.schema.json', 'sessions.schema.json', 'credentials.schema.json', 'takeover.schema.json', 'live.schema.json', 'mcp.schema.json', 'profiles.schema.json', 'responses.schema.json'] as const;
export type SchemaFile = (typeof SCHEMA_FILES)[number];

export type JsonSchema = Record<string, unknown>;

export function readSchema(file: SchemaFile): JsonSchema {
  return JSON.parse(readFileSync(path.join(import.meta.dirname, file), 'utf8')) as JsonSchema;
}

let ajv: Ajv2020 | undefined;

function instance(): Ajv2020 {
  if (ajv) return ajv;
  // useDefaults fills TenantConfig defaults; strict off because `examples` and
  // descriptions ride along for the OpenAPI document.
  ajv = new Ajv2020({ allErrors: false, useDefaults: true, strict: false, allowUnionTypes: true });
  for (const f of SCHEMA_FILES) ajv.addSchema(readSchema(f));
  return ajv;
}

function compiled<T>(ref: string): ValidateFunction<T> {
  const v = instance().getSchema<T>(SCHEMA_BASE + ref);
  if (!v) throw new Error(`unknown schema ${ref}`);
  return v;
}

/** True when `ref` names a schema file of SCHEMA_FILES, or a `#/$defs/Name` that file has. */
function known(ref: string): boolean {
  const [file, pointer] = ref.split('#') as [string, string | undefined];
  if (!(SCHEMA_FILES as readonly string[]).includes(file)) return false;
  if (!pointer) return true;
  let at: unknown = readSchemaCached(file as SchemaFile);
  for (const seg of pointer.split('/').slice(1)) at = at && typeof at === 'object' ? (at as Record<string, unknown>)[seg.replace(/~1/g, '/').replace(/~0/g, '~')] : undefined;
  return at !== undefined;
}

const read = new Map<SchemaFile, JsonSchema>();
function readSchemaCached(file: SchemaFile): JsonSchema {
  let s = read.get(file);
  if (!s) read.set(file, (s = readSchema(file)));
  return s;
}

// validators made but not compiled yet: warmValidators() compiles them while the process is idle
const uncompiled = new Set<() => void>();

/**
 * A validator for a schema file or a `file#/$defs/Name` fragment. It compiles
 * on its first call (compiling every schema at load took ~0.6 s of a gateway's
 * start) or at warmValidators(), whichever comes first; an unknown ref throws here.
 */
export function validator<T>(ref: string): ValidateFunction<T> {
  if (!known(ref)) throw new Error(`unknown schema ${ref}`);
  let v: ValidateFunction<T> | undefined;
  const compile = () => {
    uncompiled.delete(compile);
    return (v ??= compiled<T>(ref));
  };
  uncompiled.add(compile);
  const validate = ((data: unknown) => {
    const fn = v ?? compile();
    const ok = fn(data);
    validate.errors = fn.errors;
    return ok;
  }) as ValidateFunction<T>;
  return validate;
}

/** Compiles the validators made so far, one per turn of the event loop, so requests meanwhile are served between them. */
export async function warmValidators(): Promise<void> {
  for (const compile of [...uncompiled]) {
    await new Promise((r) => setImmediate(r));
    compile();
  }
}

/** Turns an ajv instance path (/plan/3/steps/0) into a field path (plan[3].steps[0]). */
export function fieldPath(root: string, instancePath: string): string {
  let out = root;
  for (const raw of instancePath.split('/').slice(1)) {
    const seg = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (/^\d+$/.test(seg)) out += `[${seg}]`;
    else out += out ? `.${seg}` : seg;
  }
  return out || '(body)';
}

/** A one-line, user-safe description of the first validation error. */
export function describeError(root: string, errors: ErrorObject[] | null | undefined): string {
  const e = errors?.[0];
  if (!e) return `${root || '(body)'}: invalid`;
  let where = fieldPath(root, e.instancePath);
  let what = e.message ?? 'is invalid';
  switch (e.keyword) {
    case 'required':
      where = fieldPath(root, `${e.instancePath}/${(e.params as { missingProperty: string }).missingProperty}`);
      what = 'is required';
      break;
    case 'enum':
      what = `must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
      break;
    case 'additionalProperties':
      where = fieldPath(root, `${e.instancePath}/${(e.params as { additionalProperty: string }).additionalProperty}`);
      what = 'is not allowed';
      break;
    default:
      break;
  }
  return `${where}: ${what}`;
}
