/**
 * Issues an API key (DESIGN §3) straight into the store: how an operator makes the first admin key
 * of a tenant, before any key exists to call `POST /v1/api-keys` with.
 *
 *   npm run api-key -- --tenant acme --principal ops@acme --scopes admin,runs:write,runs:read,approvals:write
 *   npm run api-key -- --operator --principal oncall      (the fleet's dashboard key)
 *
 * An operator key carries the `operator` scope alone (`--scopes operator` is the same): it opens
 * the dashboard at /admin/queues and grants no tenant's records. It sits in the tenant
 * {@link OPERATOR_TENANT} unless `--tenant` names another; no REST route serves it either way.
 * Reads REDIS_URL and LEASEHOLD_KEY_PREFIX like the apps do. Prints the key once (only its SHA-256
 * is stored) and its id.
 *
 * A key made here is made by no key (`created_by` null): it starts a creation chain of its own, so
 * two keys made here are outside each other's chain, and either may decide the approvals of a run
 * the other drives over MCP. It is not held to API_KEYS_PER_TENANT either: the operator can always
 * reach a tenant whose admins have made its fill of keys. Exit codes: 0 issued; 2 bad arguments, nothing issued; 1 a bad setting or
 * no Redis.
 */
import { parseArgs } from 'node:util';
import { loadConfig } from '../libs/config/index.js';
import {
  API_KEY_SCOPES,
  type ApiKeyScope,
  apiKeyScopeSchema,
  OPERATOR_SCOPE,
  principalIdSchema,
  scopesMixOperator,
  tenantIdSchema,
} from '../libs/contracts/index.js';
import { runMain, StartupError } from '../libs/shutdown/index.js';
import { type NewApiKey, RunStore } from '../libs/store/index.js';
import { closeRedis, connectRedis, redisTarget } from '../queues/index.js';

const USAGE =
  'usage: npm run api-key -- --tenant <tenant> --principal <principal> --scopes <scope>[,<scope>…] | --operator --principal <principal>';

/** The tenant an operator key is filed under when none is named. */
const OPERATOR_TENANT = '_fleet';

/** Arguments that cannot make a key: reported in one line, exit code 2. */
class UsageError extends Error {
  override readonly name = 'UsageError';
}

function required(value: string | undefined, name: string): string {
  if (value === undefined || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

function validated(schema: typeof tenantIdSchema, value: string, name: string): string {
  const parsed = schema.safeParse(value);
  if (!parsed.success)
    throw new UsageError(`--${name}: expected ${parsed.error.issues[0]?.message}; got "${value}"`);
  return parsed.data;
}

function parseScopes(value: string): ApiKeyScope[] {
  const names = value
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  if (names.length === 0)
    throw new UsageError(`--scopes: expected one or more of ${API_KEY_SCOPES.join(', ')}; got "${value}"`);
  const scopes = names.map((name) => {
    const parsed = apiKeyScopeSchema.safeParse(name);
    if (!parsed.success)
      throw new UsageError(
        `--scopes: unknown scope "${name}"; expected some of ${API_KEY_SCOPES.join(', ')}`,
      );
    return parsed.data;
  });
  if (scopesMixOperator(scopes))
    throw new UsageError(`--scopes: ${OPERATOR_SCOPE} is a key of its own, never mixed with tenant scopes`);
  return scopes;
}

/** The key to issue, from the command line; a {@link UsageError} names the first bad argument. */
function parseRequest(argv: string[]): NewApiKey | 'help' {
  let values: { tenant?: string; principal?: string; scopes?: string; operator?: boolean; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        tenant: { type: 'string' },
        principal: { type: 'string' },
        scopes: { type: 'string' },
        operator: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (error) {
    throw new UsageError((error as Error).message.split('\n')[0] ?? 'bad arguments');
  }
  if (values.help) return 'help';
  if (values.operator) {
    if (values.scopes !== undefined)
      throw new UsageError('--operator takes no --scopes: it is the operator scope');
    return {
      tenant: validated(tenantIdSchema, values.tenant ?? OPERATOR_TENANT, 'tenant'),
      principal: validated(principalIdSchema, required(values.principal, 'principal'), 'principal'),
      scopes: [OPERATOR_SCOPE],
    };
  }
  return {
    tenant: validated(tenantIdSchema, required(values.tenant, 'tenant'), 'tenant'),
    principal: validated(principalIdSchema, required(values.principal, 'principal'), 'principal'),
    scopes: parseScopes(required(values.scopes, 'scopes')),
  };
}

runMain('api-key', async () => {
  let request: NewApiKey | 'help';
  try {
    request = parseRequest(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(`leasehold api-key: ${error.message} (${USAGE})`);
    process.exitCode = 2;
    return;
  }
  if (request === 'help') {
    process.stdout.write(`${USAGE}\n  scopes: ${API_KEY_SCOPES.join(', ')}\n`);
    return;
  }

  const config = loadConfig();
  const redis = await connectRedis(redisTarget(config.redis), 'producer', 'api-key').catch(
    (error: unknown) => {
      throw new StartupError((error as Error).message);
    },
  );
  try {
    const { key, identity } = await new RunStore(redis, config.redis.keyPrefix).createApiKey(request);
    process.stdout.write(
      [
        `key_id: ${identity.key_id}`,
        `key:    ${key}`,
        `tenant ${identity.tenant}, principal ${identity.principal}, scopes ${identity.scopes.join(' ')}`,
        'made by no key: it heads a creation chain of its own (see the README on MCP approvals).',
        'The key is shown only now: Leasehold stores its SHA-256 alone.',
        '',
      ].join('\n'),
    );
  } finally {
    await closeRedis(redis);
  }
});
