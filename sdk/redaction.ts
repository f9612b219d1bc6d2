// Redaction policy `default-pii-v1`: keys dropped, keys masked, string
// redactors, droppers, and a separate hook for reasoning text.
export const MASK = '***REDACTED:mask***';

/** (value, key) -> the redacted string */
export type Redactor = (value: string, key: string | undefined) => string;
/** true drops the key from its object (or the item from its array) */
export type Dropper = (key: string | undefined, value: unknown) => boolean;

export interface RedactionPolicyOptions {
  id?: string;
  dropKeys?: Iterable<string>;
  maskKeys?: Iterable<string>;
  redactors?: Redactor[];
  droppers?: Dropper[];
  reasoningRedactors?: Redactor[];
}

const DEFAULT_DROP_KEYS = ['authorization', 'proxy-authorization', 'cookie', 'set-cookie', 'password', 'passwd', 'api_key', 'apikey', 'x-api-key', 'secret', 'client_secret', 'private_key'];
const DEFAULT_MASK_KEYS = ['email', 'phone', 'phone_number', 'token', 'access_token', 'refresh_token', 'id_token', 'session_id', 'ssn', 'card_number', 'credit_card', 'cvv', 'iban', 'address'];

// The local part starts where a run of its characters starts (the lookbehind): without it a
// long run with no address in it (base64, a token, a data URL in a model request) was scanned
// again from each of its characters, quadratic (50 KB: 6.8 s; 1 MB: about 45 min). The
// leftmost match is the same either way: any later start in a run can start at its first character.
const EMAIL = /(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g;
const BEARER = /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}/g;
const CARD = /\b(?:\d[ -]?){13,19}\b/g;

function luhn(digits: string): boolean {
  let sum = 0;
  let dbl = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (dbl) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    dbl = !dbl;
  }
  return sum % 10 === 0;
}

export const DEFAULT_REDACTORS: Redactor[] = [
  (v) => v.replace(EMAIL, '***REDACTED:email***'),
  (v) => v.replace(BEARER, (_m, scheme: string) => `${scheme} ***REDACTED:credential***`),
  (v) =>
    v.replace(CARD, (m) => {
      const digits = m.replace(/\D/g, '');
      return digits.length >= 13 && luhn(digits) ? '***REDACTED:card***' : m;
    }),
];

export class RedactionPolicy {
  readonly id: string;
  readonly dropKeys: Set<string>;
  readonly maskKeys: Set<string>;
  readonly redactors: Redactor[];
  readonly droppers: Dropper[];
  readonly reasoningRedactors: Redactor[];

  constructor(opts: RedactionPolicyOptions = {}) {
    this.id = opts.id ?? 'default-pii-v1';
    this.dropKeys = new Set([...(opts.dropKeys ?? DEFAULT_DROP_KEYS)].map((k) => k.toLowerCase()));
    this.maskKeys = new Set([...(opts.maskKeys ?? DEFAULT_MASK_KEYS)].map((k) => k.toLowerCase()));
    this.redactors = [...(opts.redactors ?? DEFAULT_REDACTORS)];
    this.droppers = [...(opts.droppers ?? [])];
    this.reasoningRedactors = [...(opts.reasoningRedactors ?? DEFAULT_REDACTORS)];
  }

  /** The policy `default-pii-v1`. */
  static default(): RedactionPolicy {
    return new RedactionPolicy();
  }

  addRedactor(fn: Redactor): this {
    this.redactors.push(fn);
    return this;
  }

  addDropper(fn: Dropper): this {
    this.droppers.push(fn);
    return this;
  }

  addReasoningRedactor(fn: Redactor): this {
    this.reasoningRedactors.push(fn);
    return this;
  }

  /** Reasoning text through the reasoning redactors. */
  applyReasoning(text: string): string {
    return this.reasoningRedactors.reduce((t, r) => r(t, 'text'), text);
  }

  /**
   * A redacted deep copy of `value` (found under `key`). Dropped keys vanish,
   * masked keys become `***REDACTED:mask***`, strings go through the redactors.
   * A `token` key is left alone when its object carries a numeric `logprob`
   * (a logprob entry, not a credential).
   */
  apply<T>(value: T, key?: string): T {
    return this.walk(value, key, undefined) as T;
  }

  private walk(value: unknown, key: string | undefined, parent: Record<string, unknown> | undefined): unknown {
    const lower = key?.toLowerCase();
    if (lower !== undefined && this.maskKeys.has(lower) && value !== null && value !== undefined) {
      const logprobToken = lower === 'token' && parent !== undefined && typeof parent.logprob === 'number';
      if (!logprobToken) return MASK;
    }
    if (typeof value === 'string') return this.redactors.reduce((v, r) => r(v, key), value);
    if (Array.isArray(value)) {
      const out: unknown[] = [];
      for (const item of value) if (!this.droppers.some((d) => d(key, item))) out.push(this.walk(item, key, undefined));
      return out;
    }
    if (value !== null && typeof value === 'object') {
      const obj = value as Record<string, unknown>;
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(obj)) {
        if (this.dropKeys.has(k.toLowerCase())) continue;
        if (this.droppers.some((d) => d(k, v))) continue;
        out[k] = this.walk(v, k, obj);
      }
      return out;
    }
    return value;
  }
}
