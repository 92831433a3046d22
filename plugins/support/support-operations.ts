import { z } from 'zod';
import type { DomainEvents } from '../../core/events/domain-events.ts';
import type { Credential } from '../../core/identity/credential.ts';
import { ApiError, describeBytes } from '../../core/kernel/errors.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
import { type AnyOperation, defineOperation, type FileInput, type ReceivedFile } from '../../core/operations/operations.ts';
import type { BlobStore } from '../../core/ports/blobs.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { listResponse, pageQuery } from '../../core/vocabulary/pagination.ts';
import { maySee, visibleRequester, WHO_SEES } from './support-access.ts';
import type { SupportConfig } from './support-config.ts';
import { SUPPORT_STATUSES, type MessageAuthor, type NewAttachment, type SupportRequest, type SupportStore } from './support-store.ts';
import { attachmentView, messageView, requestDetailView, requestListView, requestView, toAttachmentView, toMessageView, toRequestDetailView, toRequestView } from './support-views.ts';
// Catalogues the codes and event types this module answers with and emits.
import './support-errors.ts';
import './support-events.ts';

export interface SupportDeps {
  store: SupportStore;
  blobs: BlobStore;
  events: DomainEvents;
  identity: IdentityStores;
  clock: () => Date;
  attachments: SupportConfig['attachments'];
}

export const SUPPORT_PAGE_DEFAULT = 50;
export const SUPPORT_PAGE_MAX = 200;

const idParams = z.strictObject({ id: resourceId.describe('Support request id') });
const subject = z.string().trim().min(1).max(200).describe('One line saying what it is about');
const message = z.string().trim().min(1).max(20_000).describe('What happened, what you expected; plain text');

const notFound = (id: string) => new ApiError('support_request_not_found', `No support request ${id}`, { param: 'id' });

/** Blob keys of an organisation's files: one prefix per organisation, so its files can be found without their rows. */
export const organizationFilesPrefix = (organizationId: string) => `support/${organizationId}/`;

/** Blob keys of a request's files: the prefix of the caller's organisation. */
export const attachmentPrefix = (credential: Credential) => organizationFilesPrefix(credential.organizationId);

/** A received file as the message records it. */
const toNewAttachment = (file: ReceivedFile): NewAttachment => ({
  blobKey: file.blob.key,
  filename: file.filename,
  contentType: file.blob.contentType,
  declaredContentType: file.declaredContentType,
  size: file.blob.size,
  sha256: file.blob.sha256,
});

export function supportOperations(deps: SupportDeps): AnyOperation[] {
  const { store, blobs, events, identity, clock } = deps;
  const { maxFiles, maxFileBytes } = deps.attachments;
  const files: FileInput = {
    field: 'attachments',
    maxFiles,
    maxFileBytes,
    prefix: attachmentPrefix,
    description: `Up to ${maxFiles} files of at most ${describeBytes(maxFileBytes)} each (multipart only). Their type is read from their bytes, not taken from the upload`,
  };
  const filesSentence = `Send it as JSON, or as multipart/form-data with the same fields as text and up to ${maxFiles} files (at most ${describeBytes(maxFileBytes)} each) under \`attachments\`; over MCP a message carries no files.`;

  /** The person writing, as their messages name them. */
  async function authorOf(credential: Credential): Promise<MessageAuthor & { id: string }> {
    if (credential.kind === 'key') throw new Error('support operations are person-only');
    const person = await identity.people.get(credential.personId);
    return { kind: 'person', id: credential.personId, name: person?.name ?? credential.email };
  }

  /** A request the caller may see, else the same 404 as one that does not exist. */
  async function visibleRequest(credential: Credential, id: string): Promise<SupportRequest> {
    const request = await store.get(credential.organizationId, id);
    if (!request || !maySee(credential, request)) throw notFound(id);
    return request;
  }

  const list = defineOperation({
    name: 'support.requests.list',
    method: 'GET',
    path: '/support/requests',
    summary: 'List support requests, newest first',
    description: `${WHO_SEES} Filter by status.`,
    scope: null,
    personOnly: true,
    wide: true,
    readOnly: true,
    query: pageQuery({ defaultLimit: SUPPORT_PAGE_DEFAULT, maxLimit: SUPPORT_PAGE_MAX, id: resourceId }).extend({
      status: z.enum(SUPPORT_STATUSES).optional().describe('Only requests in this status'),
    }),
    output: requestListView,
    async handler({ query }, { credential }) {
      const requesterId = visibleRequester(credential) ?? undefined;
      const page = await store.page({ organizationId: credential.organizationId, requesterId, status: query.status }, query);
      return listResponse(page, toRequestView);
    },
  });

  const get = defineOperation({
    name: 'support.requests.get',
    method: 'GET',
    path: '/support/requests/:id',
    summary: 'One support request with every message and attachment',
    description: `${WHO_SEES} Another organisation's request, or one you may not see, is 404 support_request_not_found.`,
    scope: null,
    personOnly: true,
    wide: true,
    readOnly: true,
    params: idParams,
    errors: ['support_request_not_found'],
    output: requestDetailView,
    async handler({ params }, { credential }) {
      const request = await visibleRequest(credential, params.id);
      return toRequestDetailView(request, await store.messages(request.id));
    },
  });

  const create = defineOperation({
    name: 'support.requests.create',
    method: 'POST',
    path: '/support/requests',
    summary: 'Open a support request: a subject, a first message and attachments',
    description: `Opens a request in status open (waiting on support); support answers it from the operator console and the requester is mailed. ${filesSentence} Emits support.request_opened. ${WHO_SEES}`,
    scope: null,
    personOnly: true,
    wide: true,
    readOnly: false,
    status: 201,
    body: z.strictObject({ subject, message }),
    files,
    output: requestDetailView,
    async handler({ body, files: received = [] }, { credential, transaction }) {
      const author = await authorOf(credential);
      const now = clock();
      const id = await transaction(async (tx) => {
        const created = await store.create(tx, {
          organizationId: credential.organizationId,
          requesterId: author.id,
          subject: body.subject,
          message: { author, body: body.message, attachments: received.map(toNewAttachment) },
          now,
        });
        await events.emit(tx, {
          type: 'support.request_opened',
          organizationId: credential.organizationId,
          subject: created,
          actor: actorOf(credential),
          data: { requestId: created, subject: body.subject, status: 'open', requesterId: author.id, attachments: received.length },
        });
        return created;
      });
      const request = await store.get(credential.organizationId, id);
      if (!request) throw notFound(id);
      return toRequestDetailView(request, await store.messages(id));
    },
  });

  const reply = defineOperation({
    name: 'support.requests.messages.create',
    method: 'POST',
    path: '/support/requests/:id/messages',
    summary: 'Add a message (and attachments) to a support request',
    description: `The request goes back to open (waiting on support), a solved one included: writing again reopens it. ${filesSentence} ${WHO_SEES}`,
    scope: null,
    personOnly: true,
    wide: true,
    readOnly: false,
    status: 201,
    params: idParams,
    body: z.strictObject({ message }),
    files,
    errors: ['support_request_not_found'],
    output: messageView,
    async handler({ params, body, files: received = [] }, { credential, transaction }) {
      await visibleRequest(credential, params.id);
      const author = await authorOf(credential);
      const messageId = await transaction(async (tx) => {
        // Locked, so a reply and a status change by support or another person apply one after the other.
        const request = await store.get(credential.organizationId, params.id, { tx, forUpdate: true });
        if (!request) throw notFound(params.id);
        return store.addMessage(tx, {
          organizationId: credential.organizationId,
          requestId: request.id,
          message: { author, body: body.message, attachments: received.map(toNewAttachment) },
          status: 'open',
          now: clock(),
        });
      });
      const written = await store.message(params.id, messageId);
      if (!written) throw notFound(params.id);
      return toMessageView(written);
    },
  });

  const solve = defineOperation({
    name: 'support.requests.solve',
    method: 'POST',
    path: '/support/requests/:id/solve',
    summary: 'Mark a support request solved',
    description: `Solving a solved request changes nothing. A new message (from you or support) reopens it. Emits support.request_solved. ${WHO_SEES}`,
    scope: null,
    personOnly: true,
    wide: true,
    readOnly: false,
    idempotent: true,
    params: idParams,
    errors: ['support_request_not_found'],
    output: requestView,
    async handler({ params }, { credential, transaction }) {
      await visibleRequest(credential, params.id);
      await transaction(async (tx) => {
        const request = await store.get(credential.organizationId, params.id, { tx, forUpdate: true });
        if (!request) throw notFound(params.id);
        if (request.status === 'solved') return;
        await store.markSolved(tx, request.id, clock());
        await events.emit(tx, {
          type: 'support.request_solved',
          organizationId: credential.organizationId,
          subject: request.id,
          actor: actorOf(credential),
          data: { requestId: request.id, subject: request.subject, status: 'solved', requesterId: request.requester.id, solvedBy: 'customer' },
        });
      });
      return toRequestView(await visibleRequest(credential, params.id));
    },
  });

  const attachment = defineOperation({
    name: 'support.attachments.get',
    method: 'GET',
    path: '/support/attachments/:id',
    summary: "An attachment's record; with Accept: application/octet-stream, the file",
    description: `As JSON, the attachment's record (also over MCP). With \`Accept: application/octet-stream\` the file itself, always as a download: \`content-disposition: attachment\`, \`x-content-type-options: nosniff\` and a sandboxing content-security-policy, with the type read from its bytes when it was uploaded (never text/html), so an uploaded page cannot run on this origin. ${WHO_SEES}`,
    scope: null,
    personOnly: true,
    wide: true,
    readOnly: true,
    params: z.strictObject({ id: resourceId.describe('Attachment id') }),
    errors: ['support_attachment_not_found'],
    output: attachmentView,
    async handler({ params }, { credential }) {
      const found = await store.attachment(credential.organizationId, params.id);
      const request = found ? await store.get(credential.organizationId, found.requestId) : null;
      if (!found || !request || !maySee(credential, request)) throw new ApiError('support_attachment_not_found', `No attachment ${params.id}`, { param: 'id' });
      return toAttachmentView(found);
    },
    async download(output, { credential }) {
      const found = await store.attachment(credential.organizationId, output.id);
      const blob = found ? await blobs.get(found.blobKey) : null;
      if (!found || !blob) throw new ApiError('support_attachment_not_found', `The contents of attachment ${output.id} are gone`, { param: 'id' });
      return { filename: found.filename, contentType: found.contentType, size: blob.info.size, stream: blob.stream };
    },
  });

  return [list, get, create, reply, solve, attachment];
}
