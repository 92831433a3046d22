import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
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

/**
 * A table that scrolls sideways on a narrow screen: a named region that takes focus, so the
 * keyboard can scroll it even when every control in it is disabled.
 */
export function TableRegion({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a region that scrolls must take focus to be scrolled by keyboard (axe scrollable-region-focusable).
    <section class="table-wrap" aria-label={label} tabIndex={0}>
      {children}
    </section>
  );
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

/**
 * A secret the API returns once (a key's plaintext, a webhook's signing secret): held by this
 * dialog's props alone (never in storage), and gone from the page when the dialog closes.
 */
export function ShownOnceDialog(props: { title: string; label: string; secret: string; onClose: () => void }) {
  const [copied, setCopied] = useState(false);
  const closeButton = useRef<HTMLButtonElement>(null);
  useEffect(() => closeButton.current?.focus(), []);
  const copy = async () => {
    await navigator.clipboard.writeText(props.secret);
    setCopied(true);
  };
  return (
    <div class="backdrop">
      <div class="dialog" role="dialog" aria-modal="true" aria-labelledby="shown-once-title" onKeyDown={(event) => event.key === 'Escape' && props.onClose()}>
        <h2 id="shown-once-title">{props.title}</h2>
        <p>Copy it now: it is shown this once and cannot be shown again.</p>
        <label for="shown-once">{props.label}</label>
        <input id="shown-once" class="mono" readOnly value={props.secret} onFocus={(event) => event.currentTarget.select()} />
        <div class="actions">
          <button type="button" onClick={() => void copy()}>
            {copied ? 'Copied' : 'Copy'}
          </button>
          <button type="button" ref={closeButton} onClick={props.onClose}>
            Done
          </button>
        </div>
      </div>
    </div>
  );
}
