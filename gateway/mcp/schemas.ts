// The tools' input schemas, taken from the project's JSON Schemas (schemas/*.schema.json)
// and bundled into one self-contained document each: an MCP client cannot fetch
// https://schemas.runplane.dev/..., so every $ref it would follow is copied into the
// tool schema's own $defs and pointed at there. No schema is written a second time here.
import { readSchema, SCHEMA_FILES, validator, type JsonSchema, type SchemaFile } from '../../schemas/index.ts';

const DRAFT = 'https://json-schema.org/draft/2020-12/schema';

type Json = unknown;

function resolvePointer(doc: JsonSchema, pointer: string): JsonSchema {
  let at: Json = doc;
  for (const seg of pointer.split('/').slice(1)) {
    at = at && typeof at === 'object' ? (at as Record<string, Json>)[seg.replace(/~1/g, '/').replace(/~0/g, '~')] : undefined;
  }
  if (!at || typeof at !== 'object') throw new Error(`unresolvable schema pointer ${pointer}`);
  return at as JsonSchema;
}

/** A $defs name for `file#pointer`: the file's stem and the definition's name (plan.Step). */
function defName(file: string, pointer: string): string {
  const stem = file.replace(/\.schema\.json$/, '');
  const tail = pointer.split('/').filter(Boolean);
  return tail.length === 0 ? stem : `${stem}.${tail[tail.length - 1]}`;
}

/**
 * `ref` (a file, or `file#/$defs/Name`) with every $ref it reaches, directly or not, inlined as
 * `#/$defs/<file>.<Name>`; nested $id and $schema keywords are dropped (an $id inside would
 * move the base the copied refs resolve against).
 */
export function bundle(ref: string): JsonSchema {
  const defs: Record<string, JsonSchema> = {};
  const files = new Map<string, JsonSchema>();
  const load = (file: string): JsonSchema => {
    if (!(SCHEMA_FILES as readonly string[]).includes(file)) throw new Error(`unknown schema file ${file}`);
    let d = files.get(file);
    if (!d) files.set(file, (d = readSchema(file as SchemaFile)));
    return d;
  };
  const rewrite = (node: Json, file: string): Json => {
    if (Array.isArray(node)) return node.map((n) => rewrite(n, file));
    if (!node || typeof node !== 'object') return node;
    const out: Record<string, Json> = {};
    for (const [k, v] of Object.entries(node as Record<string, Json>)) {
      if (k === '$id' || k === '$schema') continue;
      if (k === '$ref' && typeof v === 'string') {
        const [target = '', pointer = ''] = v.split('#');
        const targetFile = target === '' ? file : target;
        const name = defName(targetFile, pointer);
        if (!(name in defs)) {
          defs[name] = {}; // claimed before the walk: a recursive definition (plan.Step) refers to itself
          defs[name] = rewrite(pointer ? resolvePointer(load(targetFile), pointer) : load(targetFile), targetFile) as JsonSchema;
        }
        out.$ref = `#/$defs/${name}`;
        continue;
      }
      // a file's own $defs are reached through the refs that use them, not copied wholesale
      if (k === '$defs') continue;
      out[k] = rewrite(v, file);
    }
    return out;
  };
  const [file = '', pointer = ''] = ref.split('#');
  const root = rewrite(pointer ? resolvePointer(load(file), pointer) : load(file), file) as JsonSchema;
  return { $schema: DRAFT, ...root, ...(Object.keys(defs).length > 0 ? { $defs: defs } : {}) };
}

/** predict.schema.json as a run submission: its run fields only (reads have tools of their own), `plan` or `micro` required. */
function runSubmitSchema(): JsonSchema {
  const predict = bundle('predict.schema.json');
  const properties = { ...(predict.properties as Record<string, Json>) };
  for (const k of ['action', 'run_id', 'tail', 'detached']) delete properties[k];
  const { if: _if, then: _then, ...rest } = predict;
  void _if;
  void _then;
  return {
    ...rest,
    description: 'A run as POST /v1/predict starts one (action run, detached): an inline plan (or a micro plan reference) with the submission fields that override its runtime',
    properties,
    additionalProperties: false,
    oneOf: [{ required: ['plan'] }, { required: ['micro'] }],
  };
}

/** Each tool's input schema by tool name, bundled once. */
export function toolSchemas(): Record<string, JsonSchema> {
  const mcp = (name: string) => bundle(`mcp.schema.json#/$defs/${name}`);
  return {
    session_open: bundle('sessions.schema.json'),
    session_close: mcp('McpSessionRef'),
    navigate: mcp('McpNavigate'),
    click: mcp('McpClick'),
    type: mcp('McpType'),
    press_key: mcp('McpPressKey'),
    scroll: mcp('McpScroll'),
    snapshot: mcp('McpSessionRef'),
    screenshot: mcp('McpSessionRef'),
    extract: mcp('McpExtract'),
    run_submit: runSubmitSchema(),
    run_status: mcp('McpRunRef'),
    run_result: mcp('McpRunRef'),
    run_cancel: mcp('McpRunRef'),
    run_events: mcp('McpRunEvents'),
  };
}

/** The validator the gateway itself runs on a tool's arguments (the source schema, through the shared ajv). */
export const SOURCE_VALIDATORS = {
  session_open: validator('sessions.schema.json'),
  session_close: validator('mcp.schema.json#/$defs/McpSessionRef'),
  navigate: validator('mcp.schema.json#/$defs/McpNavigate'),
  click: validator('mcp.schema.json#/$defs/McpClick'),
  type: validator('mcp.schema.json#/$defs/McpType'),
  press_key: validator('mcp.schema.json#/$defs/McpPressKey'),
  scroll: validator('mcp.schema.json#/$defs/McpScroll'),
  snapshot: validator('mcp.schema.json#/$defs/McpSessionRef'),
  screenshot: validator('mcp.schema.json#/$defs/McpSessionRef'),
  extract: validator('mcp.schema.json#/$defs/McpExtract'),
  run_status: validator('mcp.schema.json#/$defs/McpRunRef'),
  run_result: validator('mcp.schema.json#/$defs/McpRunRef'),
  run_cancel: validator('mcp.schema.json#/$defs/McpRunRef'),
  run_events: validator('mcp.schema.json#/$defs/McpRunEvents'),
} as const;
