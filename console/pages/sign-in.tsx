import { useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { type FormErrors, formErrorsOf, NO_ERRORS } from '../api/errors.ts';
import { expiredAt, signIn } from '../api/session.ts';
import { describedBy, Field, FormError } from '../ui.tsx';

/** Only a path of this console: a `next` naming another site would make sign-in an open redirect. */
export function returnPath(next: string | undefined): string {
  return next && /^\/console\/(?!\/)/.test(next) && !next.startsWith('/console/sign-in') ? next : '/console/';
}

export function SignInPage() {
  const { query, route } = useLocation();
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  const [busy, setBusy] = useState(false);
  const submit = async (event: SubmitEvent) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    setBusy(true);
    try {
      await signIn(String(form.get('email')), String(form.get('password')));
      route(returnPath(query.next), true);
    } catch (error) {
      setErrors(formErrorsOf(error, ['email', 'password']));
      setBusy(false);
    }
  };
  return (
    <main id="main" class="narrow">
      <h1>Sign in</h1>
      {expiredAt.value ? <p role="status">Your session ended; sign in to go back where you were.</p> : null}
      <form onSubmit={(event) => void submit(event)} noValidate>
        <FormError message={errors.form} />
        <Field id="email" label="Email" error={errors.fields.email}>
          <input id="email" name="email" type="email" autoComplete="username" required aria-describedby={describedBy('email', null, errors.fields.email)} />
        </Field>
        <Field id="password" label="Password" error={errors.fields.password}>
          <input id="password" name="password" type="password" autoComplete="current-password" required aria-describedby={describedBy('password', null, errors.fields.password)} />
        </Field>
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
    </main>
  );
}
