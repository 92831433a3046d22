import { useState } from 'preact/hooks';
import { api } from '../api/client.ts';
import { type FormErrors, formErrorsOf, NO_ERRORS, unwrap } from '../api/errors.ts';
import type { components } from '../api/schema.d.ts';
import { session } from '../api/session.ts';
import { type CursorList, useCursorList } from '../cursor-list.ts';
import { may, type Verdict } from '../permissions.ts';
import { describedBy, Field, FormError, Loading, TableRegion, Time } from '../ui.tsx';

type Employee = components['schemas']['Employee'];
type Invitation = components['schemas']['Invitation'];
type Role = Employee['role'];

const ROLES: readonly Role[] = ['member', 'admin', 'owner'];
const PAGE = 50;

/** Why a control is off: the caller may not manage people, or the row is an owner's and they are not one. */
function reasonFor(write: Verdict, owners: Verdict, ownersRow: boolean): string | null {
  if (!write.allowed) return write.reason;
  if (ownersRow && !owners.allowed) return owners.reason;
  return null;
}

function MoreButton({ list, what }: { list: CursorList<{ id: string }>; what: string }) {
  return list.hasMore ? (
    <button type="button" onClick={() => void list.more()}>
      More {what}
    </button>
  ) : null;
}

function MemberRow({ member, onChanged, onRemoved }: { member: Employee; onChanged: (member: Employee) => void; onRemoved: (member: Employee) => void }) {
  const caller = session.value!;
  const write = may(caller, 'people.write');
  const owners = may(caller, 'people.owners');
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  const [busy, setBusy] = useState(false);
  const reason = reasonFor(write, owners, member.role === 'owner');
  const select = `role-${member.id}`;
  const rowReason = write.allowed && reason ? `${select}-reason` : undefined;

  const run = async (work: () => Promise<void>) => {
    setBusy(true);
    try {
      await work();
      setErrors(NO_ERRORS);
    } catch (error) {
      setErrors(formErrorsOf(error, ['role']));
    } finally {
      setBusy(false);
    }
  };
  const changeRole = (role: Role) =>
    run(async () => {
      onChanged(unwrap(await api.PATCH('/employees/{id}', { params: { path: { id: member.id } }, body: { role } })));
    });
  const remove = () =>
    run(async () => {
      unwrap(await api.DELETE('/employees/{id}', { params: { path: { id: member.id } } }));
      onRemoved(member);
    });

  const describe = [write.allowed ? null : 'people-reason', rowReason ?? null, describedBy(select, null, errors.fields.role) ?? null].filter((id) => id !== null).join(' ') || undefined;
  return (
    <tr>
      <td class="wrap">
        {member.name}
        <br />
        <span class="muted">{member.email}</span>
      </td>
      <td>
        <form
          class="inline"
          onSubmit={(event) => {
            event.preventDefault();
            void changeRole(new FormData(event.currentTarget).get('role') as Role);
          }}
        >
          <label class="visually-hidden" for={select}>
            Role of {member.email}
          </label>
          {/* Keyed by the role, so a change the API answered starts it afresh. The option's `selected` sets the
              first choice: Preact gives a select's defaultValue to the element as an attribute, which selects nothing. */}
          <select id={select} name="role" key={member.role} disabled={reason !== null || busy} aria-describedby={describe}>
            {ROLES.map((role) => (
              // Only an owner makes someone an owner: the option says so by being off.
              <option key={role} value={role} selected={role === member.role} disabled={role === 'owner' && member.role !== 'owner' && !owners.allowed}>
                {role}
              </option>
            ))}
          </select>
          <button type="submit" disabled={reason !== null || busy} aria-label={`Save the role of ${member.email}`} aria-describedby={describe}>
            Save role
          </button>
          <button
            type="button"
            class="danger"
            disabled={reason !== null || busy}
            aria-describedby={describe}
            onClick={() => confirm(`Remove ${member.email} from the organisation? Their access to it ends at once.`) && void remove()}
          >
            Remove<span class="visually-hidden"> {member.email}</span>
          </button>
        </form>
        {rowReason ? (
          <p class="hint" id={rowReason}>
            {reason}
          </p>
        ) : null}
        {errors.fields.role ? (
          <p class="error" id={`${select}-error`} role="alert">
            {errors.fields.role}
          </p>
        ) : null}
        <FormError message={errors.form} />
      </td>
      <td>
        <span class="status">{member.status}</span>
        <br />
        <span class="muted">
          joined <Time iso={member.joinedAt} />
        </span>
      </td>
    </tr>
  );
}

function Members({ list, onNotice }: { list: CursorList<Employee>; onNotice: (text: string) => void }) {
  const write = may(session.value!, 'people.write');
  if (list.failure && list.items === null) return <p role="alert">{list.failure}</p>;
  if (list.items === null) return <Loading what="people" />;
  return (
    <>
      {write.allowed ? null : (
        <p class="hint" id="people-reason">
          {write.reason}
        </p>
      )}
      <TableRegion label="The organisation’s people, newest member first">
        <table>
          <caption class="visually-hidden">The organisation’s people, newest member first</caption>
          <thead>
            <tr>
              <th scope="col">Person</th>
              <th scope="col">Role</th>
              <th scope="col">Status</th>
            </tr>
          </thead>
          <tbody>
            {list.items.map((member) => (
              <MemberRow
                key={member.id}
                member={member}
                onChanged={(changed) => {
                  list.replace(changed);
                  onNotice(`${changed.email} is now ${changed.role}`);
                }}
                onRemoved={(removed) => {
                  onNotice(`${removed.email} was removed`);
                  void list.reload();
                }}
              />
            ))}
          </tbody>
        </table>
      </TableRegion>
      <MoreButton list={list} what="people" />
    </>
  );
}

function InviteForm({ onInvited }: { onInvited: (invitation: Invitation) => void }) {
  const write = may(session.value!, 'people.write');
  const owners = may(session.value!, 'people.owners');
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  const [busy, setBusy] = useState(false);
  const submit = async (event: SubmitEvent) => {
    event.preventDefault();
    const element = event.currentTarget as HTMLFormElement;
    const form = new FormData(element);
    setBusy(true);
    try {
      const invitation = unwrap(await api.POST('/employees', { body: { email: String(form.get('email')), role: form.get('role') as Role, projects: [] } }));
      element.reset();
      setErrors(NO_ERRORS);
      onInvited(invitation);
    } catch (error) {
      setErrors(formErrorsOf(error, ['email', 'role']));
    } finally {
      setBusy(false);
    }
  };
  const roleHint = owners.allowed ? null : owners.reason;
  return (
    <form class="card" onSubmit={(event) => void submit(event)} noValidate aria-labelledby="invite-title">
      <h3 id="invite-title">Invite a person</h3>
      {write.allowed ? null : <p class="hint">{write.reason}</p>}
      <fieldset disabled={!write.allowed || busy}>
        <FormError message={errors.form} />
        <Field id="invite-email" label="Email" error={errors.fields.email}>
          <input id="invite-email" name="email" type="email" required maxLength={254} autoComplete="off" aria-describedby={describedBy('invite-email', null, errors.fields.email)} />
        </Field>
        <Field id="invite-role" label="Role" hint={roleHint} error={errors.fields.role}>
          <select id="invite-role" name="role" aria-describedby={describedBy('invite-role', roleHint, errors.fields.role)}>
            {ROLES.map((role) => (
              <option key={role} value={role} disabled={role === 'owner' && !owners.allowed}>
                {role}
              </option>
            ))}
          </select>
        </Field>
        <button type="submit">Send invitation</button>
      </fieldset>
    </form>
  );
}

function InvitationRow({ invitation, onChanged }: { invitation: Invitation; onChanged: (invitation: Invitation, what: string) => void }) {
  const caller = session.value!;
  const reason = reasonFor(may(caller, 'people.write'), may(caller, 'people.owners'), invitation.role === 'owner');
  const [failure, setFailure] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const id = invitation.id;
  const run = async (what: string, work: () => Promise<Invitation>) => {
    setBusy(true);
    try {
      onChanged(await work(), what);
      setFailure(null);
    } catch (error) {
      setFailure(error instanceof Error ? error.message : String(error));
    } finally {
      setBusy(false);
    }
  };
  // What the API allows by status: a resend revives a pending or expired one, a revoke ends a pending one.
  const resendable = invitation.status === 'pending' || invitation.status === 'expired';
  const revocable = invitation.status === 'pending';
  const reasonId = reason ? `invitation-${id}-reason` : undefined;
  return (
    <tr>
      <td class="wrap">
        {invitation.email}
        <br />
        <span class="muted">
          as {invitation.role}, invited by {invitation.invitedBy?.email ?? 'the operator'}
        </span>
      </td>
      <td>
        <span class={`status status-${invitation.status}`}>{invitation.status}</span>
        <br />
        <span class="muted">
          sent <Time iso={invitation.sentAt} />, expires <Time iso={invitation.expiresAt} />
        </span>
      </td>
      <td>
        <div class="actions">
          <button
            type="button"
            disabled={reason !== null || !resendable || busy}
            aria-describedby={reasonId}
            onClick={() =>
              void run(`The invitation to ${invitation.email} was sent again`, async () => unwrap(await api.POST('/employees/invites/{id}/resend', { params: { path: { id } } })))
            }
          >
            Resend<span class="visually-hidden"> the invitation to {invitation.email}</span>
          </button>
          <button
            type="button"
            class="danger"
            disabled={reason !== null || !revocable || busy}
            aria-describedby={reasonId}
            onClick={() =>
              confirm(`Revoke the invitation to ${invitation.email}? Its link stops working.`) &&
              void run(`The invitation to ${invitation.email} was revoked`, async () => unwrap(await api.DELETE('/employees/invites/{id}', { params: { path: { id } } })))
            }
          >
            Revoke<span class="visually-hidden"> the invitation to {invitation.email}</span>
          </button>
        </div>
        {reason && (resendable || revocable) ? (
          <p class="hint" id={reasonId}>
            {reason}
          </p>
        ) : null}
        {failure ? (
          <p class="error" role="alert">
            {failure}
          </p>
        ) : null}
      </td>
    </tr>
  );
}

/** Invitations are listed to owners and admins only (the API's rule): a member is told so, not shown an error. */
function Invitations({ onNotice }: { onNotice: (text: string) => void }) {
  const list = useCursorList<Invitation>(async (cursor) => unwrap(await api.GET('/employees/invites', { params: { query: { limit: PAGE, ...(cursor ? { cursor } : {}) } } })), 'invitations');
  return (
    <>
      <InviteForm
        onInvited={(invitation) => {
          onNotice(`Invitation sent to ${invitation.email}`);
          void list.reload();
        }}
      />
      {list.failure ? <p role="alert">{list.failure}</p> : null}
      {list.items === null ? (
        list.failure ? null : (
          <Loading what="invitations" />
        )
      ) : list.items.length === 0 ? (
        <p>No invitations yet.</p>
      ) : (
        <TableRegion label="Invitations, newest first">
          <table>
            <caption class="visually-hidden">Invitations, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Invitation</th>
                <th scope="col">Status</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.items.map((invitation) => (
                <InvitationRow
                  key={invitation.id}
                  invitation={invitation}
                  onChanged={(changed, what) => {
                    list.replace(changed);
                    onNotice(what);
                  }}
                />
              ))}
            </tbody>
          </table>
        </TableRegion>
      )}
      <MoreButton list={list} what="invitations" />
    </>
  );
}

export function PeoplePage() {
  const write = may(session.value!, 'people.write');
  const [notice, setNotice] = useState<string | null>(null);
  const members = useCursorList<Employee>(async (cursor) => unwrap(await api.GET('/employees', { params: { query: { limit: PAGE, ...(cursor ? { cursor } : {}) } } })), 'members');
  return (
    <section>
      <h1>People</h1>
      <p role="status">{notice}</p>
      <h2>Members</h2>
      <Members list={members} onNotice={setNotice} />
      <h2>Invitations</h2>
      {/* The list is owners' and admins' to read: a member sees the form, off, with the reason, and no list. */}
      {write.allowed ? <Invitations onNotice={setNotice} /> : <InviteForm onInvited={() => undefined} />}
    </section>
  );
}
