import { useEffect, useId, useRef, useState, type FormEvent, type ReactNode } from "react";
import { errorMessage } from "../api/client";

/**
 * Destructive-action guard: the user types the target's name to enable the
 * button. Inline (not a modal) so it works with keyboard and screen readers
 * without a focus trap; focus moves to the input when it opens; Escape cancels.
 */
export function ConfirmByName({
  name,
  title,
  children,
  confirmLabel,
  pending,
  error,
  onConfirm,
  onCancel,
}: {
  name: string;
  title: string;
  children?: ReactNode;
  confirmLabel: string;
  pending?: boolean;
  error?: unknown;
  onConfirm: (typed: string) => void;
  onCancel: () => void;
}) {
  const [typed, setTyped] = useState("");
  const inputRef = useRef<HTMLInputElement>(null);
  const id = useId();
  useEffect(() => inputRef.current?.focus(), []);
  const matches = typed === name;

  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    if (matches && !pending) onConfirm(typed);
  };

  return (
    <form
      className="confirm-panel"
      role="group"
      aria-labelledby={`${id}-title`}
      onSubmit={onSubmit}
      onKeyDown={(e) => {
        if (e.key === "Escape") onCancel();
      }}
      data-testid="confirm-panel"
    >
      <strong id={`${id}-title`}>{title}</strong>
      {children && <div className="confirm-body">{children}</div>}
      <div className="field">
        <label htmlFor={`${id}-input`}>
          Type <code>{name}</code> to confirm
        </label>
        <input
          ref={inputRef}
          id={`${id}-input`}
          value={typed}
          onChange={(e) => setTyped(e.target.value)}
          autoComplete="off"
          spellCheck={false}
          data-testid="confirm-input"
        />
      </div>
      {error != null && (
        <p className="form-error" role="alert" data-testid="confirm-error">
          {errorMessage(error)}
        </p>
      )}
      <div className="button-row">
        <button
          type="submit"
          className="button button-danger"
          disabled={!matches || pending}
          data-testid="confirm-submit"
        >
          {pending ? "Working…" : confirmLabel}
        </button>
        <button type="button" className="button" onClick={onCancel} data-testid="confirm-cancel">
          Cancel
        </button>
      </div>
    </form>
  );
}
