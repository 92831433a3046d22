import { useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { type FormErrors, formErrorsOf, NO_ERRORS } from '../api/errors.ts';
import { setPassword, signIn } from '../api/session.ts';
import { describedBy, Field, FormError } from '../ui.tsx';

/**
 * The first start's link (and an operator's password reset) lands here with a one-time token in
 * the fragment, which browsers send to no server and no referrer: choose a password, and the
 * console signs in with it.
 */
export function SetPasswordPage() {
  const { route } = useLocation();
  const [token] = useState(() => new URLSearchParams(location.hash.slice(1)).get('token') ?? '');
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  const [busy, setBusy] = useState(false);
  const submit = async (event: SubmitEvent) => {
    event.preventDefault();
    const password = String(new FormData(event.currentTarget as HTMLFormElement).get('password'));
    setBusy(true);
    try {
      const person = await setPassword(token, password);
      // The token is spent: drop it from the address bar and the history entry.
      history.replaceState(null, '', '/console/set-password');
      await signIn(person.email, password);
      route('/console/', true);
    } catch (error) {
      setErrors(formErrorsOf(error, ['password']));
      setBusy(false);
    }
  };
  if (!token) {
    return (
      <main id="main" class="narrow">
        <h1>Set your password</h1>
        <p role="alert">
          This link carries no token. Ask for a new one, or <a href="/console/sign-in">sign in</a>.
        </p>
      </main>
    );
  }
  const hint = 'At least 12 characters.';
  return (
    <main id="main" class="narrow">
      <h1>Set your password</h1>
      <form onSubmit={(event) => void submit(event)} noValidate>
        <FormError message={errors.form} />
        <Field id="new-password" label="New password" hint={hint} error={errors.fields.password}>
          <input
            id="new-password"
            name="password"
            type="password"
            autoComplete="new-password"
            minLength={12}
            required
            aria-describedby={describedBy('new-password', hint, errors.fields.password)}
          />
        </Field>
        <button type="submit" disabled={busy}>
          Set password and sign in
        </button>
      </form>
    </main>
  );
}
