import { z } from 'zod';
import type { OnboardingStep } from '../../core/kernel/account-contributions.ts';
import type { Credential } from '../../core/identity/credential.ts';
import { defineOperation, type AnyOperation } from '../../core/operations/operations.ts';
import { instantView } from '../../core/vocabulary/timestamps.ts';
import { AccountStore, COMPANY_SIZES, HEARD_FROM_SOURCES, USE_CASES } from './account-store.ts';
import { personCredential } from './caller.ts';
import type { Database } from '../../core/ports/database.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './account-errors.ts';

interface Deps {
  database: Database;
  /** Every step the enabled plugins contribute (core/kernel/account-contributions.ts). */
  steps: readonly OnboardingStep[];
  clock: () => Date;
}

const stepView = z
  .object({
    id: z.string().describe('`create_key`, `first_call`, `add_credit`, `invite_teammate`, and what other plugins add'),
    title: z.string(),
    description: z.string(),
    done: z.boolean(),
    doneAt: instantView.nullable().describe('When the organisation first did it, read from what it did'),
  })
  .meta({ id: 'OnboardingStep', description: 'One item of the onboarding checklist, done when the account’s real state says so' });

const heardFromView = z
  .object({ source: z.enum(HEARD_FROM_SOURCES), detail: z.string().nullable(), answeredAt: instantView })
  .meta({ id: 'HeardFrom', description: 'Where the calling person heard of the service' });

const detailsView = z
  .object({
    companyName: z.string().nullable(),
    companySize: z.enum(COMPANY_SIZES).nullable(),
    useCase: z.enum(USE_CASES),
    useCaseDetail: z.string().nullable(),
    website: z.string().nullable(),
    updatedAt: instantView,
  })
  .meta({ id: 'OrganizationDetails', description: 'The organisation’s answers to the details step' });

const onboardingView = z
  .object({
    object: z.literal('onboarding'),
    steps: z.array(stepView).describe('In checklist order'),
    completedSteps: z.number().int(),
    totalSteps: z.number().int(),
    complete: z.boolean().describe('Every step is done'),
    dismissed: z.boolean().describe('The calling person skipped the checklist (always false for an API key)'),
    dismissedAt: instantView.nullable(),
    heardFrom: heardFromView.nullable().describe("The calling person's answer; null before they gave one, and for an API key"),
    details: detailsView.nullable().describe("The organisation's answers to the details step; null before anyone gave them"),
  })
  .meta({ id: 'Onboarding', description: 'The onboarding checklist of the organisation, computed from its real state, and the answers stored beside it' });

const heardFromRequest = z.strictObject({
  source: z.enum(HEARD_FROM_SOURCES),
  detail: z.string().trim().max(500).optional().describe('Free text, e.g. which search, podcast or friend (at most 500 characters)'),
});

const skipRequest = z.strictObject({
  dismissed: z.boolean().default(true).describe('false brings the checklist back'),
});

const detailsRequest = z.strictObject({
  companyName: z.string().trim().min(1).max(200).nullable().optional(),
  companySize: z.enum(COMPANY_SIZES).nullable().optional(),
  useCase: z.enum(USE_CASES).describe('What the organisation builds with the service'),
  useCaseDetail: z.string().trim().max(1000).nullable().optional().describe('In its own words (at most 1000 characters)'),
  website: z
    .url({ protocol: /^https?$/ })
    .max(300)
    .nullable()
    .optional(),
});

const PER = {
  heardFrom: 'Per person: it is where this person heard of the service, so it follows the person into every organisation and is asked once.',
  skip: 'Per person and organisation: skipping hides the checklist from the one who skipped; the others still see it.',
  details: 'Per organisation: anyone of the organisation may answer, and a later answer replaces the earlier one whole.',
};

export function onboardingOperations({ database, steps, clock }: Deps): AnyOperation[] {
  const store = new AccountStore(database);
  const ordered = [...steps].sort((a, b) => a.order - b.order);

  async function onboardingOf(credential: Credential) {
    const organizationId = credential.organizationId;
    const person = credential.kind === 'key' ? null : credential.personId;
    const [done, dismissedAt, heardFrom, details] = await Promise.all([
      Promise.all(ordered.map((step) => step.doneAt(organizationId))),
      person ? store.dismissedAt(organizationId, person) : null,
      person ? store.heardFrom(person) : null,
      store.details(organizationId),
    ]);
    const stepViews = ordered.map((step, index) => {
      const at = done[index] ?? null;
      return { id: step.id, title: step.title, description: step.description, done: at !== null, doneAt: at?.toISOString() ?? null };
    });
    const completedSteps = stepViews.filter((step) => step.done).length;
    return {
      object: 'onboarding' as const,
      steps: stepViews,
      completedSteps,
      totalSteps: stepViews.length,
      complete: completedSteps === stepViews.length,
      dismissed: dismissedAt !== null,
      dismissedAt: dismissedAt?.toISOString() ?? null,
      heardFrom: heardFrom && { source: heardFrom.source, detail: heardFrom.detail, answeredAt: heardFrom.answeredAt.toISOString() },
      details: details && {
        companyName: details.companyName,
        companySize: details.companySize,
        useCase: details.useCase,
        useCaseDetail: details.useCaseDetail,
        website: details.website,
        updatedAt: details.updatedAt.toISOString(),
      },
    };
  }

  const get = defineOperation({
    name: 'account.onboarding.get',
    method: 'GET',
    path: '/onboarding',
    summary: 'The onboarding checklist and the answers given so far',
    description:
      'Each step is done when the account’s real state shows it (a key exists, a /v1 call succeeded, a payment was recorded, a second person joined), never because someone ticked it; a step whose plugin is not enabled is not listed. ' +
      `${PER.heardFrom} ${PER.skip} ${PER.details} An API key reads the checklist too, without a person's answers.`,
    scope: null,
    readOnly: true,
    output: onboardingView,
    handler: async (_input, { credential }) => onboardingOf(credential),
  });

  const heardFrom = defineOperation({
    name: 'account.onboarding.heardFrom',
    method: 'POST',
    path: '/onboarding/heard-from',
    summary: 'Say where you heard of the service',
    description: `${PER.heardFrom} Answering again replaces the answer. A person's act: an API key is answered 403 \`person_required\`. Answers the checklist.`,
    scope: null,
    readOnly: false,
    idempotent: true,
    body: heardFromRequest,
    personOnly: true,
    output: onboardingView,
    async handler({ body }, { credential, transaction }) {
      const person = personCredential(credential);
      await transaction((tx) => new AccountStore(tx).setHeardFrom(person.personId, { source: body.source, detail: body.detail || null, answeredAt: clock() }));
      return onboardingOf(credential);
    },
  });

  const skip = defineOperation({
    name: 'account.onboarding.skip',
    method: 'POST',
    path: '/onboarding/skip',
    summary: 'Skip the onboarding checklist (or bring it back)',
    description: `${PER.skip} The body may be left out (it means dismissed: true). A person's act: an API key is answered 403 \`person_required\`. Answers the checklist.`,
    scope: null,
    readOnly: false,
    idempotent: true,
    body: skipRequest,
    bodyRequired: false,
    personOnly: true,
    output: onboardingView,
    async handler({ body }, { credential, transaction }) {
      const person = personCredential(credential);
      await transaction((tx) => new AccountStore(tx).setDismissed(credential.organizationId, person.personId, body?.dismissed ?? true, clock()));
      return onboardingOf(credential);
    },
  });

  const details = defineOperation({
    name: 'account.onboarding.details',
    method: 'POST',
    path: '/onboarding/details',
    summary: 'Tell us about the organisation: company, size and use case',
    description: `${PER.details} Fields left out are stored as null. A person's act: an API key is answered 403 \`person_required\`. Answers the checklist.`,
    scope: null,
    readOnly: false,
    idempotent: true,
    wide: true,
    body: detailsRequest,
    personOnly: true,
    output: onboardingView,
    async handler({ body }, { credential, transaction }) {
      const person = personCredential(credential);
      await transaction((tx) =>
        new AccountStore(tx).setDetails(credential.organizationId, {
          companyName: body.companyName ?? null,
          companySize: body.companySize ?? null,
          useCase: body.useCase,
          useCaseDetail: body.useCaseDetail || null,
          website: body.website ?? null,
          updatedByPersonId: person.personId,
          updatedAt: clock(),
        }),
      );
      return onboardingOf(credential);
    },
  });

  return [get, heardFrom, skip, details];
}
