import { signal } from '@preact/signals';
import type { ComponentChildren, FunctionComponent } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { api } from './api/client.ts';
import { unwrap } from './api/errors.ts';
import { session, signOut } from './api/session.ts';
import { AppDetailPage } from './pages/app-detail.tsx';
import { AppsPage } from './pages/apps.tsx';
import { CreditsPage } from './pages/credits.tsx';
import { KeyDetailPage, KeysPage } from './pages/keys.tsx';
import { OverviewPage } from './pages/overview.tsx';
import { PeoplePage } from './pages/people.tsx';
import { RequestDetailPage, RequestsPage } from './pages/requests.tsx';
import { SettingsPage } from './pages/settings.tsx';
import { ToolGatewayPage } from './pages/tool-gateway.tsx';
import { UsagePage } from './pages/usage.tsx';
import { WebhookDetailPage, WebhooksPage } from './pages/webhooks.tsx';

export interface PageEntry {
  readonly title: string;
  readonly href: string;
  /** Client routes the page answers. */
  readonly routes: readonly string[];
  /** `METHOD /path` of the operations it reads: the page is left out when the document lacks any. */
  readonly needs: readonly string[];
  readonly component: FunctionComponent;
}

export const PAGES: readonly PageEntry[] = [
  { title: 'Overview', href: '/console/', routes: ['/console/', '/console/overview'], needs: ['GET /overview'], component: OverviewPage },
  { title: 'Keys', href: '/console/keys', routes: ['/console/keys'], needs: ['GET /keys', 'POST /keys'], component: KeysPage },
  { title: 'Key', href: '', routes: ['/console/keys/:id'], needs: ['GET /keys/{id}'], component: KeyDetailPage },
  { title: 'Usage', href: '/console/usage', routes: ['/console/usage'], needs: ['GET /usage/series', 'GET /usage', 'GET /usage/comparison'], component: UsagePage },
  { title: 'Request logs', href: '/console/requests', routes: ['/console/requests'], needs: ['GET /requests'], component: RequestsPage },
  { title: 'Request', href: '', routes: ['/console/requests/:id'], needs: ['GET /requests/{id}'], component: RequestDetailPage },
  {
    title: 'Tool gateway',
    href: '/console/tools',
    routes: ['/console/tools'],
    needs: ['GET /mcp/upstreams', 'GET /mcp/tools', 'GET /mcp/approvals/waiting', 'GET /mcp/groups', 'GET /mcp/grants'],
    component: ToolGatewayPage,
  },
  { title: 'Apps', href: '/console/apps', routes: ['/console/apps'], needs: ['GET /apps', 'GET /githost/repos', 'GET /githost/build-check'], component: AppsPage },
  {
    title: 'App',
    href: '',
    routes: ['/console/apps/:id'],
    needs: ['GET /apps/{id}', 'GET /services/{id}/deployments', 'GET /deployments/{id}/logs', 'GET /services/{id}/logs', 'GET /services/{id}/build'],
    component: AppDetailPage,
  },
  {
    title: 'Credits',
    href: '/console/credits',
    routes: ['/console/credits'],
    needs: ['GET /credits', 'GET /credits/statement', 'GET /credits/summary', 'GET /budget'],
    component: CreditsPage,
  },
  // Each section of the settings asks for its own operations (settings.tsx); the page needs the model list.
  { title: 'Settings', href: '/console/settings', routes: ['/console/settings', '/console/settings/:section'], needs: ['GET /models'], component: SettingsPage },
  { title: 'People', href: '/console/people', routes: ['/console/people'], needs: ['GET /employees'], component: PeoplePage },
  { title: 'Webhooks', href: '/console/webhooks', routes: ['/console/webhooks'], needs: ['GET /webhooks', 'GET /events/types'], component: WebhooksPage },
  {
    title: 'Webhook',
    href: '',
    routes: ['/console/webhooks/:id'],
    needs: ['GET /webhooks/{id}', 'GET /webhooks/{id}/deliveries', 'GET /events/types'],
    component: WebhookDetailPage,
  },
];

/** `METHOD /path` of every operation of this deployment's OpenAPI document, read at start. */
export const served = signal<ReadonlySet<string>>(new Set());

interface Organization {
  id: string;
  name: string;
  role: string;
}

const organizations = signal<readonly Organization[] | null>(null);

function OrganizationSwitcher() {
  const current = session.value!;
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (organizations.value !== null) return;
    api
      .GET('/organizations', { params: { query: { limit: 200 } } })
      .then((result) => {
        organizations.value = unwrap(result).data;
      })
      .catch(() => undefined);
  }, []);
  const list = organizations.value ?? [{ id: current.organizationId, name: current.organizationName, role: current.role }];
  const choose = async (organizationId: string) => {
    try {
      unwrap(await api.POST('/organizations/default', { body: { organizationId } }));
      // The session now acts in the other organisation: start afresh, with its role and scopes.
      location.assign('/console/');
    } catch (failure) {
      setError(failure instanceof Error ? failure.message : String(failure));
    }
  };
  return (
    <div class="org-switcher">
      <label for="organization">Organisation</label>
      <select id="organization" value={current.organizationId} disabled={list.length < 2} onChange={(event) => void choose(event.currentTarget.value)}>
        {list.map((organization) => (
          <option key={organization.id} value={organization.id}>
            {organization.name} ({organization.role})
          </option>
        ))}
      </select>
      {error ? (
        <p class="error" role="alert">
          {error}
        </p>
      ) : null}
    </div>
  );
}

export function Layout({ children }: { children: ComponentChildren }) {
  const { path, route } = useLocation();
  const current = session.value!;
  const pages = PAGES.filter((page) => page.href !== '' && page.needs.every((operation) => served.value.has(operation)));
  // On a narrow screen the pages, the organisation and sign-out fold behind one button; choosing a
  // page (the one shown included) or any other navigation folds them again.
  const [menuOpen, setMenuOpen] = useState(false);
  useEffect(() => setMenuOpen(false), [path]);
  const leave = async (everywhere: boolean) => {
    await signOut(everywhere);
    route('/console/sign-in', true);
  };
  return (
    <div class="shell">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Console</span>
        <button type="button" class="menu-button" aria-expanded={menuOpen} aria-controls="site-menu" onClick={() => setMenuOpen(!menuOpen)}>
          Menu
        </button>
        <div id="site-menu" class={menuOpen ? 'menu open' : 'menu'}>
          <nav aria-label="Pages">
            <ul>
              {pages.map((page) => {
                const here = page.href === '/console/' ? path === '/console/' || path === '/console/overview' : path.startsWith(page.href);
                return (
                  <li key={page.href}>
                    <a href={page.href} aria-current={here ? 'page' : undefined} onClick={() => setMenuOpen(false)}>
                      {page.title}
                    </a>
                  </li>
                );
              })}
            </ul>
          </nav>
          <OrganizationSwitcher />
          <div class="who">
            <span class="muted">
              {current.email} · {current.role}
            </span>
            <button type="button" onClick={() => void leave(false)}>
              Sign out
            </button>
            <button type="button" onClick={() => void leave(true)}>
              Sign out everywhere
            </button>
          </div>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        {children}
      </main>
    </div>
  );
}
