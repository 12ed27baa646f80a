import type { Config } from '../config.js';
import { createApiKey, DEFAULT_EXPIRY_DAYS, listApiKeys, revokeApiKey } from '../domain/apiKeys/apiKeys.js';
import { ValidationError } from '../domain/errors.js';
import { OPERATOR } from '../domain/events/memberEvents.js';
import { firstAdminOf, memberIdByEmail } from '../domain/orgs/orgs.js';
import { resetSandbox } from '../domain/orgs/sandboxReset.js';
import { openBlobStore } from '../infra/choose.js';
import type { CommandResult } from './dataCommands.js';
import { required, UsageError, type Options } from './operatorError.js';
import { withDb } from './withDb.js';

/**
 * `orgdata keys create|list|revoke` and `orgdata sandbox reset`. `--org` always names the live
 * organisation (a sandbox is part of it, never addressed on its own); `--test` makes an
 * `od_test_` key of its sandbox (SANDBOX.md), made then if it has none.
 */
export async function keysCommand(config: Config, action: string, rest: string[], values: Options): Promise<CommandResult> {
  const orgId = required(values, 'org');
  const now = new Date();
  switch (action) {
    case 'create': {
      if (values.never && values['expires-days'] !== undefined) throw new UsageError('give --expires-days or --never, not both');
      let expiresInDays: number | null = values.never ? null : DEFAULT_EXPIRY_DAYS;
      const days = values['expires-days'];
      if (typeof days === 'string') {
        if (!/^\d+$/.test(days)) throw ValidationError.field('expires_days', 'must be a whole number of days');
        expiresInDays = Number(days);
      }
      const key = await withDb(config, async (db) => {
        const userId = await memberIdByEmail(db.kysely, orgId, required(values, 'admin-email'));
        return createApiKey({ db: db.kysely, orgId, userId, now }, config.secretKey, {
          name: required(values, 'name'),
          scopes: required(values, 'scopes')
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean),
          expiresInDays,
          mode: values.test ? 'test' : 'live',
        });
      });
      const json = {
        id: key.id,
        key: key.key,
        mode: key.mode,
        name: key.name,
        scopes: key.scopes,
        last4: key.last4,
        expires_at: key.expires_at,
      };
      return {
        json,
        text: `${key.key}\n\nThis is the only time the key is shown. id ${key.id}, ${key.mode} mode, scopes ${key.scopes.join(',')}, expires ${key.expires_at ?? 'never'}.`,
      };
    }
    case 'list': {
      // The operator acts on the organisation's behalf, through its first admin; both modes' keys.
      const keys = await withDb(config, async (db) =>
        listApiKeys({ db: db.kysely, orgId, userId: await firstAdminOf(db.kysely, orgId), now }, 'both'),
      );
      const text = keys
        .map(
          (k) =>
            `${k.id}  ${k.mode}  …${k.last4}  ${k.name}  [${k.scopes.join(',')}]  expires ${k.expires_at ?? 'never'}  ${k.revoked_at ? `revoked ${k.revoked_at} (${k.revoked_reason})` : 'active'}  last used ${k.last_used_at ?? 'never'}${k.last_used_origin ? ` from ${k.last_used_origin}` : ''}`,
        )
        .join('\n');
      return { json: keys, text: text || 'no keys' };
    }
    case 'revoke': {
      const keyId = rest[0];
      if (!keyId) throw new UsageError('missing KEY_ID');
      const key = await withDb(config, async (db) =>
        revokeApiKey({ db: db.kysely, orgId, userId: await firstAdminOf(db.kysely, orgId), now }, keyId),
      );
      return { json: key, text: `revoked ${key.id} (${key.mode} mode, ${key.name}) at ${key.revoked_at}` };
    }
    default:
      throw new UsageError(`unknown command "keys ${action}"`);
  }
}

/** `orgdata sandbox reset --org ORG_ID [--keys] [--endpoints]`: see domain/orgs/sandboxReset.ts. */
export async function sandboxCommand(config: Config, action: string | undefined, values: Options): Promise<CommandResult> {
  if (action !== 'reset') throw new UsageError(`unknown command "sandbox ${action ?? ''}"`);
  const orgId = required(values, 'org');
  const reset = await withDb(config, async (db) => {
    await firstAdminOf(db.kysely, orgId); // not_found for an organisation there is not (or a sandbox's id)
    const blobs = await openBlobStore(config);
    return resetSandbox(db.kysely, blobs, orgId, OPERATOR, { keys: values.keys === true, endpoints: values.endpoints === true });
  });
  const kept = [values.keys ? null : 'API keys', values.endpoints ? null : 'webhook endpoints'].filter(Boolean).join(' and ');
  return {
    json: reset,
    text:
      `reset the test data of ${orgId}: deleted ${reset.contacts} contact(s), ${reset.labels} label(s), ${reset.groups} group(s), ` +
      `${reset.files} file(s), ${reset.events} event(s), ${reset.deliveries} webhook deliveries, ${reset.api_keys} API key(s), ` +
      `${reset.webhook_endpoints} webhook endpoint(s)${kept ? `; kept its ${kept}` : ''}` +
      (reset.bytes_pending ? `; the bytes of ${reset.bytes_pending} file(s) will be deleted by housekeeping` : ''),
  };
}
