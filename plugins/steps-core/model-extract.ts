// Model extraction: the step's brain reads the screenshot and answers rows as
// JSON against the extract block; the answer is checked with a JSON Schema
// built from the block and, when invalid, asked again once with the
// validation error. hosted_only steps use the hosted model (hosted-api).
import { Ajv2020 } from 'ajv/dist/2020.js';
import { isBrainError, type Brain, type StepContext, type StepResult } from '../../gateway/plugins/contract.ts';
import { stepRules, type StepRules } from '../../shared/recipe-keys.ts';

const ajv = new Ajv2020({ allErrors: false, strict: false, allowUnionTypes: true });
const JSON_TYPE = { str: 'string', int: 'integer', float: 'number', bool: 'boolean' } as const;

type Extract = NonNullable<StepContext['step']['extract']>;

/** The JSON Schema a model's answer must satisfy: {rows: [...]} with the block's fields, types and required ones. */
export function rowsSchema(ex: Extract, layout?: StepRules['layout']): Record<string, unknown> {
  const fields = ex.fields ?? [];
  return {
    type: 'object',
    required: ['rows'],
    properties: {
      rows: {
        type: 'array',
        maxItems: layout === 'single' ? 1 : (ex.max_items ?? 1),
        items: {
          type: 'object',
          required: fields.filter((f) => f.required).map((f) => f.name),
          properties: Object.fromEntries(fields.map((f) => [f.name, f.required ? { type: JSON_TYPE[f.type] } : { type: [JSON_TYPE[f.type], 'null'] }])),
        },
      },
    },
  };
}

/** The prompt: the entity a row is (entity_name), how many rows (hints.layout, else max_items), the fields, the cards to skip. */
export function extractionPrompt(ex: Extract, intent: string, rules: Pick<StepRules, 'entityName' | 'layout' | 'cardExclusions'> = { cardExclusions: [] }): string {
  const fields = (ex.fields ?? []).map((f) => `- ${f.name} (${JSON_TYPE[f.type]}${f.required ? ', required' : ', null when absent'})${f.example ? ` e.g. ${JSON.stringify(f.example)}` : ''}`).join('\n');
  const entity = rules.entityName;
  const item = entity ? `one per ${entity} on the screen` : 'one per item on the screen';
  const many = rules.layout !== 'single' && ex.max_items ? `up to ${ex.max_items} rows, ${item}, in reading order` : `exactly one row${entity ? `, for the one ${entity} the page shows` : ''}`;
  const what = entity ? `The page shows ${rules.layout === 'single' ? `one ${entity}` : `${entity} entries`}; each row is one ${entity}.\n` : '';
  const texts = rules.cardExclusions.filter((x) => x.startsWith('text:')).map((x) => JSON.stringify(x.slice(5).trim()));
  const skip = texts.length > 0 ? `\nSkip any card whose text contains ${texts.join(' or ')}.` : '';
  return `${intent}\n${what}Read the screenshot and answer with JSON only, shaped {"rows": [ ... ]}, ${many}. Each row has these fields:\n${fields}\nUse "<UNKNOWN>" for a string you cannot read; never invent values.${skip}`;
}

/** The first JSON value of a text answer (bare, or in a ``` fence). */
export function parseJsonAnswer(text: string): unknown {
  const fenced = /```(?:json)?\s*([\s\S]*?)```/.exec(text);
  const body = (fenced ? fenced[1]! : text).trim();
  try {
    return JSON.parse(body);
  } catch {
    const start = body.search(/[[{]/);
    if (start < 0) return undefined;
    for (let end = body.length; end > start; end--) {
      try {
        return JSON.parse(body.slice(start, end));
      } catch {
        // shorter
      }
    }
    return undefined;
  }
}

/** The brain extraction and gates use: hosted-api for hosted_only steps, else the run's brain; undefined when it cannot read a screen in text. */
export function readerBrain(ctx: StepContext): Brain | undefined {
  const brain = ctx.step.hosted_only ? ctx.brainFor?.('hosted-api') : (ctx.brain ?? ctx.brainFor?.());
  return brain?.ask ? brain : undefined;
}

/** One question about the current screen; its tokens go into the run's budget. */
async function ask(ctx: StepContext, brain: Brain, prompt: string): Promise<string> {
  const shot = await ctx.plane.screenshot();
  const url = ctx.plane.dom ? await ctx.plane.dom.currentUrl().catch(() => undefined) : undefined;
  const a = await brain.ask!([{ screenshot: shot, ...(url ? { url } : {}) }], prompt, ctx.signal);
  ctx.addCost(a.usage.cost_usd, a.usage);
  return a.text;
}

function modelFailure(err: unknown): StepResult {
  if (!isBrainError(err)) throw err;
  if (err.code === 'malformed') return { success: false, failure_class: 'extractor_error', data: err.message };
  return { success: false, failure_class: 'extractor_error', data: err.message, halt: { halt_class: 'model_provider_unreachable' } };
}

/** Rows read by the model; undefined when no brain can read (the caller says why). */
export async function modelExtract(ctx: StepContext, ex: Extract): Promise<StepResult | undefined> {
  const brain = readerBrain(ctx);
  if (!brain) return undefined;
  if (!ex.fields?.length) return { success: false, failure_class: 'extractor_error', data: 'model extraction needs extract.fields', halt: { halt_class: 'no_schema_configured' } };
  const rules = stepRules({ ...ctx.step, extract: ex });
  const validate = ajv.compile(rowsSchema(ex, rules.layout));
  const prompt = extractionPrompt(ex, ctx.step.intent, rules);
  let problem = '';
  for (let attempt = 1; attempt <= 2; attempt++) {
    let text: string;
    try {
      text = await ask(ctx, brain, attempt === 1 ? prompt : `${prompt}\n\nYour previous answer was invalid: ${problem}. Answer again with JSON only.`);
    } catch (err) {
      return modelFailure(err);
    }
    const value = parseJsonAnswer(text);
    if (value === undefined) problem = 'it is not JSON';
    else if (!validate(value)) problem = ajv.errorsText(validate.errors, { dataVar: 'answer' });
    else {
      const rows = (value as { rows: Array<Record<string, unknown>> }).rows;
      if (rows.length === 0) return { success: false, failure_class: 'extractor_error', data: `${brain.id} found no rows` };
      return { success: true, rows, data: `${rows.length} row(s) read by ${brain.id}${attempt > 1 ? ' after one repair' : ''}` };
    }
    ctx.log(`model extraction answer ${attempt} invalid: ${problem.slice(0, 200)}`);
  }
  return { success: false, failure_class: 'extractor_error', data: `${brain.id} answered invalid rows twice: ${problem}`.slice(0, 500) };
}
