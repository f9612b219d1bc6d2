// The caller's tools on POST /v1/chat/completions. Without `tools` the action
// comes as the service's own `act` function ({action, ...params}). With them,
// the same arguments object goes to the caller's function whose `parameters`
// JSON Schema accepts it (checked with ajv): tool_choice naming a function
// narrows the choice to it, `auto` and `required` leave all, `none` is refused
// (every answer of this service is an action). What cannot carry an action is
// 400 invalid_request_error before the brain is asked: a tool that is not a
// function, a schema ajv cannot compile, or one that accepts none of the
// sample actions below; an action the chosen schemas refuse after the turn is
// 400 too. Callers' schemas are untrusted: size-capped, compiled by a fresh ajv
// per request (nothing cached), no remote $ref, and no `pattern` or
// `patternProperties` (a backtracking regex would run on our event loop).
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { badRequest } from '../errors.ts';
import type { Action } from '../plugins/contract.ts';

export const SUPPORTED_TOOLS =
  'tools: supported is a list of {type: "function", function: {name, parameters}} where at least one function\'s parameters JSON Schema accepts the action object the `act` tool carries: {action: "CLICK"|"DOUBLE_CLICK"|"RIGHT_CLICK"|"DRAG"|"TYPE"|"KEY_PRESS"|"SCROLL"|"NAVIGATE"|"WAIT"|"DONE", ...its params (x, y, to_x, to_y, text, keys, direction, amount, url, seconds, success)}; tool_choice may be auto, required or {type: "function", function: {name}}';

const MAX_SCHEMA_CHARS = 16_384;
const NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** Actions a schema must accept at least one of to be able to carry the service's answers. */
const SAMPLES: Record<string, unknown>[] = [
  { action: 'CLICK', x: 10, y: 10 },
  { action: 'TYPE', text: 'x' },
  { action: 'SCROLL', direction: 'down', amount: 1 },
  { action: 'KEY_PRESS', keys: 'Enter' },
  { action: 'WAIT', seconds: 1 },
  { action: 'DONE', success: true },
];

export interface CallerFunction {
  name: string;
  accepts: ValidateFunction;
}

/** The arguments object of a function call carrying this action (the `act` tool's shape). */
export function actionArguments(action: Action): Record<string, unknown> {
  const { type, ...params } = action;
  return { action: type, ...params };
}

function hasRegex(v: unknown): boolean {
  if (Array.isArray(v)) return v.some(hasRegex);
  if (v === null || typeof v !== 'object') return false;
  return Object.entries(v).some(([k, x]) => ((k === 'pattern' && typeof x === 'string') || k === 'patternProperties' ? true : hasRegex(x)));
}

const refuse = (why: string, param = 'tools') => badRequest(`${why}. ${SUPPORTED_TOOLS}`, param);

/** The caller's functions an action may go to, in order; undefined when the request has no tools (the `act` tool). */
export function callerFunctions(body: { tools?: unknown; tool_choice?: unknown }): CallerFunction[] | undefined {
  const tools = body.tools;
  if (tools === undefined || (Array.isArray(tools) && tools.length === 0)) return undefined;
  if (!Array.isArray(tools)) throw refuse('tools: must be a list');
  const ajv = new Ajv2020({ strict: false, allErrors: false, validateSchema: true });
  const fns: CallerFunction[] = tools.map((t: unknown, i) => {
    const tool = t as { type?: unknown; function?: { name?: unknown; parameters?: unknown } };
    if (tool.type !== 'function' || typeof tool.function !== 'object' || tool.function === null) throw refuse(`tools[${i}]: only function tools are supported`);
    const name = tool.function.name;
    if (typeof name !== 'string' || !NAME.test(name)) throw refuse(`tools[${i}].function.name: must be 1 to 64 letters, digits, _ or -`);
    // OpenAI reads a function without parameters as one that takes none
    const schema = tool.function.parameters ?? { type: 'object', properties: {}, additionalProperties: false };
    if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) throw refuse(`tools[${i}].function.parameters: must be a JSON Schema object`);
    if (JSON.stringify(schema).length > MAX_SCHEMA_CHARS) throw refuse(`tools[${i}].function.parameters: longer than ${MAX_SCHEMA_CHARS} characters`);
    if (hasRegex(schema)) throw refuse(`tools[${i}].function.parameters: pattern and patternProperties are not supported`);
    let accepts: ValidateFunction;
    try {
      accepts = ajv.compile(schema);
    } catch (err) {
      throw refuse(`tools[${i}].function.parameters: not a schema this service can check (${String((err as Error).message).slice(0, 200)})`);
    }
    return { name, accepts };
  });
  const chosen = chooseFrom(fns, body.tool_choice);
  if (!chosen.some((f) => SAMPLES.some((a) => f.accepts(a)))) {
    throw refuse(`tools: no offered function (${chosen.map((f) => f.name).join(', ')}) accepts the service's action objects`);
  }
  return chosen;
}

function chooseFrom(fns: CallerFunction[], choice: unknown): CallerFunction[] {
  if (choice === undefined || choice === 'auto' || choice === 'required') return fns;
  if (choice === 'none') throw refuse("tool_choice: 'none' is not supported: every answer of this service is an action, a function call", 'tool_choice');
  const named = (choice as { type?: unknown; function?: { name?: unknown } } | null)?.function?.name;
  if ((choice as { type?: unknown }).type !== 'function' || typeof named !== 'string') throw refuse('tool_choice: must be auto, required or {type: "function", function: {name}}', 'tool_choice');
  const fn = fns.find((f) => f.name === named);
  if (!fn) throw refuse(`tool_choice: names '${named.slice(0, 64)}', which is not among tools`, 'tool_choice');
  return [fn];
}

/** The first function whose schema accepts the action's arguments; 400 when none does. */
export function functionFor(fns: CallerFunction[], args: Record<string, unknown>): string {
  const fn = fns.find((f) => f.accepts(args));
  if (fn) return fn.name;
  const why = fns[0]!.accepts.errors?.[0];
  throw refuse(`tools: the brain answered ${JSON.stringify(args).slice(0, 200)}, which no offered function accepts (${fns[0]!.name}: ${why ? `${why.instancePath || '(arguments)'} ${why.message}` : 'refused'})`);
}
