import { z } from 'zod';
import { instantView } from '../../core/vocabulary/timestamps.ts';
import { listOf } from '../../core/vocabulary/pagination.ts';
import { SUPPORT_STATUSES, type SupportAttachment, type SupportMessage, type SupportRequest } from './support-store.ts';

const STATUS = 'open: waiting on support; answered: support replied, waiting on you; solved: done (a new message reopens it)';

export const attachmentView = z
  .object({
    object: z.literal('support_attachment'),
    id: z.uuid(),
    requestId: z.uuid(),
    messageId: z.uuid(),
    filename: z.string(),
    contentType: z.string().describe('Read from the file itself when it was uploaded, not taken from the uploader'),
    size: z.number().int().describe('Bytes'),
    sha256: z.string().describe('Hex SHA-256 of the contents'),
    createdAt: instantView,
  })
  .meta({
    id: 'SupportAttachment',
    description: 'A file attached to a support message. GET /support/attachments/{id} with Accept: application/octet-stream downloads it',
  });

export const messageView = z
  .object({
    object: z.literal('support_message'),
    id: z.uuid(),
    requestId: z.uuid(),
    author: z.object({
      kind: z.enum(['person', 'support']).describe('A person of the organisation, or the support team'),
      id: z.uuid().nullable().describe("The person's id; null for support"),
      name: z.string(),
    }),
    body: z.string(),
    createdAt: instantView,
    attachments: z.array(attachmentView),
  })
  .meta({ id: 'SupportMessage', description: 'One message of a support request, with its attachments' });

const requestFields = {
  object: z.literal('support_request'),
  id: z.uuid(),
  subject: z.string(),
  status: z.enum(SUPPORT_STATUSES).describe(STATUS),
  requester: z.object({ id: z.uuid(), name: z.string(), email: z.string() }).describe('The person who opened it'),
  messageCount: z.number().int(),
  lastMessageAt: instantView,
  solvedAt: instantView.nullable(),
  createdAt: instantView,
  updatedAt: instantView,
};

export const requestView = z.object(requestFields).meta({ id: 'SupportRequest', description: 'A support request, without its messages' });

export const requestListView = listOf(requestView);

export const requestDetailView = z
  .object({ ...requestFields, messages: z.array(messageView).describe('Oldest first') })
  .meta({ id: 'SupportRequestDetail', description: 'A support request with every message, oldest first' });

export function toAttachmentView(attachment: SupportAttachment): z.input<typeof attachmentView> {
  return {
    object: 'support_attachment',
    id: attachment.id,
    requestId: attachment.requestId,
    messageId: attachment.messageId,
    filename: attachment.filename,
    contentType: attachment.contentType,
    size: attachment.size,
    sha256: attachment.sha256,
    createdAt: attachment.createdAt.toISOString(),
  };
}

export function toMessageView(message: SupportMessage): z.input<typeof messageView> {
  return {
    object: 'support_message',
    id: message.id,
    requestId: message.requestId,
    author: { kind: message.author.kind, id: message.author.id, name: message.author.name },
    body: message.body,
    createdAt: message.createdAt.toISOString(),
    attachments: message.attachments.map(toAttachmentView),
  };
}

export function toRequestView(request: SupportRequest): z.input<typeof requestView> {
  return {
    object: 'support_request',
    id: request.id,
    subject: request.subject,
    status: request.status,
    requester: { ...request.requester },
    messageCount: request.messageCount,
    lastMessageAt: request.lastMessageAt.toISOString(),
    solvedAt: request.solvedAt ? request.solvedAt.toISOString() : null,
    createdAt: request.createdAt.toISOString(),
    updatedAt: request.updatedAt.toISOString(),
  };
}

export function toRequestDetailView(request: SupportRequest, messages: readonly SupportMessage[]): z.input<typeof requestDetailView> {
  return { ...toRequestView(request), messages: messages.map(toMessageView) };
}
