import type { FastifyBaseLogger } from 'fastify';
import { createToken } from './container.ts';
import type { AppConfig } from '../../config/schema.ts';
import type { Authenticator } from '../identity/authenticator.ts';
import type { GatewayMetrics } from '../gateway/metrics.ts';
import type { OperationRegistry } from '../operations/operations.ts';
import type { OperationService } from '../operations/operation-service.ts';
import type { OperationTools } from '../operations/operation-tools.ts';
import type { Coordination } from '../ports/coordination.ts';
import type { BlobStore } from '../ports/blobs.ts';
import type { Database } from '../ports/database.ts';
import type { DomainEvents } from '../events/domain-events.ts';
import type { JobQueue } from '../jobs/job-queue.ts';
import type { IdentityStores, IdentityStoresFactory } from '../ports/identity.ts';
import type { Mailer } from '../ports/mail.ts';
import type { PeopleSignIn } from '../identity/people-sign-in.ts';
import type { SecretVault } from '../services/secret-vault.ts';
import type { OutboundHttpClient } from '../net/outbound-http-client.ts';
import type { LongRunningOperations } from '../operations/long-running.ts';
import type { JobLogs } from '../jobs/job-logs.ts';
import type { Tracing } from '../observability/tracing.ts';

/** Container tokens for what the kernel provides to every plugin. */
export const Tokens = {
  Config: createToken<AppConfig>('Config'),
  Logger: createToken<FastifyBaseLogger>('Logger'),
  /** The clock every component reads, so tests can move time. */
  Clock: createToken<() => Date>('Clock'),
  Database: createToken<Database>('Database'),
  Coordination: createToken<Coordination>('Coordination'),
  Operations: createToken<OperationRegistry>('OperationRegistry'),
  /** Runs an operation for a credential and records its outcome: what every surface calls. */
  OperationService: createToken<OperationService>('OperationService'),
  /** The operations as MCP tools, per credential (what /mcp serves). */
  OperationTools: createToken<OperationTools>('OperationTools'),
  Authenticator: createToken<Authenticator>('Authenticator'),
  Metrics: createToken<GatewayMetrics>('GatewayMetrics'),
  /** Identity stores over the shared pool. */
  Identity: createToken<IdentityStores>('IdentityStores'),
  /** The same stores over a given transaction, for multi-step writes. */
  IdentityFactory: createToken<IdentityStoresFactory>('IdentityStoresFactory'),
  /** File contents: on disk or in the database, per `storage.blobs`. */
  Blobs: createToken<BlobStore>('BlobStore'),
  /** Customer-given secrets, encrypted at rest. */
  Secrets: createToken<SecretVault>('SecretVault'),
  /** Outgoing mail: SMTP, or the local outbox by default. */
  Mailer: createToken<Mailer>('Mailer'),
  /** The durable job queue: enqueue (in a transaction or not), look up, cancel. */
  Jobs: createToken<JobQueue>('JobQueue'),
  /** The domain-event emitter: `emit(tx, event)` in the transaction of the change. */
  Events: createToken<DomainEvents>('DomainEvents'),
  /** People's sign-in: passwords, browser sessions, signing out (core/identity/people-sign-in.ts). */
  SignIn: createToken<PeopleSignIn>('PeopleSignIn'),
  /** HTTP to URLs customers give: the SSRF guard on every connection, no redirects, deadlines, a size cap (`outbound.*`). */
  OutboundHttp: createToken<OutboundHttpClient>('OutboundHttpClient'),
  /** Work that outlives a request, polled as an operation record: started with its job in one transaction. */
  LongRunning: createToken<LongRunningOperations>('LongRunningOperations'),
  /** A running job's log lines: written by its worker, read and followed from any replica while it runs. */
  JobLogs: createToken<JobLogs>('JobLogs'),
  /** OpenTelemetry traces (`tracing.*`): `tracer` is null when off, which the call path checks once per call. */
  Tracing: createToken<Tracing>('Tracing'),
} as const;
