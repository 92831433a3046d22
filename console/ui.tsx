import type { ComponentChildren } from 'preact';
import { localTime } from './format.ts';

/** A time in the viewer's zone, the UTC instant on hover. */
export function Time({ iso }: { iso: string | null }) {
  const { text, title } = localTime(iso);
  return iso === null ? (
    <span>{text}</span>
  ) : (
    <time dateTime={iso} title={title}>
      {text}
    </time>
  );
}

/** A labelled control with its error (from the API's `param`) read out with it. */
export function Field(props: { id: string; label: string; error?: string | undefined; hint?: string | null; children: ComponentChildren }) {
  return (
    <div class="field">
      <label for={props.id}>{props.label}</label>
      {props.children}
      {props.hint ? (
        <p class="hint" id={`${props.id}-hint`}>
          {props.hint}
        </p>
      ) : null}
      {props.error ? (
        <p class="error" id={`${props.id}-error`} role="alert">
          {props.error}
        </p>
      ) : null}
    </div>
  );
}

/** The ids a control's aria-describedby names: its hint and its error, when shown. */
export function describedBy(id: string, hint: string | null | undefined, error: string | undefined): string | undefined {
  const ids = [hint ? `${id}-hint` : null, error ? `${id}-error` : null].filter((value) => value !== null);
  return ids.length ? ids.join(' ') : undefined;
}

export function FormError({ message }: { message: string | null }) {
  return message ? (
    <p class="error form-error" role="alert">
      {message}
    </p>
  ) : null;
}

export function Loading({ what }: { what: string }) {
  return (
    <p class="muted" role="status">
      Loading {what}…
    </p>
  );
}
