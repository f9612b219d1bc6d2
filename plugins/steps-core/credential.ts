// Steps that name a credential of the tenant's vault (params.credential: {name,
// field}) instead of carrying text: the handler only ever holds the placeholder;
// the host's plane types the value after checking the page's origin.
import { isSecretRefused, secretPlaceholder, type Action, type SecretRef, type StepContext, type StepResult } from '../../gateway/plugins/contract.ts';

const FIELDS: ReadonlyArray<SecretRef['field']> = ['username', 'password', 'totp'];
const NAME = /^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$/;

/** params.credential as a reference, or what is wrong with it. */
export function credentialRef(v: unknown): SecretRef | { bad: string } {
  const o = v as { name?: unknown; field?: unknown } | null;
  if (typeof o !== 'object' || o === null || Array.isArray(o) || Object.keys(o).some((k) => k !== 'name' && k !== 'field')) return { bad: 'params.credential must be {name, field}' };
  if (typeof o.name !== 'string' || !NAME.test(o.name)) return { bad: 'params.credential.name must be a credential name (1-64 letters, digits, _ or -)' };
  if (!FIELDS.includes(o.field as SecretRef['field'])) return { bad: `params.credential.field must be one of ${FIELDS.join(', ')}` };
  return { name: o.name, field: o.field as SecretRef['field'] };
}

/** The TYPE action of a credential: its placeholder as the text, the reference beside it. */
export function secretType(ref: SecretRef): Extract<Action, { type: 'TYPE' }> {
  return { type: 'TYPE', text: secretPlaceholder(ref), secret: ref };
}

/** A retry types into the same page: a refusal is final, and names why (the origin) without any value. */
export function refused(ref: SecretRef, why: string): StepResult {
  return {
    success: false,
    failure_class: 'wrong_target',
    data: `credential refused: ${why}; nothing was typed`,
    retryable: false,
    last_action: { type: 'TYPE', params: { text: secretPlaceholder(ref), secret: ref }, reasoning: 'credential refused' },
  };
}

/** null when `ref` may be typed into the active page, else the step's refusal; before anything is clicked. */
export async function credentialGate(ctx: StepContext, ref: SecretRef): Promise<StepResult | null> {
  if (!ctx.secretCheck) return refused(ref, 'this gateway has no credential vault');
  const why = await ctx.secretCheck(ref);
  return why === null ? null : refused(ref, why);
}

/** Types the credential; the plane's own check at the moment of typing can still refuse (the page moved on). */
export async function typeSecret(ctx: StepContext, ref: SecretRef): Promise<StepResult | null> {
  try {
    await ctx.plane.act(secretType(ref));
    return null;
  } catch (err) {
    if (isSecretRefused(err)) return refused(ref, err.message);
    throw err;
  }
}
