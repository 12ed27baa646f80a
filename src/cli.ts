#!/usr/bin/env node
import { keepFilesPrivate, makeDataDirPrivate } from './cli/privateFiles.js';
import { parseArgs } from 'node:util';
import { loadConfig } from './config/load.js';
import { refuseHalfConfiguredCluster } from './config/cluster.js';
import { migrateToLatest, openDatabase } from './db/database.js';
import { addUser, createOrg, firstAdminOf, setRole } from './domain/orgs/orgs.js';
import { keysCommand, sandboxCommand } from './cli/keys.js';
import { NotFoundError } from './domain/errors.js';
import { isSandboxOrgId } from './domain/orgs/sandbox.js';
import { listOrgMembers } from './domain/orgs/members.js';
import { listOrgs, setPassword } from './domain/orgs/operator.js';
import { checkSecretFingerprint } from './db/secretFingerprint.js';
import { webhookCommand } from './cli/webhooks.js';
import { required, UsageError } from './cli/operatorError.js';
import { withDb } from './cli/withDb.js';
import { readNewPassword } from './cli/password.js';
import { backupCommand, eraseCommand, restoreCommand } from './cli/dataCommands.js';
import { showRequest } from './cli/requests.js';
import { inviteCommand, resetLinkCommand } from './cli/identity.js';
import { orgPolicyCommand } from './cli/orgPolicy.js';
import { describeFailure } from './cli/failure.js';
import { ssoCommand, ssoDomainsCommand } from './cli/sso.js';
import { exportCommand, importCommand, orgExportCommand } from './cli/exchange/commands.js';
import { version } from './version.js';

const USAGE = `orgdata — operator commands (every command takes --json)

  orgdata --version                  print the version
  orgdata serve                      run the server (applies pending migrations first)
  orgdata migrate [--accept-new-secret]
                                     apply migrations and exit (creates the database when there is none)
  orgdata org create --name NAME --admin-email EMAIL
                                     reads the admin's password from standard input (a prompt on a terminal);
                                     --admin-password PW still works (avoid: visible in ps and shell history)
  orgdata org list                   organisations with their ids
  orgdata org export --org ORG_ID --to DIR
                                     one organisation's data and files, without secrets, for its owner
  orgdata org policy --org ORG_ID [--require-2fa nobody|admins|everyone]
                                     show or set who must use two-factor authentication
  orgdata users list --org ORG_ID
  orgdata users add --org ORG_ID --email EMAIL --role admin|member
                                     reads the password from standard input (a prompt on a terminal);
                                     --password PW still works (avoid: visible in ps and shell history)
  orgdata users set-role --org ORG_ID --email EMAIL --role admin|member
  orgdata users set-password --org ORG_ID --email EMAIL
                                     reads the new password from standard input (a prompt on a terminal)
  orgdata users invite --org ORG_ID --email EMAIL --role admin|member
                                     an invitation link (mailed too when SMTP_URL is set)
  orgdata users reset-link --org ORG_ID --email EMAIL
                                     a password reset link for a member, to pass on
  orgdata sso set --org ORG_ID --issuer URL --client-id ID --domains a.com[,b.com] [--auto-join member|off] [--require]
                                     single sign-on (OpenID Connect); reads the client secret from standard input
  orgdata sso show|remove --org ORG_ID
                                     the settings and redirect URI (never the secret); removing it
  orgdata sso domains list --org ORG_ID
                                     the SSO domains, verified or not, with the DNS record that proves each
  orgdata sso domains approve --org ORG_ID --domain DOMAIN
                                     verify a domain without DNS (only for an organisation you know owns it)
  orgdata keys create --org ORG_ID --admin-email EMAIL --name NAME --scopes a,b [--expires-days N | --never] [--test]
                                     --test: an od_test_ key of the organisation's sandbox (test mode)
  orgdata keys list --org ORG_ID     the keys of both modes, each with its mode (live or test)
  orgdata keys revoke --org ORG_ID KEY_ID
  orgdata sandbox reset --org ORG_ID [--keys] [--endpoints]
                                     delete the sandbox's contacts, labels, groups, files, events and deliveries
                                     (its API keys and webhook endpoints too when asked); live data is untouched
  orgdata webhooks create --org ORG_ID --url URL [--events contact.*,group.member_added] [--test]
  orgdata webhooks list --org ORG_ID [--test]
  orgdata webhooks delete|enable|disable --org ORG_ID ENDPOINT_ID [--test]
                                     --test: the endpoints of the organisation's sandbox (test mode)
  orgdata contacts erase --org ORG_ID --id CONTACT_ID
                                     delete a contact and remove its personal data from events and stored replays
  orgdata requests show REQUEST_ID   an API request from the request log (REQUEST_LOG_DAYS), with the events it caused
  orgdata backup --to DIR            a consistent copy of the database (SQLite) and files while the server runs
  orgdata restore --from DIR         a backup back into an empty DATA_DIR, checked against its manifest
  orgdata export --to DIR            the whole installation in a database-neutral format (JSON lines, files, manifest)
  orgdata import --from DIR          an export into an empty installation (SQLite or PostgreSQL, local or S3), same SECRET_KEY

Configuration comes from the environment (see docs/configuration.md): DATA_DIR, DATABASE_URL, SECRET_KEY, …`;

async function run(argv: string[]): Promise<{ json: unknown; text: string } | null> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean', short: 'v' },
      'accept-new-secret': { type: 'boolean' },
      name: { type: 'string' },
      'admin-email': { type: 'string' },
      'admin-password': { type: 'string' },
      org: { type: 'string' },
      email: { type: 'string' },
      password: { type: 'string' },
      role: { type: 'string' },
      scopes: { type: 'string' },
      'expires-days': { type: 'string' },
      never: { type: 'boolean' },
      url: { type: 'string' },
      events: { type: 'string' },
      id: { type: 'string' },
      to: { type: 'string' },
      from: { type: 'string' },
      'require-2fa': { type: 'string' },
      issuer: { type: 'string' },
      'client-id': { type: 'string' },
      domains: { type: 'string' },
      domain: { type: 'string' },
      'auto-join': { type: 'string' },
      require: { type: 'boolean' },
      test: { type: 'boolean' },
      keys: { type: 'boolean' },
      endpoints: { type: 'boolean' },
    },
  });
  const [group, action, ...rest] = positionals;
  if (values.version) return { json: { version: version() }, text: `orgdata ${version()}` };
  if (values.help || !group) return { json: { usage: USAGE }, text: USAGE };
  const command = action && group !== 'serve' && group !== 'migrate' ? `${group} ${action}` : group;
  // A half-configured cluster is refused before anything is made: a secret generated into
  // DATA_DIR here would be taken as the installation's own on the next start.
  if (command === 'serve') refuseHalfConfiguredCluster(loadConfig(process.env, { createSecret: false, secretOptional: true }));
  // Only the server and `migrate` make a new installation (database, generated secret).
  const config = loadConfig(process.env, {
    createSecret: command === 'serve' || command === 'migrate',
    secretOptional: command === 'restore' || command === 'import',
  });

  makeDataDirPrivate(config.dataDir);
  // A sandbox (test mode) is reached through its organisation (--test), never named as one: for
  // every command, present and future, its id is an organisation there is not.
  if (typeof values.org === 'string' && isSandboxOrgId(values.org)) {
    throw new NotFoundError(`No organisation ${values.org}: a sandbox is reached with --org ITS_ORGANISATION --test.`);
  }

  switch (command) {
    case 'serve': {
      // Loaded here, not at the top: the server (Fastify, every route, the S3 client) is most of
      // what the CLI would import, and every other command starts without it (about 2 s of CPU).
      const { serveCommand } = await import('./cli/serve.js');
      return serveCommand(config, values.json === true);
    }
    case 'migrate': {
      const db = openDatabase(
        config.databaseDirectUrl
          ? { databaseUrl: config.databaseDirectUrl, dataDir: config.dataDir }
          : { databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolMode: config.databasePoolMode },
      );
      const applied = await migrateToLatest(db)
        .then(async (names) => {
          await checkSecretFingerprint(db.kysely, config.secretKey, { acceptNew: values['accept-new-secret'] === true });
          return names;
        })
        .finally(() => db.close());
      const text = applied.length ? `applied: ${applied.join(', ')}` : 'database is up to date';
      return { json: { applied }, text: values['accept-new-secret'] ? `${text}; the data now goes with this SECRET_KEY` : text };
    }
    case 'org list': {
      const orgs = await withDb(config, (db) => listOrgs(db.kysely));
      const text = orgs.map((o) => `${o.id}  ${o.name}  ${o.members} member(s), ${o.admins} admin(s)  created ${o.created_at}`).join('\n');
      return { json: orgs, text: text || 'no organisations yet: make one with `orgdata org create`' };
    }
    case 'users list': {
      const orgId = required(values, 'org');
      const members = await withDb(config, async (db) => {
        // The operator acts on the organisation's behalf, through its first admin.
        const userId = await firstAdminOf(db.kysely, orgId);
        return listOrgMembers({ db: db.kysely, orgId, actor: { kind: 'user', userId, role: 'admin' }, requestId: 'cli', now: new Date() });
      });
      const text = members
        .map((m) => `${m.user_id}  ${m.email}  ${m.role}  joined ${m.joined_at}  ${m.active_keys} active key(s)`)
        .join('\n');
      return { json: members, text };
    }
    case 'users set-password': {
      const orgId = required(values, 'org');
      const email = required(values, 'email');
      const password = await readNewPassword();
      const user = await withDb(config, (db) => setPassword(db.kysely, { orgId, email, password }));
      return { json: user, text: `set a new password for ${user.email}; signed out of ${user.ended_sessions} dashboard session(s)` };
    }
    case 'users invite':
      return inviteCommand(config, values);
    case 'org policy':
      return orgPolicyCommand(config, values);
    case 'users reset-link':
      return resetLinkCommand(config, values);
    case 'sso set':
    case 'sso show':
    case 'sso remove':
      return ssoCommand(config, action!, values);
    case 'sso domains':
      return ssoDomainsCommand(config, rest[0], values);
    case 'org create': {
      const name = required(values, 'name');
      const adminEmail = required(values, 'admin-email');
      const adminPassword = values['admin-password'] ?? (await readNewPassword(`Password for ${adminEmail}: `));
      const result = await withDb(config, (db) => createOrg(db.kysely, { name, adminEmail, adminPassword }));
      return {
        json: result,
        text: `created organisation ${result.org.id} (${result.org.name}) with admin ${result.user.email} (${result.user.id})`,
      };
    }
    case 'users add': {
      const orgId = required(values, 'org');
      const email = required(values, 'email');
      const role = required(values, 'role');
      const password = values.password ?? (await readNewPassword(`Password for ${email}: `));
      const user = await withDb(config, (db) => addUser(db.kysely, { orgId, email, password, role }));
      const note = user.created ? '' : ' (existing user: their password is unchanged)';
      return { json: user, text: `added ${user.email} (${user.id}) as ${user.role}${note}` };
    }
    case 'users set-role': {
      const user = await withDb(config, (db) =>
        setRole(db.kysely, { orgId: required(values, 'org'), email: required(values, 'email'), role: required(values, 'role') }),
      );
      const note = user.revoked_keys ? `; revoked ${user.revoked_keys} API key(s) they created` : '';
      return { json: user, text: `${user.email} is now ${user.role}${note}` };
    }
    case 'keys create':
    case 'keys list':
    case 'keys revoke':
      return keysCommand(config, action!, rest, values);
    case 'sandbox reset':
      return sandboxCommand(config, action, values);
    case 'webhooks create':
    case 'webhooks list':
    case 'webhooks delete':
    case 'webhooks enable':
    case 'webhooks disable': {
      const orgId = required(values, 'org');
      const endpointId = rest[0];
      if (action !== 'create' && action !== 'list' && !endpointId) throw new UsageError('missing ENDPOINT_ID');
      if (action === 'create') required(values, 'url');
      return withDb(config, (db) =>
        webhookCommand(db.kysely, config, {
          action: action!,
          orgId,
          endpointId,
          url: values.url,
          events: values.events,
          test: values.test === true,
        }),
      );
    }
    case 'contacts erase':
      return eraseCommand(config, values);
    case 'requests show': {
      const requestId = rest[0];
      if (!requestId) throw new UsageError('missing REQUEST_ID');
      return showRequest(config, requestId);
    }
    case 'backup':
      return backupCommand(config, values);
    case 'restore':
      return restoreCommand(config, values);
    case 'export':
      return exportCommand(config, values);
    case 'org export':
      return orgExportCommand(config, values);
    case 'import':
      return importCommand(config, values);
    default:
      throw new UsageError(`unknown command "${positionals.join(' ')}"`);
  }
}

keepFilesPrivate();
const argv = process.argv.slice(2);
const asJson = argv.includes('--json');
run(argv).then(
  (result) => {
    if (result) process.stdout.write((asJson ? JSON.stringify(result.json, null, 2) : result.text) + '\n');
  },
  (error: unknown) => {
    const { code, message, exitCode } = describeFailure(error, USAGE);
    if (asJson) {
      process.stdout.write(JSON.stringify({ error: { code, message } }) + '\n');
    } else {
      process.stderr.write(`orgdata: ${message}\n`);
    }
    process.exit(exitCode);
  },
);
