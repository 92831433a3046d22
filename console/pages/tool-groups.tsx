import { useEffect, useState } from 'preact/hooks';
import { api } from '../api/client.ts';
import { type FormErrors, formErrorsOf, NO_ERRORS, unwrap } from '../api/errors.ts';
import type { components } from '../api/schema.d.ts';
import { session } from '../api/session.ts';
import { may } from '../permissions.ts';
import { describedBy, Field, FormError, Loading, Time } from '../ui.tsx';

type Tool = components['schemas']['McpTool'];
type Group = components['schemas']['McpGroup'];
type Grant = components['schemas']['McpGrant'];
type Key = components['schemas']['Key'];
type Project = components['schemas']['Project'];

/** What the groups and grants sections read: each list is the API's, reloaded after every change. */
interface Listed {
  groups: readonly Group[];
  grants: readonly Grant[];
  keys: readonly Key[];
  projects: readonly Project[];
}

const PAGE = { params: { query: { limit: 200 } } } as const;

async function loadListed(): Promise<Listed> {
  const [groups, grants, keys, projects] = await Promise.all([api.GET('/mcp/groups', PAGE), api.GET('/mcp/grants', PAGE), api.GET('/keys', PAGE), api.GET('/projects', PAGE)]);
  return { groups: unwrap(groups).data, grants: unwrap(grants).data, keys: unwrap(keys).data, projects: unwrap(projects).data };
}

const nameOf = (items: readonly { id: string; name: string }[], id: string) => items.find((item) => item.id === id)?.name ?? id;

/** A group's tools as their gateway names, the ones the page knows; an id it does not list shows as is. */
function toolNames(group: Group, tools: readonly Tool[]): string {
  if (group.toolIds.length === 0) return 'no tools yet';
  return group.toolIds.map((id) => tools.find((tool) => tool.id === id)?.gatewayName ?? id).join(', ');
}

function CreateGroupForm({ projects, onCreated }: { projects: readonly Project[]; onCreated: () => Promise<void> }) {
  const write = may(session.value!, 'mcp.write');
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  const submit = async (event: SubmitEvent) => {
    event.preventDefault();
    const element = event.currentTarget as HTMLFormElement;
    const form = new FormData(element);
    const description = String(form.get('description') ?? '');
    try {
      const body = { name: String(form.get('name')), projectId: String(form.get('projectId')), ...(description ? { description } : {}) };
      unwrap(await api.POST('/mcp/groups', { body }));
      element.reset();
      setErrors(NO_ERRORS);
      await onCreated();
    } catch (error) {
      setErrors(formErrorsOf(error, ['name', 'projectId', 'description']));
    }
  };
  return (
    <form class="card" aria-labelledby="create-group-title" noValidate onSubmit={(event) => void submit(event)}>
      <h3 id="create-group-title">Create a group</h3>
      {write.allowed ? null : <p class="hint">{write.reason}</p>}
      <fieldset disabled={!write.allowed}>
        <FormError message={errors.form} />
        <Field id="group-name" label="Group name" error={errors.fields.name}>
          <input id="group-name" name="name" required maxLength={100} aria-describedby={describedBy('group-name', null, errors.fields.name)} />
        </Field>
        <Field id="group-project" label="Project" error={errors.fields.projectId} hint="Its tools are this project's; it is granted to this project's keys.">
          <select id="group-project" name="projectId" aria-describedby={describedBy('group-project', 'hint', errors.fields.projectId)}>
            {projects.map((project) => (
              <option key={project.id} value={project.id}>
                {project.name}
              </option>
            ))}
          </select>
        </Field>
        <Field id="group-description" label="Description (optional)" error={errors.fields.description}>
          <input id="group-description" name="description" aria-describedby={describedBy('group-description', null, errors.fields.description)} />
        </Field>
        <button type="submit">Create group</button>
      </fieldset>
    </form>
  );
}

/** A group's tools, chosen among its project's: the API's PUT replaces the set whole. */
function GroupToolsForm({ group, tools, onDone }: { group: Group; tools: readonly Tool[]; onDone: (saved: boolean) => Promise<void> }) {
  const [error, setError] = useState<string | null>(null);
  const candidates = tools.filter((tool) => tool.projectId === group.projectId);
  const submit = async (event: SubmitEvent) => {
    event.preventDefault();
    const toolIds = new FormData(event.currentTarget as HTMLFormElement).getAll('toolIds').map(String);
    try {
      unwrap(await api.PUT('/mcp/groups/{id}/tools', { params: { path: { id: group.id } }, body: { toolIds } }));
      await onDone(true);
    } catch (failure) {
      setError(failure instanceof Error ? failure.message : String(failure));
    }
  };
  return (
    <form class="card" aria-labelledby="group-tools-title" onSubmit={(event) => void submit(event)}>
      <h3 id="group-tools-title">Tools of {group.name}</h3>
      <FormError message={error} />
      {candidates.length === 0 ? <p>Its project has no tools yet: register an upstream first.</p> : null}
      <fieldset>
        <legend>Tools of its project (a switched-off tool stays in the group and is seen by nobody)</legend>
        <div class="checks">
          {candidates.map((tool) => (
            <label key={tool.id} class="check">
              <input type="checkbox" name="toolIds" value={tool.id} defaultChecked={group.toolIds.includes(tool.id)} /> <span class="mono">{tool.gatewayName}</span>
            </label>
          ))}
        </div>
      </fieldset>
      <div class="actions">
        <button type="submit">Save tools</button>
        <button type="button" onClick={() => void onDone(false)}>
          Cancel
        </button>
      </div>
    </form>
  );
}

function GrantForm({ listed, onGranted }: { listed: Listed; onGranted: () => Promise<void> }) {
  const write = may(session.value!, 'mcp.write');
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  const [groupId, setGroupId] = useState(listed.groups[0]?.id ?? '');
  const group = listed.groups.find((each) => each.id === groupId) ?? listed.groups[0];
  // A group is granted only to keys of its own project, and a revoked key would get nothing.
  const keys = listed.keys.filter((key) => key.projectId === group?.projectId && key.status !== 'revoked');
  const submit = async (event: SubmitEvent) => {
    event.preventDefault();
    const element = event.currentTarget as HTMLFormElement;
    const form = new FormData(element);
    const expires = String(form.get('expiresAt') ?? '');
    const note = String(form.get('note') ?? '');
    try {
      const body = {
        groupId: String(form.get('groupId')),
        keyId: String(form.get('keyId') ?? ''),
        ...(expires ? { expiresAt: new Date(expires).toISOString() } : {}),
        ...(note ? { note } : {}),
      };
      unwrap(await api.POST('/mcp/grants', { body }));
      setErrors(NO_ERRORS);
      await onGranted();
    } catch (error) {
      setErrors(formErrorsOf(error, ['groupId', 'keyId', 'expiresAt', 'note']));
    }
  };
  const reason = write.allowed ? (listed.groups.length === 0 ? 'Create a group first' : null) : write.reason;
  return (
    <form class="card" aria-labelledby="grant-title" noValidate onSubmit={(event) => void submit(event)}>
      <h3 id="grant-title">Grant a group to a key</h3>
      {reason ? <p class="hint">{reason}</p> : null}
      <fieldset disabled={reason !== null}>
        <FormError message={errors.form} />
        <Field id="grant-group" label="Group" error={errors.fields.groupId}>
          <select
            id="grant-group"
            name="groupId"
            value={group?.id ?? ''}
            onChange={(event) => setGroupId(event.currentTarget.value)}
            aria-describedby={describedBy('grant-group', null, errors.fields.groupId)}
          >
            {listed.groups.map((each) => (
              <option key={each.id} value={each.id}>
                {each.name} ({nameOf(listed.projects, each.projectId)})
              </option>
            ))}
          </select>
        </Field>
        <Field id="grant-key" label="Key" error={errors.fields.keyId} hint={keys.length === 0 ? 'The group’s project has no key that could hold it' : 'Keys of the group’s project'}>
          <select id="grant-key" name="keyId" aria-describedby={describedBy('grant-key', 'hint', errors.fields.keyId)}>
            {keys.map((key) => (
              <option key={key.id} value={key.id}>
                {key.name}
              </option>
            ))}
          </select>
        </Field>
        <Field id="grant-expires" label="Expires (your time zone, optional)" error={errors.fields.expiresAt}>
          <input id="grant-expires" name="expiresAt" type="datetime-local" aria-describedby={describedBy('grant-expires', null, errors.fields.expiresAt)} />
        </Field>
        <Field id="grant-note" label="Note (optional)" error={errors.fields.note}>
          <input id="grant-note" name="note" aria-describedby={describedBy('grant-note', null, errors.fields.note)} />
        </Field>
        <button type="submit">Grant</button>
      </fieldset>
    </form>
  );
}

/**
 * Tool groups (bundles of one project's tools) and their grants to keys: what a governed project's
 * keys see at /mcp/gateway. Changing them needs mcp:write; a member changes only the projects where
 * they are a developer or admin, which the API decides and the page shows.
 */
export function GroupsAndGrants({ tools }: { tools: readonly Tool[] }) {
  const write = may(session.value!, 'mcp.write');
  const [listed, setListed] = useState<Listed | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [editing, setEditing] = useState<string | null>(null);
  const reload = async () => setListed(await loadListed());
  useEffect(() => {
    reload().catch((error: unknown) => setFailure(error instanceof Error ? error.message : String(error)));
  }, []);
  /** After a change: the lists as the API has them now, and the notice, which follows them. */
  const changed = async (what: string) => {
    try {
      await reload();
      setFailure(null);
      setNotice(what);
    } catch (error) {
      setFailure(error instanceof Error ? error.message : String(error));
    }
  };
  /** A change made here (a deletion, a withdrawal): its refusal shows above the lists. */
  const act = async (what: string, run: () => Promise<unknown>) => {
    try {
      await run();
    } catch (error) {
      setFailure(error instanceof Error ? error.message : String(error));
      return;
    }
    await changed(what);
  };
  if (listed === null) return failure ? <p role="alert">{failure}</p> : <Loading what="tool groups" />;
  const editedGroup = listed.groups.find((group) => group.id === editing);
  return (
    <>
      <h2>Tool groups</h2>
      {notice ? (
        <p role="status" data-testid="groups-notice">
          {notice}
        </p>
      ) : null}
      <FormError message={failure} />
      {listed.groups.length === 0 ? (
        <p>No tool groups yet.</p>
      ) : (
        <div class="table-wrap">
          <table data-testid="group-table">
            <caption class="visually-hidden">Tool groups, newest first, with their tools</caption>
            <thead>
              <tr>
                <th scope="col">Group</th>
                <th scope="col">Project</th>
                <th scope="col">Tools</th>
                <th scope="col">Change</th>
              </tr>
            </thead>
            <tbody>
              {listed.groups.map((group) => (
                <tr key={group.id} data-group-id={group.id}>
                  <td>
                    {group.name}
                    {group.description ? <p class="hint">{group.description}</p> : null}
                  </td>
                  <td>{nameOf(listed.projects, group.projectId)}</td>
                  <td class="mono">{toolNames(group, tools)}</td>
                  <td>
                    <div class="actions">
                      <button type="button" disabled={!write.allowed} aria-label={`Choose the tools of ${group.name}`} onClick={() => setEditing(group.id)}>
                        Tools…
                      </button>
                      <button
                        type="button"
                        class="danger"
                        disabled={!write.allowed}
                        aria-label={`Delete group ${group.name}`}
                        onClick={() =>
                          confirm(`Delete the group “${group.name}”? Every grant of it is withdrawn.`) &&
                          void act(`Group ${group.name} deleted`, async () => unwrap(await api.DELETE('/mcp/groups/{id}', { params: { path: { id: group.id } } })))
                        }
                      >
                        Delete
                      </button>
                    </div>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {editedGroup ? (
        <GroupToolsForm
          key={editedGroup.id}
          group={editedGroup}
          tools={tools}
          onDone={async (saved) => {
            if (saved) await changed(`Tools of ${editedGroup.name} saved`);
            setEditing(null);
          }}
        />
      ) : null}
      <CreateGroupForm projects={listed.projects} onCreated={() => changed('Group created')} />

      <h2>Grants</h2>
      {listed.grants.length === 0 ? (
        <p>No group is granted to a key.</p>
      ) : (
        <div class="table-wrap">
          <table data-testid="grant-table">
            <caption class="visually-hidden">Grants of tool groups to keys, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Group</th>
                <th scope="col">Key</th>
                <th scope="col">Expires</th>
                <th scope="col">Note</th>
                <th scope="col">Withdraw</th>
              </tr>
            </thead>
            <tbody>
              {listed.grants.map((grant) => {
                const group = nameOf(listed.groups, grant.groupId);
                const key = nameOf(listed.keys, grant.keyId);
                return (
                  <tr key={grant.id} data-grant-id={grant.id}>
                    <td>{group}</td>
                    <td>{key}</td>
                    <td>
                      <Time iso={grant.expiresAt} />
                      {grant.expired ? <span class="status status-expired"> expired</span> : null}
                    </td>
                    <td>{grant.note ?? '—'}</td>
                    <td>
                      <button
                        type="button"
                        class="danger"
                        disabled={!write.allowed}
                        aria-label={`Withdraw ${group} from ${key}`}
                        onClick={() => void act(`Withdrew ${group} from ${key}`, async () => unwrap(await api.DELETE('/mcp/grants/{id}', { params: { path: { id: grant.id } } })))}
                      >
                        Withdraw
                      </button>
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      <GrantForm listed={listed} onGranted={() => changed('Group granted')} />
    </>
  );
}
