import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { type FunctionComponent, type JSX, render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { LocationProvider, Route, Router, useLocation } from 'preact-iso';
import { servedPaths } from './api/client.ts';
import { expiredAt, resumeSession, session } from './api/session.ts';
import { Layout, PAGES, served } from './layout.tsx';
import { SignInPage } from './pages/sign-in.tsx';
import { SetPasswordPage } from './pages/set-password.tsx';
import { Loading } from './ui.tsx';

const SIGN_IN = '/console/sign-in';

/** Sends a signed-out visitor to sign-in, remembering the page to come back to. */
function ToSignIn() {
  const { route } = useLocation();
  useEffect(() => {
    const back = expiredAt.value ?? location.pathname + location.search;
    route(`${SIGN_IN}?next=${encodeURIComponent(back)}`, true);
  }, [route]);
  return <Loading what="sign-in" />;
}

function NotFound() {
  return (
    <section>
      <h1>Not found</h1>
      <p>
        No console page here. <a href="/console/">Overview</a>
      </p>
    </section>
  );
}

/** A page behind sign-in, inside the layout; stable per page so navigating never remounts what it need not. */
function guarded(Page: FunctionComponent): FunctionComponent {
  return function Guarded() {
    return session.value === null ? <ToSignIn /> : <Layout>{<Page />}</Layout>;
  };
}

function App() {
  const [routes, setRoutes] = useState<JSX.Element[] | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  useEffect(() => {
    Promise.all([servedPaths(), resumeSession()]).then(
      ([paths]) => {
        served.value = paths;
        const pages = PAGES.filter((page) => page.needs.every((operation) => paths.has(operation)));
        setRoutes(pages.flatMap((page) => page.routes.map((path) => <Route key={path} path={path} component={guarded(page.component)} />)));
      },
      (error: unknown) => setFailure(error instanceof Error ? error.message : String(error)),
    );
  }, []);
  if (failure) return <p role="alert">The console could not start: {failure}</p>;
  if (routes === null) return <Loading what="the console" />;
  return (
    <LocationProvider>
      <Router>
        {[
          <Route key="sign-in" path={SIGN_IN} component={SignInPage} />,
          <Route key="set-password" path="/console/set-password" component={SetPasswordPage} />,
          ...routes,
          <Route key="404" default component={notFound} />,
        ]}
      </Router>
    </LocationProvider>
  );
}

const notFound = guarded(NotFound);

render(<App />, document.getElementById('app')!);
