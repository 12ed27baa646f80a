import type { Config } from '../config.js';
import { OPERATOR } from '../domain/events/memberEvents.js';
import { setTwoFactorPolicy, twoFactorPolicyOf } from '../domain/identity/twoFactorPolicy.js';
import { required, type Options } from './operatorError.js';
import { withDb } from './withDb.js';

/**
 * `orgdata org policy --org ORG_ID [--require-2fa nobody|admins|everyone]`: the operator's way to
 * the organisation's two-factor policy (`--json`: `{"org_id", "org_name", "require_two_factor",
 * "changed"}`); without --require-2fa it shows the current one. A change is in Activity, by the
 * system.
 */
export async function orgPolicyCommand(config: Config, values: Options): Promise<{ json: unknown; text: string }> {
  const orgId = required(values, 'org');
  const wanted = values['require-2fa'];
  if (wanted === undefined) {
    const policy = await withDb(config, (db) => twoFactorPolicyOf(db.kysely, orgId));
    return { json: policy, text: `${policy.org_name}: two-factor authentication required for ${policy.require_two_factor}` };
  }
  const policy = required(values, 'require-2fa');
  const result = await withDb(config, (db) => setTwoFactorPolicy(db.kysely, orgId, policy, OPERATOR, new Date()));
  const { previous, ...json } = result;
  return {
    json,
    text: result.changed
      ? `${result.org_name}: two-factor authentication now required for ${result.require_two_factor} (was ${previous})`
      : `${result.org_name}: two-factor authentication already required for ${result.require_two_factor}`,
  };
}
