// Small form helpers shared by the pages: a field's hint or error line, and
// the message for errors that belong to no visible field.

import { ApiError, errorMessage, GENERIC_FIELD_MESSAGE } from "../api/client";

/** Errors not shown next to a field: detail, non-field and unknown-field messages. */
export function formLevelMessage(error: unknown, inlineFields: Set<string>): string | null {
  if (!error) return null;
  if (!(error instanceof ApiError)) return errorMessage(error);
  const messages: string[] = [];
  if (error.detail !== GENERIC_FIELD_MESSAGE) messages.push(error.detail);
  for (const [field, msgs] of Object.entries(error.fieldErrors)) {
    if (!inlineFields.has(field)) messages.push(`${field}: ${msgs.join(" ")}`);
  }
  return messages.length > 0 ? messages.join(" ") : null;
}

export function FieldMessage({
  id,
  errors,
  hint,
  testId,
}: {
  id: string;
  errors?: string[];
  hint?: string;
  testId?: string;
}) {
  if (errors && errors.length > 0) {
    return (
      <p className="field-error" id={`${id}-error`} role="alert" data-testid={testId}>
        {errors.join(" ")}
      </p>
    );
  }
  if (!hint) return null;
  return (
    <p className="field-hint" id={`${id}-hint`}>
      {hint}
    </p>
  );
}

/** Field errors of a failed mutation (empty when none). */
export function fieldErrorsOf(error: unknown): Record<string, string[]> {
  return error instanceof ApiError ? error.fieldErrors : {};
}
