import path from 'node:path';
import type { Config } from '../config.js';
import { firstAdminOf } from '../domain/orgs/orgs.js';
import { eraseContact, type Erasure } from '../domain/contacts/erase.js';
import { orgIdsOfBothModes } from '../domain/orgs/sandbox.js';
import { erasedAnswer } from '../http/erasedAnswer.js';
import { backup, restore } from './backup.js';
import { required, type Options } from './operatorError.js';
import { withDb } from './withDb.js';

/** What a command prints: `json` with --json, `text` otherwise. */
export interface CommandResult {
  json: unknown;
  text: string;
}

/**
 * `orgdata contacts erase --org ORG_ID --id CONTACT_ID` (issue 19): see domain/contacts/erase.ts.
 * Both modes: the contact and its traces are erased from the live data and from the sandbox's
 * (test mode), whichever holds them; the operator need not know which.
 */
export async function eraseCommand(config: Config, values: Options): Promise<CommandResult> {
  const orgId = required(values, 'org');
  const contactId = required(values, 'id');
  const erased = await withDb(config, async (db) => {
    await firstAdminOf(db.kysely, orgId); // not_found for an organisation there is not
    const results: Erasure[] = [];
    for (const modeOrgId of await orgIdsOfBothModes(db.kysely, orgId)) {
      // The operator acts as the system: its contact.deleted names no member.
      results.push(
        await eraseContact(
          { db: db.kysely, orgId: modeOrgId, actor: { kind: 'system' }, requestId: 'cli', now: new Date() },
          contactId,
          erasedAnswer(config.docsUrl),
        ),
      );
    }
    const sum = (field: 'events_erased' | 'replays_erased' | 'webhook_answers_erased') => results.reduce((n, r) => n + r[field], 0);
    return {
      ...results[0]!,
      deleted: results.some((r) => r.deleted),
      events_erased: sum('events_erased'),
      replays_erased: sum('replays_erased'),
      webhook_answers_erased: sum('webhook_answers_erased'),
      search_index_merged: results.some((r) => r.search_index_merged),
    };
  });
  const what = erased.deleted ? 'deleted' : 'already deleted; erased what was kept of';
  return {
    json: erased,
    text:
      `${what} ${contactId}: its data removed from ${erased.events_erased} event(s), ${erased.replays_erased} stored replay(s) ` +
      `and ${erased.webhook_answers_erased} webhook answer(s)${erased.search_index_merged ? '; the search index merged' : ''}`,
  };
}

/** `orgdata backup --to DIR`: see backup.ts. */
export async function backupCommand(config: Config, values: Options): Promise<CommandResult> {
  const manifest = await backup(config, path.resolve(required(values, 'to')));
  const { database: d, files: f } = manifest;
  const rows = Object.values(d.tables).reduce((sum, n) => sum + n, 0);
  const files =
    f.store === 'local'
      ? `${f.count} file(s), ${f.bytes} bytes${f.dropped.length ? ` (${f.dropped.length} deleted while it ran, left out)` : ''}`
      : 'no file bytes: they are in the S3 bucket (keep versioning on)';
  const secret =
    manifest.secret_key === 'included'
      ? 'It holds secret.key: keep it as safe as the data.'
      : 'It does not hold the secret key: keep SECRET_KEY, a restore needs it.';
  return {
    json: manifest,
    text: `backed up ${rows} rows in ${Object.keys(d.tables).length} tables and ${files} to ${values.to}. ${secret}`,
  };
}

/** `orgdata restore --from DIR`: see backup.ts. */
export async function restoreCommand(config: Config, values: Options): Promise<CommandResult> {
  const manifest = await restore(config, path.resolve(required(values, 'from')));
  return {
    json: manifest,
    text: `restored the backup of ${manifest.created_at} (orgdata ${manifest.orgdata_version}, ${manifest.files.count} file(s)) into ${config.dataDir}; start the server (it applies any newer migrations)`,
  };
}
