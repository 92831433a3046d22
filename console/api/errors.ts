/**
 * An answer of the management API that is not a success, as the console shows it: the envelope's
 * message at the field its `param` names, or above the form when it names none.
 */
export class ApiFailure extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly param: string | null,
  ) {
    super(message);
  }
}

interface Envelope {
  error?: { message?: unknown; code?: unknown; param?: unknown };
}

export function failureOf(status: number, body: unknown): ApiFailure {
  const error = (body as Envelope | null)?.error;
  const message = typeof error?.message === 'string' ? error.message : `The service answered ${status}`;
  const code = typeof error?.code === 'string' ? error.code : 'unknown';
  const param = typeof error?.param === 'string' ? error.param : null;
  return new ApiFailure(message, status, code, param);
}

/** An openapi-fetch result's data, or its error envelope thrown as an ApiFailure. */
export function unwrap<T>(result: { data?: T; error?: unknown; response: Response }): T {
  if (result.response.ok && result.data !== undefined) return result.data;
  throw failureOf(result.response.status, result.error);
}

/** Where an error belongs in a form: the field `param` names when the form has it, else the form. */
export interface FormErrors {
  readonly form: string | null;
  readonly fields: Readonly<Record<string, string>>;
}

export const NO_ERRORS: FormErrors = { form: null, fields: {} };

export function formErrorsOf(error: unknown, fieldNames: readonly string[]): FormErrors {
  if (!(error instanceof ApiFailure)) return { form: error instanceof Error ? error.message : String(error), fields: {} };
  // `spendCap.usd` belongs to the spendCap field group when the form names only the group.
  const param = error.param;
  const field = param === null ? undefined : fieldNames.find((name) => name === param || param.startsWith(`${name}.`));
  return field === undefined ? { form: error.message, fields: {} } : { form: null, fields: { [field]: error.message } };
}
