import { join, resolve } from 'node:path';
import { ConfigError } from '../../config/load.ts';
import type { AppConfig } from '../../config/schema.ts';
import { SqlCreditLedger } from './credit-ledger-store.ts';
import { SqlUsageRecorder } from './usage-recorder.ts';
import { createToken } from '../../core/kernel/container.ts';
import { InferenceAdmissionPoint } from '../../core/gateway/inference-admission.ts';
import { BillingJournal } from './billing-journal.ts';
import { budgetAlertMailSubscriber } from './budget-alert-mail.ts';
import { budgetAlertSubscriber, BudgetAlerts, BudgetAlertSinkPoint, loggingAlertSink } from './budget-alerts.ts';
import { CapPolicies } from './cap-policies.ts';
import { GovernedAdmission } from './governed-admission.ts';
import { uncoveredPrices } from './price-coverage.ts';
import { batchSheet, priceSheet, type PriceSheet } from './pricing.ts';
import { HoldAccounts, MeteredSpendHolds } from './spend-holds.ts';
import { SpendHoldsPoint } from '../../core/gateway/spend-holds.ts';
import { RequestLogWriter } from './request-log-writer.ts';
import { usdToMicros } from '../../core/vocabulary/money.ts';
import { definePlugin } from '../../core/kernel/plugin.ts';
import { type CreditLedger, CreditChargesPoint, RequestLogReaderPoint, SpendReaderPoint } from '../../core/ports/metering.ts';
import { LedgerCharges } from './credit-charges.ts';
import type { SpendReader } from '../../core/ports/identity.ts';
import { SqlSpendReader } from './spend-reader.ts';
import { meteringErasers, meteringFigures, meteringSteps } from './account-figures.ts';
import { OnboardingStepsPoint, OverviewFiguresPoint } from '../../core/kernel/account-contributions.ts';
import { OrganizationErasersPoint } from '../../core/kernel/organization-erasure.ts';
import { SqlRequestLogReader } from './request-log-store.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { InferenceTokens } from '../inference/index.ts';
import { budgetOperations } from './budget-operations.ts';
import { creditOperations } from './credit-operations.ts';
import { CreditGrants } from './credit-grants.ts';
import { PromotionRedemptions } from './promotion-redemption.ts';
import { meteringConfigSchema, type MeteringConfig } from './metering-config.ts';
import { meteringMigrations } from './metering-migrations.ts';
import { manualPayments, PaymentProviderPoint } from './payment-provider.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './metering-errors.ts';

export const MeteringTokens = {
  Ledger: createToken<CreditLedger>('CreditLedger'),
  Writer: createToken<RequestLogWriter>('RequestLogWriter'),
  /** Null when the journal is off (see journalRoot). */
  Journal: createToken<BillingJournal | null>('BillingJournal'),
  Policies: createToken<CapPolicies>('CapPolicies'),
  Prices: createToken<ReadonlyMap<string, PriceSheet>>('PriceSheets'),
  /** What batch lines are billed with, by model (the live sheet where a model has no batch prices). */
  BatchPrices: createToken<ReadonlyMap<string, PriceSheet>>('BatchPriceSheets'),
  Admission: createToken<GovernedAdmission>('GovernedAdmission'),
  Spend: createToken<SpendReader>('SpendReader'),
  /** The one way to add credit: the ledger line and the admission counter together. */
  Grants: createToken<CreditGrants>('CreditGrants'),
};

export const meteringPlugin = definePlugin({
  name: 'metering',
  description: 'Prices, the credit ledger, spend caps, rate limits and the request log behind every /v1 call',
  dependsOn: ['inference'],
  configSchema: meteringConfigSchema,
  migrations: meteringMigrations,
  register({ container, extensions, config, appConfig, logger }) {
    const database = container.resolve(Tokens.Database);
    const identity = container.resolve(Tokens.Identity);
    const catalogue = container.resolve(InferenceTokens.Catalogue);

    // Every model must be priced: an unpriced model would be served free, silently.
    const prices = new Map<string, PriceSheet>();
    const batchPrices = new Map<string, PriceSheet>();
    for (const model of catalogue.all()) {
      if (!model.prices) throw new ConfigError(`config: plugins.inference.models.${model.id}.prices: required while the metering plugin is enabled`);
      const sheet = priceSheet(model.id, model.prices);
      const batch = batchSheet(model.id, model.prices, sheet);
      const gaps = [...uncoveredPrices(model, sheet), ...(batch === sheet ? [] : uncoveredPrices(model, batch).map((gap) => `batch.${gap}`))];
      if (gaps.length > 0) throw new ConfigError(gaps.map((gap) => `config: plugins.inference.models.${model.id}.prices.${gap}`).join('\n'));
      prices.set(model.id, sheet);
      batchPrices.set(model.id, batch);
    }
    const ledger = new SqlCreditLedger(database);
    const spend = new SqlSpendReader(database);
    container.bindValue(MeteringTokens.Spend, spend);
    const recorder = new SqlUsageRecorder(database, container.resolve(Tokens.Events));
    const root = journalRoot(config, appConfig);
    const journal = root === null ? null : new BillingJournal(recorder, { root, segmentBytes: JOURNAL_SEGMENT_BYTES, batchSize: config.requestLog.batchSize }, logger);
    container.bindValue(MeteringTokens.Journal, journal);
    const writer = new RequestLogWriter(recorder, config.requestLog, logger, journal);
    const policies = new CapPolicies(identity, config.policyCacheTtlMs);
    container.bindValue(MeteringTokens.Ledger, ledger);
    container.bindValue(MeteringTokens.Grants, new CreditGrants({ coordination: container.resolve(Tokens.Coordination), counterTtlMs: config.counterTtlMs }));
    container.bindValue(MeteringTokens.Writer, writer);
    container.bindValue(MeteringTokens.Policies, policies);
    container.bindValue(MeteringTokens.Prices, prices);
    container.bindValue(MeteringTokens.BatchPrices, batchPrices);
    const metrics = container.resolve(Tokens.Metrics);
    metrics.gauge('svc_request_log_queue_depth', 'Request-log rows waiting to be written', () => writer.snapshot().queued);
    metrics.counter(
      'svc_request_log_dropped_rows_total',
      'Request-log rows not held in memory because the queue was full (with the billing journal on, kept there for the next start)',
      () => writer.snapshot().dropped,
    );
    metrics.counter('svc_request_log_failed_flushes_total', 'Request-log flushes that failed and were retried', () => writer.snapshot().failedFlushes);
    if (journal)
      metrics.counter('svc_billing_journal_failed_writes_total', 'Billing-journal writes that failed (those calls were not protected against a crash)', () => journal.failedWrites);
    const alerts = new BudgetAlerts(database, container.resolve(Tokens.Events));
    const coordination = container.resolve(Tokens.Coordination);
    const holdAccounts = new HoldAccounts({ db: database, coordination, writer, counterTtlMs: config.counterTtlMs });
    const admission = new GovernedAdmission({
      coordination,
      ledger,
      spend,
      policies,
      writer,
      alerts,
      prices,
      batchPrices,
      holds: holdAccounts,
      clock: container.resolve(Tokens.Clock),
      logger,
      onRejected: (kind) => metrics.rejected(kind),
      onCharged: (model, micros) => metrics.observeCost(model, micros),
      settings: {
        keyDefaults: config.limits.keyDefaults,
        project: config.limits.project,
        account: config.limits.account,
        leaseTtlMs: config.leaseTtlMs,
        counterTtlMs: config.counterTtlMs,
        initialCreditMicros: usdToMicros(config.initialCreditUsd),
      },
    });
    container.bindValue(MeteringTokens.Admission, admission);
    extensions.provide(InferenceAdmissionPoint, admission);
    extensions.provide(
      SpendHoldsPoint,
      new MeteredSpendHolds({
        db: database,
        accounts: holdAccounts,
        gate: admission,
        coordination,
        batchPrices,
        counterTtlMs: config.counterTtlMs,
        clock: container.resolve(Tokens.Clock),
        logger,
      }),
    );
    extensions.provide(RequestLogReaderPoint, new SqlRequestLogReader(database));
    extensions.provide(SpendReaderPoint, spend);
    // Charges that are no gateway call (a day of app hosting): the ledger and the admission counter together.
    const events = container.resolve(Tokens.Events);
    extensions.provide(
      CreditChargesPoint,
      new LedgerCharges({
        db: database,
        ledger,
        events,
        coordination,
        counterTtlMs: config.counterTtlMs,
        initialCreditMicros: usdToMicros(config.initialCreditUsd),
      }),
    );
    // The account surface's money and calls (GET /client/overview, /onboarding) and what a deletion erases.
    extensions.contribute(OverviewFiguresPoint, meteringFigures({ database, ledger, spend, initialCreditMicros: usdToMicros(config.initialCreditUsd) }));
    for (const step of meteringSteps(database)) extensions.contribute(OnboardingStepsPoint, step);
    for (const eraser of meteringErasers()) extensions.contribute(OrganizationErasersPoint, eraser);
  },
  subscribers: ({ container, extensions, logger }) => [
    budgetAlertSubscriber(extensions.get(BudgetAlertSinkPoint) ?? loggingAlertSink(logger)),
    budgetAlertMailSubscriber({ identity: container.resolve(Tokens.Identity), mailer: container.resolve(Tokens.Mailer), logger }),
  ],
  operations({ container, extensions, config }) {
    const initialCreditMicros = usdToMicros(config.initialCreditUsd);
    const ledger = container.resolve(MeteringTokens.Ledger);
    return [
      ...creditOperations({
        ledger,
        payments: extensions.get(PaymentProviderPoint) ?? manualPayments(ledger),
        events: container.resolve(Tokens.Events),
        grants: container.resolve(MeteringTokens.Grants),
        redemptions: new PromotionRedemptions({
          db: container.resolve(Tokens.Database),
          ledger,
          grants: container.resolve(MeteringTokens.Grants),
          events: container.resolve(Tokens.Events),
          rateLimiter: container.resolve(Tokens.Coordination).rateLimiter,
          clock: container.resolve(Tokens.Clock),
          throttle: {
            attemptsPerOrganization: config.promotionCodes.attemptsPerOrganization,
            attemptsPerAddress: config.promotionCodes.attemptsPerAddress,
            windowMs: config.promotionCodes.windowMinutes * 60_000,
          },
        }),
        initialCreditMicros,
      }),
      ...budgetOperations({
        identity: container.resolve(Tokens.Identity),
        spend: container.resolve(MeteringTokens.Spend),
        ledger,
        writer: container.resolve(MeteringTokens.Writer),
        policies: container.resolve(MeteringTokens.Policies),
        clock: container.resolve(Tokens.Clock),
        initialCreditMicros,
      }),
    ];
  },
  async start({ container, logger }) {
    const database = container.resolve(Tokens.Database);
    for (const sheet of new Set([...container.resolve(MeteringTokens.Prices).values(), ...container.resolve(MeteringTokens.BatchPrices).values()])) {
      await database.query('INSERT INTO price_versions (id, model, prices) VALUES ($1, $2, $3::jsonb) ON CONFLICT (id) DO NOTHING', [
        sheet.version,
        sheet.model,
        JSON.stringify(sheet.prices),
      ]);
    }
    const journal = container.resolve(MeteringTokens.Journal);
    if (journal) {
      const { rows } = await database.query<{ id: string }>('SELECT id FROM journal_identity');
      journal.open(rows[0]!.id);
      // Before serving: calls of processes that died are billed before this one admits any.
      await journal.recover().catch((error: unknown) => logger.error({ err: error }, 'billing journal: replaying segments of a gone process failed; will retry'));
      journal.startBackground();
    }
    container.resolve(MeteringTokens.Writer).start();
    container.resolve(MeteringTokens.Admission).start();
  },
  async stop({ container }) {
    container.resolve(MeteringTokens.Admission).stop();
    await container.resolve(MeteringTokens.Writer).stop();
    await container.resolve(MeteringTokens.Journal)?.close();
  },
});

/** Closed and a new one begun past this size; at 5,000 calls/s about every 0.6 s, well before the kernel writes it back. */
const JOURNAL_SEGMENT_BYTES = 1024 * 1024;

/** Where the billing journal lives, or null for none: none is useful when the database dies with the process. */
function journalRoot(config: MeteringConfig, appConfig: AppConfig): string | null {
  const configured = config.requestLog.journalDir;
  if (configured === false) return null;
  if (configured !== undefined) return resolve(configured);
  const database = appConfig.storage.database;
  if (database.driver === 'pglite' && (database.dataDir === '' || database.dataDir.startsWith('memory://'))) return null;
  return resolve(join(appConfig.storage.dataDir, 'journal'));
}
