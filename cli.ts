import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from './config/load.ts';
import { openOperatorService } from './composition/operator-service.ts';
import { openOperatorStorage } from './composition/operator-storage.ts';
import { addPersonTo, createOrganizationWithOwner, issueSession, mailSetPasswordToken } from './core/identity/identity-admin.ts';
import { ORG_ROLES, type OrgRole } from './core/identity/scopes.ts';
import { keyFileOf, loadSecretKeys, prependKeyToFile } from './core/services/secret-keys.ts';
import { SecretVault } from './core/services/secret-vault.ts';
import { microsToUsd, usdAmount, usdToMicros } from './core/vocabulary/money.ts';
import { dateOrTimestampSchema } from './core/vocabulary/timestamps.ts';
import { meteringMigrations } from './plugins/metering/metering-migrations.ts';
import { generatePromotionCode, type PromotionCode, SqlPromotionCodes } from './plugins/metering/promotion-codes.ts';
import { runSupportCommand, SUPPORT_USAGE, SupportCliUsageError } from './plugins/support/support-cli.ts';
import { manifest } from './plugins/index.ts';
import { appsConfigSchema } from './plugins/apps/apps-config.ts';
import { runtimeStateDir } from './plugins/apps/apps-host.ts';
import { stateFileKeyIds } from './plugins/apps/runtime/index.ts';
import { PeopleTokens } from './plugins/people/index.ts';
import { gitBaseUrl, githostConfigSchema, gitRoot } from './plugins/githost/index.ts';
import { LocalGitHost } from './plugins/githost/local/local-git-host.ts';
import { isRepoName, LocalRepositories } from './plugins/githost/local/local-repos.ts';

const USAGE = `Operator CLI (uses the same config as the service: SVC_CONFIG, DATABASE_URL, SVC_DATA_DIR).
With the embedded database, stop the service first: PGlite allows one process at a time.

  npm run cli -- orgs list
  npm run cli -- orgs create --name NAME --owner-email EMAIL [--owner-name NAME]
  npm run cli -- people add --org ORG_ID --email EMAIL [--name NAME] [--role owner|admin|member]
  npm run cli -- people invite --org ORG_ID --email EMAIL [--role owner|admin|member]
                                                         mails an invitation (the people plugin's): the person
                                                         joins when they open its link and accept
  npm run cli -- people reset-password --email EMAIL     mails a one-time set-password token
  npm run cli -- sessions create --email EMAIL [--days N]
  npm run cli -- mail list [--to EMAIL] [--limit N]      the local outbox, newest first; shows a message's
                                                         secrets (set-password tokens) once, then forgets them
  npm run cli -- secrets rotate [--new-key]              re-encrypt customer secrets under the first key;
                                                         --new-key first adds a key to the key file
  npm run cli -- credits codes create --amount USD --expires DATE [--max-redemptions N] [--label TEXT]
                                                         a promotion code worth USD of credit, shown once; each
                                                         organisation redeems it once (POST /client/credits/redeem)
                                                         before DATE (YYYY-MM-DD is midnight UTC), N in total
  npm run cli -- credits codes list                      every code: label, amount, expiry, redemptions, status
  npm run cli -- credits codes revoke --id CODE_ID       withdraw a code: later redemptions are refused
  npm run cli -- git create NAME [--org ORG_ID]          an empty repository on the local git server; prints the URL
                                                         to push to (an API key with apps:deploy as the password);
                                                         --org may be left out while there is one organisation
${SUPPORT_USAGE}`;

async function main(argv: string[]): Promise<number> {
  // Files are the service's own: whatever is created without a stated mode (a library's, a temporary
  // file) is not readable by other users either. The data directory's files state theirs
  // (core/kernel/private-files.ts), so they stay private when the service is embedded or under another umask.
  process.umask(0o077);
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: 'string' },
      'owner-email': { type: 'string' },
      'owner-name': { type: 'string' },
      org: { type: 'string' },
      email: { type: 'string' },
      role: { type: 'string' },
      days: { type: 'string' },
      to: { type: 'string' },
      limit: { type: 'string' },
      'new-key': { type: 'boolean' },
      amount: { type: 'string' },
      expires: { type: 'string' },
      'max-redemptions': { type: 'string' },
      label: { type: 'string' },
      id: { type: 'string' },
      request: { type: 'string' },
      message: { type: 'string' },
      as: { type: 'string' },
      status: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [noun] = positionals;
  if (values.help || !noun) {
    process.stdout.write(USAGE);
    return values.help ? 0 : 2;
  }
  const need = (value: string | undefined, flag: string): string => {
    if (!value) throw new UsageError(`missing --${flag}`);
    return value;
  };

  const config = loadConfig();
  const storage = await openOperatorStorage(config);
  const { db } = storage;
  let dbOpen = true;
  const closeDb = async () => {
    if (dbOpen) await db.close();
    dbOpen = false;
  };
  try {
    const stores = storage.stores.identity(db);
    // `git create NAME` takes its name as a positional; every other command is its words alone.
    const command = positionals[0] === 'git' ? positionals.slice(0, 2).join(' ') : positionals.join(' ');
    switch (command) {
      case 'orgs list': {
        const { rows } = await db.query<{ id: string; name: string; status: string }>('SELECT id, name, status FROM organizations ORDER BY created_at');
        for (const row of rows) process.stdout.write(`${row.id}  ${row.status.padEnd(9)}  ${row.name}\n`);
        return 0;
      }
      case 'orgs create': {
        const email = need(values['owner-email'], 'owner-email');
        const created = await createOrganizationWithOwner(db, storage.stores.identity, {
          name: need(values.name, 'name'),
          ownerEmail: email,
          ownerName: values['owner-name'] ?? email,
        });
        process.stdout.write(`organisation ${created.organization.id}\ndefault project ${created.project.id}\nowner ${created.owner.id} <${email}>\n`);
        return 0;
      }
      case 'people add': {
        const role = (values.role ?? 'member') as OrgRole;
        if (!ORG_ROLES.includes(role)) throw new UsageError(`--role must be one of ${ORG_ROLES.join(', ')}`);
        const organizationId = need(values.org, 'org');
        if (!(await stores.organizations.get(organizationId))) throw new UsageError(`no organisation ${organizationId}`);
        const email = need(values.email, 'email');
        const person = await addPersonTo(stores, { organizationId, email, name: values.name ?? email, role });
        process.stdout.write(`person ${person.id} <${person.email}> is ${role} of ${organizationId}\n`);
        return 0;
      }
      case 'people invite': {
        const role = (values.role ?? 'member') as OrgRole;
        if (!ORG_ROLES.includes(role)) throw new UsageError(`--role must be one of ${ORG_ROLES.join(', ')}`);
        const organizationId = need(values.org, 'org');
        const email = need(values.email, 'email');
        if (!(await stores.organizations.get(organizationId))) throw new UsageError(`no organisation ${organizationId}`);
        if (!config.plugins['people']) throw new UsageError("invitations are the people plugin's: enable plugins.people in the config");
        // The invitation goes through the service itself (its table, events and mail): one database user at a time on PGlite.
        await closeDb();
        const service = await openOperatorService(config, manifest);
        try {
          const invitation = await service.container.resolve(PeopleTokens.Invitations).invite({
            organizationId,
            email,
            role,
            projects: [],
            inviter: { actor: { kind: 'system', id: 'cli', label: 'operator CLI', credential: null }, personId: null },
            baseUrl: baseUrlOf(config),
          });
          const where = config.mail.driver === 'outbox' ? ' (kept in the outbox: npm run cli -- mail list)' : '';
          process.stdout.write(
            `invited <${invitation.email}> as ${role} of ${organizationId}: invitation ${invitation.id}, link mailed${where}, valid until ${invitation.expiresAt.toISOString()}\n`,
          );
        } finally {
          await service.close();
        }
        return 0;
      }
      case 'people reset-password': {
        const email = need(values.email, 'email');
        if (!(await stores.people.getByEmail(email))) throw new UsageError(`no person with email ${email}`);
        const mailer = storage.openMailer();
        try {
          const { person, expiresAt } = await mailSetPasswordToken(db, storage.stores.identity, mailer, {
            email,
            baseUrl: baseUrlOf(config),
            ttlHours: config.auth.passwordTokenTtlHours,
            now: new Date(),
          });
          const where = config.mail.driver === 'outbox' ? ' (kept in the outbox: npm run cli -- mail list)' : '';
          process.stdout.write(`set-password mail sent to <${person.email}>${where}; token valid until ${expiresAt.toISOString()}\n`);
        } finally {
          mailer.close?.();
        }
        return 0;
      }
      case 'sessions create': {
        const email = need(values.email, 'email');
        const person = await stores.people.getByEmail(email);
        if (!person) throw new UsageError(`no person with email ${email}`);
        const days = Number(values.days ?? config.auth.sessionTtlDays);
        if (!Number.isInteger(days) || days < 1 || days > 365) throw new UsageError('--days must be a whole number from 1 to 365');
        const { token, expiresAt } = await issueSession(stores, { personId: person.id, ttlDays: days, now: new Date() });
        process.stdout.write(`session token for ${email} (shown once, expires ${expiresAt.toISOString()}):\n${token}\n`);
        return 0;
      }
      case 'mail list': {
        const limit = Number(values.limit ?? 20);
        if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new UsageError('--limit must be a whole number from 1 to 1000');
        if (config.mail.driver !== 'outbox') process.stderr.write(`mail is configured to go out by ${config.mail.driver}; the outbox holds only what was kept before\n`);
        const mails = await storage.outbox.read({ ...(values.to ? { to: values.to } : {}), limit });
        for (const mail of mails) {
          process.stdout.write(`--- ${mail.createdAt.toISOString()}  ${mail.id}\nFrom: ${mail.from}\nTo: ${mail.to}\nSubject: ${mail.subject}\n\n${mail.text}\n\n`);
        }
        if (mails.length === 0) process.stdout.write(values.to ? `no mail to ${values.to}\n` : 'the outbox is empty\n');
        return 0;
      }
      case 'secrets rotate': {
        if (values['new-key']) {
          const file = keyFileOf(config);
          if (file === null) {
            throw new UsageError(
              '--new-key adds a key to the key file, and keys come from SVC_SECRET_KEYS here: put the new key first there, restart every replica, then run secrets rotate',
            );
          }
          await loadSecretKeys(config); // creates the file on a first run
          process.stdout.write(`added key ${await prependKeyToFile(file)} in front of ${file}\n`);
        }
        const { keyring, warning } = await loadSecretKeys(config);
        if (keyring === null) throw new UsageError(warning ?? 'no secret-encryption key is configured');
        const report = await new SecretVault(storage.stores.secrets, db, keyring).rotate();
        process.stdout.write(`re-encrypted ${report.resealed} secret(s) under key ${report.keyId}; ${report.changed} changed while this ran\n`);
        for (const failure of report.failed) {
          process.stderr.write(`cannot re-encrypt ${failure.owner.kind}/${failure.owner.id}/${failure.name}: ${failure.reason}\n`);
        }
        // The apps runtime's state file is sealed by the running service itself, never by this command.
        const apps = config.plugins['apps'];
        const appsConfig = apps === undefined ? null : appsConfigSchema.parse(apps ?? {});
        const stateDir = appsConfig === null ? null : runtimeStateDir(appsConfig, config.storage.dataDir);
        const stateKeys = stateDir === null ? [] : await stateFileKeyIds(stateDir);
        const sealedBefore = stateKeys.filter((id) => id !== report.keyId);
        if (sealedBefore.length > 0) {
          const older = sealedBefore.join(', ');
          const when = `the service seals it under ${report.keyId} when it next starts; keep those keys until then`;
          process.stdout.write(`the apps runtime's state in ${stateDir} is sealed under ${older}: ${when}\n`);
        }
        if (report.changed > 0) {
          process.stdout.write('run it again once every replica encrypts under the new key: values changed meanwhile may be under an older one\n');
        } else if (report.failed.length === 0 && sealedBefore.length === 0 && keyring.keys.length > 1) {
          process.stdout.write(
            `every secret is under ${report.keyId}; the older keys (${keyring.keys
              .slice(1)
              .map((k) => k.id)
              .join(', ')}) are no longer needed\n`,
          );
        }
        return report.failed.length === 0 ? 0 : 1;
      }
      case 'credits codes create': {
        const amount = usdAmount.safeParse(Number(values.amount));
        if (!values.amount || !amount.success || amount.data <= 0) throw new UsageError('--amount must be an amount of USD above zero, at most six decimals');
        const expires = dateOrTimestampSchema.safeParse(values.expires ?? '');
        if (!expires.success || expires.data <= new Date()) throw new UsageError('--expires must be a future date (YYYY-MM-DD, midnight UTC) or ISO timestamp');
        const max = values['max-redemptions'] === undefined ? null : Number(values['max-redemptions']);
        if (max !== null && (!Number.isInteger(max) || max < 1 || max > 2_147_483_647)) throw new UsageError('--max-redemptions must be a whole number of at least 1');
        const label = (values.label ?? 'Promotional credit').trim();
        if (label === '' || label.length > 100) throw new UsageError('--label must be 1 to 100 characters');
        const codes = await promotionCodes(storage, config.plugins);
        const code = generatePromotionCode();
        const created = await codes.create({ code, label, amountMicros: usdToMicros(amount.data), expiresAt: expires.data, maxRedemptions: max });
        process.stdout.write(`promotion code ${created.id} (shown once; only its hash is kept):\n${code}\n${describeCode(created)}\n`);
        return 0;
      }
      case 'credits codes list': {
        const codes = await (await promotionCodes(storage, config.plugins)).list();
        for (const code of codes) process.stdout.write(`${code.id}  …${code.hint}  ${describeCode(code)}\n`);
        if (codes.length === 0) process.stdout.write('no promotion codes\n');
        return 0;
      }
      case 'credits codes revoke': {
        const id = need(values.id, 'id');
        if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id)) throw new UsageError('--id must be a code id, as credits codes list shows');
        const revoked = await (await promotionCodes(storage, config.plugins)).revoke(id, new Date());
        if (!revoked) throw new UsageError(`no promotion code ${id}`);
        process.stdout.write(`withdrawn: ${revoked.id}  ${describeCode(revoked)}\n`);
        return 0;
      }
      case 'git create': {
        if (!Object.hasOwn(config.plugins, 'githost') || config.plugins['githost'] === false) {
          throw new UsageError("repositories are the githost plugin's: enable plugins.githost in the config");
        }
        const name = positionals[2];
        if (!name || positionals.length > 3) throw new UsageError('git create takes one repository name');
        if (!isRepoName(name)) throw new UsageError('a repository name is lowercase letters, digits and dashes, 1 to 63 characters, starting with a letter or digit');
        let organizationId = values.org;
        if (organizationId === undefined) {
          const { rows } = await db.query<{ id: string }>("SELECT id FROM organizations WHERE status = 'active' ORDER BY created_at LIMIT 2");
          if (rows.length !== 1) throw new UsageError('there is more than one organisation: name one with --org (npm run cli -- orgs list)');
          organizationId = (rows[0] as { id: string }).id;
        } else if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(organizationId) || !(await stores.organizations.get(organizationId))) {
          throw new UsageError(`no organisation ${organizationId}`);
        }
        const settings = githostConfigSchema.parse(config.plugins['githost'] ?? {});
        const repos = new LocalRepositories(gitRoot(settings, config));
        if (!(await repos.create(organizationId, name))) throw new UsageError(`organisation ${organizationId} has a repository named ${name} already`);
        const url = new LocalGitHost(repos, gitBaseUrl(config.server)).cloneUrl(organizationId, name);
        process.stdout.write(`${url}\n`);
        return 0;
      }
      case 'support list':
      case 'support show':
      case 'support reply':
      case 'support solve':
        return await runSupportCommand(positionals[1], values, storage, (text) => process.stdout.write(text));
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } finally {
    await closeDb();
  }
}

class UsageError extends Error {}

/** The promotion codes store, its tables brought up to date; credits are the metering plugin's. */
async function promotionCodes(storage: Awaited<ReturnType<typeof openOperatorStorage>>, plugins: Record<string, unknown>): Promise<SqlPromotionCodes> {
  if (!Object.hasOwn(plugins, 'metering') || plugins['metering'] === false) {
    throw new UsageError('credits need the metering plugin, which this config does not enable (plugins: { metering: {} })');
  }
  await storage.migrate(meteringMigrations);
  return new SqlPromotionCodes(storage.db);
}

function describeCode(code: PromotionCode): string {
  const limit = code.maxRedemptions === null ? 'once per organisation' : `${code.redemptions}/${code.maxRedemptions} redeemed`;
  const redeemed = code.maxRedemptions === null ? `${code.redemptions} redeemed, ${limit}` : limit;
  const status = code.revokedAt ? `withdrawn ${code.revokedAt.toISOString()}` : code.expiresAt <= new Date() ? 'expired' : 'active';
  return `"${code.label}"  $${microsToUsd(code.amountMicros)}  until ${code.expiresAt.toISOString()}  ${redeemed}  ${status}`;
}

/** Where links in operator mail point: the service's public address, else where it listens. */
function baseUrlOf(config: ReturnType<typeof loadConfig>): string {
  return config.server.publicUrl ?? `http://${config.server.host}:${config.server.port}`;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof UsageError || error instanceof SupportCliUsageError) process.stderr.write(`${error.message}\n\n${USAGE}`);
    else if (error instanceof ConfigError) process.stderr.write(`${error.message}\n`);
    else process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(error instanceof UsageError || error instanceof SupportCliUsageError ? 2 : 1);
  },
);
