// The OpenAI error body, {error: {message, type, code, param}}, for routes that
// declare `openai` (route.ts), with the spec's `detail` beside it (the same
// text as error.message): one body that the official SDKs and the spec's clients
// both read, whichever client calls the route. The OpenAI SDKs read `error.message` into the
// exception's message and pick the exception class by status, so the status is
// the catalogue's and type/code follow the OpenAI API where it has one:
// 401 invalid_api_key, 404 model_not_found, 429 rate_limit_exceeded, 400
// invalid_request_error with code null. Classes OpenAI has no code for carry
// our catalogue class as code (stable, documented), with type
// invalid_request_error below 500 and server_error from 500 up.
import type { ErrorClass } from '../errors.ts';

export interface OpenAiErrorBody {
  detail: string;
  error: { message: string; type: string; code: string | null; param: string | null };
}

const KNOWN: Partial<Record<ErrorClass, { type: string; code: string | null }>> = {
  bad_request: { type: 'invalid_request_error', code: null },
  payload_too_large: { type: 'invalid_request_error', code: null },
  unauthenticated: { type: 'invalid_request_error', code: 'invalid_api_key' },
  model_not_found: { type: 'invalid_request_error', code: 'model_not_found' },
  rate_limited: { type: 'requests', code: 'rate_limit_exceeded' },
  concurrency_limited: { type: 'requests', code: 'rate_limit_exceeded' },
};

export function openAiError(status: number, message: string, errorClass: ErrorClass | undefined, param: string | null = null): OpenAiErrorBody {
  const known = errorClass ? KNOWN[errorClass] : undefined;
  const type = known?.type ?? (status >= 500 ? 'server_error' : 'invalid_request_error');
  const code = known ? known.code : (errorClass ?? null);
  return { detail: message, error: { message, type, code, param } };
}
