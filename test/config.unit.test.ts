import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, linkSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ConfigError, ENV_SCHEMA, loadConfig, lookalikeVariables, persisted, prepareDataDir, takeUnshownTokenMark, VARIABLES } from '../src/config.js';
import { backoffDelay } from '../src/mqtt/backoff.js';
import { MAX_WEBHOOK_ATTEMPTS, outcomeOf } from '../src/webhook/policy.js';

/** The seed's numbers as configured by default; the rest of the suite runs on fast values, so these are read here. */
describe('seed defaults', () => {
  const config = loadConfig({ ADMIN_TOKEN: 'a-long-enough-admin-token' });

  it('webhook: one retry, 30 s after the first attempt; 15 s per attempt', () => {
    assert.equal(config.webhookRetryDelayMs, 30_000);
    assert.equal(config.webhookTimeoutMs, 15_000, 'Standard Webhooks recommends 15 to 30 s');
    assert.equal(MAX_WEBHOOK_ATTEMPTS, 2);
    assert.equal(outcomeOf({ statusCode: 503, error: null }, 1), 'retry');
    assert.equal(outcomeOf({ statusCode: 503, error: null }, 2), 'failed');
  });

  it('MQTT reconnects after 5 s, doubling to at most 120 s', () => {
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6, 7, 20].map((attempt) => backoffDelay(attempt, config.mqttBackoffInitialMs, config.mqttBackoffMaxMs)),
      [5_000, 10_000, 20_000, 40_000, 80_000, 120_000, 120_000, 120_000],
    );
  });

  it('health every 60 s, away after 60 s, nodes offline after 30 s', () => {
    assert.equal(config.healthIntervalMs, 60_000);
    assert.equal(config.mqttBirthDelayMaxMs, 3_000);
    assert.equal(config.presenceAwayDelayMs, 60_000);
    assert.equal(config.nodeTimeoutMs, 30_000);
  });

  it('rate limit: 60 tokens, refilled at 1 per second', () => {
    assert.equal(config.rateLimit.capacity, 60);
    assert.equal(config.rateLimit.refillPerSecond, 1);
  });

  it('event streams: 500 per instance, 20 per client, 128 KiB queued each', () => {
    assert.deepEqual(config.eventStreams, { max: 500, perClient: 20, bufferBytes: 131_072 });
  });
});

const ADMIN_TOKEN = 'a-long-enough-admin-token';
/** A fresh directory for one test; removed by the returned function. */
function temporaryDir(): { dir: string; remove: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), 'mothership-config-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A bad value of each variable and the message it must get (configuration errors name the variable). */
const REFUSALS: [Record<string, string>, RegExp][] = [
  [{ PORT: 'eighty' }, /^PORT must be a whole number >= 0 and <= 65535, got "eighty"$/],
  [{ PORT: '70000' }, /^PORT must be a whole number >= 0 and <= 65535, got "70000"$/],
  // Below a socket's high-water mark a full stream would wait for a 'drain' that never comes.
  [{ EVENT_STREAM_BUFFER_BYTES: '16384' }, /^EVENT_STREAM_BUFFER_BYTES must be a whole number >= 65536 and <= 1073741824, got "16384"$/],
  [{ EVENT_STREAMS_PER_CLIENT: '0' }, /^EVENT_STREAMS_PER_CLIENT must be a whole number >= 1, got "0"$/],
  [{ DATABASE_URL: 'mysql://root:hunter2@db/x' }, /^DATABASE_URL must be a postgres:\/\/ URL \(unset means SQLite\)$/],
  [{ REDIS_URL: 'http://cache' }, /^REDIS_URL must be a redis:\/\/ URL$/],
  // ioredis sends SELECT NaN for such a path, and the refusal is an uncaught error that kills the process.
  [
    { REDIS_URL: 'redis://:hunter2@cache:6379/abc' },
    /^REDIS_URL must be a redis:\/\/ URL whose path, if any, is a database number \(redis:\/\/host:6379\/0\)$/,
  ],
  [{ REDIS_URL: 'redis://cache/0/x' }, /^REDIS_URL must be a redis:\/\/ URL whose path, if any, is a database number/],
  [{ WORKER: 'maybe' }, /^WORKER must be one of embedded, off, got "maybe"$/],
  [{ MOTHERSHIP_ID: 'Has Spaces' }, /^MOTHERSHIP_ID must be an id matching .*, got "Has Spaces"$/],
  [{ ADMIN_TOKEN: 'short' }, /^ADMIN_TOKEN must be at least 16 characters$/],
  [{ ADMIN_TOKEN: '' }, /^ADMIN_TOKEN must be at least 16 characters$/],
  [{ SECRETS_KEY: Buffer.alloc(16).toString('base64') }, /^SECRETS_KEY must be 32 bytes, base64-encoded$/],
  [{ WEBHOOK_TIMEOUT_MS: '0' }, /^WEBHOOK_TIMEOUT_MS must be a whole number >= 1 and <= 2147483647, got "0"$/],
  [{ MQTT_BACKOFF_INITIAL_MS: '10', MQTT_BACKOFF_MAX_MS: '5' }, /^MQTT_BACKOFF_MAX_MS must be at least MQTT_BACKOFF_INITIAL_MS$/],
  [{ ENRICHMENT_LLM_URL: 'ftp://llm' }, /^ENRICHMENT_LLM_URL must be an http\(s\) URL$/],
  [{ RATE_LIMIT_CAPACITY: '20000000' }, /^RATE_LIMIT_CAPACITY must be a whole number >= 1 and <= 10000000, got "20000000"$/],
  [{ RATE_LIMIT_REFILL_PER_SEC: '0' }, /^RATE_LIMIT_REFILL_PER_SEC must be a number >= 0.001 and <= 10000000, got "0"$/],
  [{ RATE_LIMIT_REFILL_PER_SEC: 'fast' }, /^RATE_LIMIT_REFILL_PER_SEC must be .*, got "fast"$/],
  [
    { RATE_LIMIT_COSTS: 'session=5,settings:10' },
    /^RATE_LIMIT_COSTS must be a list of group=cost entries \(cost 1 or more\) separated by commas, got "session=5,settings:10"$/,
  ],
  [{ RATE_LIMIT_REDIS_FAILURE: 'sometimes' }, /^RATE_LIMIT_REDIS_FAILURE must be one of open, closed, got "sometimes"$/],
  [{ EVENT_RETENTION_DAYS: '-1' }, /^EVENT_RETENTION_DAYS must be a whole number >= 0 and <= 100000, got "-1"$/],
  [{ WEBHOOK_LOG_RETENTION_DAYS: '7.5' }, /^WEBHOOK_LOG_RETENTION_DAYS must be a whole number >= 0 and <= 100000, got "7.5"$/],
  [{ LOG_LEVEL: 'loud' }, /^LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "loud"$/],
  // Values an outside attack found to break the service at run time, or to read as something else.
  [{ PORT: '1e3' }, /^PORT must be a whole number >= 0 and <= 65535, got "1e3"$/],
  [{ PORT: '0x10' }, /^PORT must be a whole number >= 0 and <= 65535, got "0x10"$/],
  [{ NODE_TIMEOUT_MS: '1e400' }, /^NODE_TIMEOUT_MS must be a whole number >= 1 and <= 2147483647, got "1e400"$/],
  [{ WEBHOOK_TIMEOUT_MS: '99999999999' }, /^WEBHOOK_TIMEOUT_MS must be .* <= 2147483647, got "99999999999"$/],
  [{ PRESENCE_AWAY_DELAY_MS: '1e300' }, /^PRESENCE_AWAY_DELAY_MS must be/],
  [{ EVENT_RETENTION_DAYS: '1000000000' }, /^EVENT_RETENTION_DAYS must be a whole number >= 0 and <= 100000/],
  [{ RATE_LIMIT_REFILL_PER_SEC: 'Infinity' }, /^RATE_LIMIT_REFILL_PER_SEC must be .*, got "Infinity"$/],
  [{ RATE_LIMIT_COSTS: 'session=0' }, /^RATE_LIMIT_COSTS must be .*cost 1 or more/],
  [{ TRUST_PROXY: 'garbage/99' }, /^TRUST_PROXY must be a comma-separated list of addresses or CIDRs, got "garbage\/99"$/],
  [{ TRUST_PROXY: '10.0.0.0/33' }, /^TRUST_PROXY must be/],
  [{ DATABASE_URL: 'postgres://u:pw@[bad' }, /^DATABASE_URL must be a postgres:\/\/ URL \(unset means SQLite\)$/],
  [{ CORS_ORIGINS: 'https://ha.example.com/card' }, /^CORS_ORIGINS must be a comma-separated list of origins, .*, got "https:\/\/ha.example.com\/card"$/],
  [{ CORS_ORIGINS: 'https://ha.example.com,*' }, /^CORS_ORIGINS must be/],
  [{ CORS_ORIGINS: 'ha.example.com' }, /^CORS_ORIGINS must be/],
  [{ CORS_ORIGINS: 'https://HA.example.com' }, /^CORS_ORIGINS must be/],
  [{ WEBHOOK_RETRY_DELAY_MS: '-1' }, /^WEBHOOK_RETRY_DELAY_MS must be a whole number >= 0 and <= 2147483647, got "-1"$/],
  [{ MQTT_BACKOFF_INITIAL_MS: '0' }, /^MQTT_BACKOFF_INITIAL_MS must be a whole number >= 1 and <= 2147483647, got "0"$/],
  [{ MQTT_BIRTH_DELAY_MAX_MS: 'soon' }, /^MQTT_BIRTH_DELAY_MAX_MS must be a whole number >= 0 and <= 2147483647, got "soon"$/],
  [{ MQTT_TAKEOVER_SESSION_MS: '0' }, /^MQTT_TAKEOVER_SESSION_MS must be a whole number >= 1 and <= 2147483647, got "0"$/],
  [{ MQTT_TAKEOVER_BACKOFF_MS: '0' }, /^MQTT_TAKEOVER_BACKOFF_MS must be a whole number >= 1 and <= 2147483647, got "0"$/],
  [{ HEALTH_INTERVAL_MS: '0' }, /^HEALTH_INTERVAL_MS must be a whole number >= 1 and <= 2147483647, got "0"$/],
  [{ NODE_LIMIT: '0' }, /^NODE_LIMIT must be a whole number >= 1 and <= 100000, got "0"$/],
  [{ PERSON_LIMIT: '1000001' }, /^PERSON_LIMIT must be a whole number >= 1 and <= 1000000, got "1000001"$/],
  [{ ZONE_LIMIT: '0' }, /^ZONE_LIMIT must be a whole number >= 1 and <= 100000, got "0"$/],
  [{ ENRICHMENT_LEASE_MS: '0' }, /^ENRICHMENT_LEASE_MS must be a whole number >= 1 and <= 2147483647, got "0"$/],
  [{ ENRICHMENT_RETRY_BASE_MS: '-5' }, /^ENRICHMENT_RETRY_BASE_MS must be a whole number >= 0 and <= 2147483647, got "-5"$/],
  [{ EVENT_STREAMS_MAX: '0' }, /^EVENT_STREAMS_MAX must be a whole number >= 1, got "0"$/],
  [{ ENRICHMENT_RETENTION_DAYS: '-1' }, /^ENRICHMENT_RETENTION_DAYS must be a whole number >= 0 and <= 100000, got "-1"$/],
  [{ STORAGE_BUDGET_MB: 'lots' }, /^STORAGE_BUDGET_MB must be a whole number >= 0 and <= 1000000000, got "lots"$/],
  [{ BASELINE_STORAGE_MB: '-1' }, /^BASELINE_STORAGE_MB must be a whole number >= 0 and <= 1000000000, got "-1"$/],
  [{ DATABASE_TIMEOUT_MS: '0' }, /^DATABASE_TIMEOUT_MS must be a whole number >= 1 and <= 2147483647, got "0"$/],
  [{ HTTP_CONNECTIONS_PER_ADDRESS: '-1' }, /^HTTP_CONNECTIONS_PER_ADDRESS must be a whole number >= 0 and <= 1000000, got "-1"$/],
  [{ HTTP_REQUEST_TIMEOUT_MS: '500' }, /^HTTP_REQUEST_TIMEOUT_MS must be a whole number >= 1000 and <= 2147483647, got "500"$/],
  [{ WEBHOOK_PENDING_MAX: '0' }, /^WEBHOOK_PENDING_MAX must be a whole number >= 1 and <= 10000000, got "0"$/],
  [{ LOG_FORMAT: 'xml' }, /^LOG_FORMAT must be one of auto, json, pretty, got "xml"$/],
];

/** Variables with no value the configuration can refuse, and where their mistakes are caught. */
const ANY_VALUE: Record<string, string> = {
  HOST: 'an address this machine lacks is a configuration error at listen (test/faults/readable-errors.test.ts)',
  DATA_DIR: 'a path that cannot be a directory is a configuration error from prepareDataDir (test/faults/readable-errors.test.ts)',
  REDIS_PREFIX: 'any prefix, the empty one included',
  ENRICHMENT_LLM_MODEL: 'any model name: the LLM refuses one it lacks, per job',
  ENRICHMENT_LLM_API_KEY: 'any key: the LLM refuses a wrong one, per job',
};

describe('configuration', () => {
  it('names the variables that look like ours but are not read, with the one probably meant, never a value', () => {
    const env = {
      NODE_TIMEOUT: '60000',
      REDIS_URI: 'redis://secret@host',
      log_level: 'debug',
      DATABSE_URL: 'postgres://u:p@h/d',
      HSOT: '0.0.0.0',
      MOTHERSHIP_PORT: '80',
      MOTHERSHIP_TOKN: 'mst_x',
      MOTHERSHIP_COLOUR: 'red',
      PORT: '8080',
      MOTHERSHIP_ID: 'home',
    };
    assert.equal(
      lookalikeVariables(env),
      "Ignored environment variables that look like Mothership's: DATABSE_URL (did you mean DATABASE_URL?), HSOT (did you mean HOST?), " +
        'MOTHERSHIP_COLOUR (not a Mothership variable), MOTHERSHIP_PORT (did you mean PORT?), MOTHERSHIP_TOKN (did you mean MOTHERSHIP_TOKEN?), ' +
        'NODE_TIMEOUT (did you mean NODE_TIMEOUT_MS?), REDIS_URI (did you mean REDIS_URL?), log_level (did you mean LOG_LEVEL?); docs/configuration.md lists them all',
    );
    // The usual environment of a shell, systemd, npm, CI, PostgreSQL clients and the tests is not ours.
    const usual = [
      'HOME',
      'PATH',
      'USER',
      'SHELL',
      'LANG',
      'TERM',
      'PWD',
      'HOSTNAME',
      'LOGNAME',
      'TZ',
      'NODE_ENV',
      'NODE_OPTIONS',
      'NODE_PATH',
      'NODE_EXTRA_CA_CERTS',
    ]
      .concat(['INVOCATION_ID', 'JOURNAL_STREAM', 'NOTIFY_SOCKET', 'PGHOST', 'PGPORT', 'PGUSER', 'PGDATABASE', 'CI', 'GITHUB_STEP_SUMMARY', 'DEBUG', 'TMPDIR'])
      .concat([
        'npm_config_cache',
        'npm_lifecycle_event',
        'npm_package_name',
        'TEST_REDIS_URL',
        'TEST_PG_ADMIN_URL',
        'OPENAPI_TOOLS_DIR',
        'HTTP_PROXY',
        'NO_PROXY',
      ]);
    assert.equal(lookalikeVariables(Object.fromEntries(usual.map((name) => [name, 'x']))), null);
    // Kubernetes' service links for a Service named mothership are not typos.
    const serviceLinks = {
      MOTHERSHIP_SERVICE_HOST: '10.0.0.1',
      MOTHERSHIP_SERVICE_PORT: '8080',
      MOTHERSHIP_PORT: 'tcp://10.0.0.1:8080',
      MOTHERSHIP_PORT_8080_TCP: 'x',
    };
    assert.equal(lookalikeVariables(serviceLinks), null);
  });

  it('weighs a very long variable name at once: no start-up held for seconds by the look-alike check', () => {
    // Linux allows a name of up to 128 KiB; the edit distance to every known name took seconds per 10,000 characters.
    const started = performance.now();
    assert.equal(lookalikeVariables({ ['A'.repeat(100_000)]: 'x', [`MOTHERSHIP_${'B'.repeat(100_000)}`]: 'x' })?.includes('(not a Mothership variable)'), true);
    assert.ok(performance.now() - started < 1000, `${Math.round(performance.now() - started)} ms`);
  });

  it('rejects a bad value with a message naming the variable and the rule (secrets not repeated)', () => {
    const cases = REFUSALS;
    for (const [env, message] of cases) {
      assert.throws(
        () => loadConfig({ ADMIN_TOKEN, ...env }),
        (error: Error) => error instanceof ConfigError && message.test(error.message),
        JSON.stringify(env),
      );
    }
  });

  it('every variable has a refusal path naming it, or takes any value', () => {
    const refused = new Set(REFUSALS.map(([env]) => Object.keys(env).at(-1)!));
    const untested = VARIABLES.filter((name) => !refused.has(name) && !ANY_VALUE[name]);
    assert.deepEqual(untested, [], 'variables without a refusal case');
    for (const [env, message] of REFUSALS) assert.match(message.source, new RegExp(`^\\^${Object.keys(env).at(-1)} `), JSON.stringify(env));
  });

  it('reads every variable; an empty one counts as unset, except REDIS_PREFIX', () => {
    const config = loadConfig({
      ADMIN_TOKEN,
      PORT: '9000',
      HOST: '',
      DATA_DIR: '/srv/mothership',
      DATABASE_URL: 'postgresql://db/ms',
      REDIS_URL: 'rediss://cache:6380',
      REDIS_PREFIX: '',
      MOTHERSHIP_ID: 'home',
      SECRETS_KEY: Buffer.alloc(32, 7).toString('base64'),
      WORKER: 'off',
      ENRICHMENT_LLM_URL: 'https://llm.example/v1',
      ENRICHMENT_LLM_API_KEY: '',
      RATE_LIMIT_REFILL_PER_SEC: '0.5',
      RATE_LIMIT_COSTS: ' session=5, discovery=20 ,',
      RATE_LIMIT_REDIS_FAILURE: 'closed',
      TRUST_PROXY: '10.0.0.1',
      CORS_ORIGINS: 'https://ha.example.com, http://127.0.0.1:8123',
      EVENT_RETENTION_DAYS: '',
    });
    assert.deepEqual(config.corsOrigins, ['https://ha.example.com', 'http://127.0.0.1:8123']);
    assert.equal(config.port, 9000);
    assert.equal(config.host, '127.0.0.1');
    assert.equal(config.dataDir, '/srv/mothership');
    assert.equal(config.databaseUrl, 'postgresql://db/ms');
    assert.equal(config.redisUrl, 'rediss://cache:6380');
    assert.equal(config.redisPrefix, '');
    assert.deepEqual(config.given, { adminToken: ADMIN_TOKEN, mothershipId: 'home', secretsKey: Buffer.alloc(32, 7) });
    assert.equal(config.worker, 'off');
    assert.deepEqual(config.enrichmentLlm, { url: 'https://llm.example/v1', model: 'gpt-4o-mini', apiKey: null });
    assert.deepEqual(config.rateLimit, { capacity: 60, refillPerSecond: 0.5, failOpen: false, costs: { session: 5, discovery: 20 } });
    assert.equal(config.trustProxy, '10.0.0.1');
    assert.equal(config.eventRetentionDays, 30);
    assert.equal(loadConfig({}).redisPrefix, 'mothership:');
  });

  it('a DATA_DIR that cannot be made is a configuration error, also under /proc (where a recursive mkdir never returns)', () => {
    assert.throws(
      () => prepareDataDir(loadConfig({ ADMIN_TOKEN, DATA_DIR: '/proc/mothership-no-such/data' })),
      (error: Error) =>
        error instanceof ConfigError && /^DATA_DIR \/proc\/mothership-no-such\/data cannot be used as a directory \(ENOENT\)$/.test(error.message),
    );
  });

  it('loadConfig touches nothing: DATA_DIR is created and filled by prepareDataDir', () => {
    const { dir, remove } = temporaryDir();
    try {
      const dataDir = path.join(dir, 'data');
      const config = loadConfig({ DATA_DIR: dataDir });
      assert.equal(existsSync(dataDir), false, 'loadConfig created DATA_DIR');
      assert.deepEqual(config.given, { adminToken: null, mothershipId: null, secretsKey: null });
      const prepared = prepareDataDir(config);
      assert.deepEqual(readdirSync(dataDir).sort(), ['admin-token', 'admin-token.unshown', 'mothership-id', 'secrets-key']);
      assert.equal(statSync(dataDir).mode & 0o777, 0o700);
      assert.equal(statSync(path.join(dataDir, 'admin-token')).mode & 0o777, 0o600);
      assert.equal(prepared.secretsKey.length, 32);
      assert.match(prepared.mothershipId, /^ms-[0-9a-f]{8}$/);
      loadConfig({ DATA_DIR: dataDir });
      assert.deepEqual(readdirSync(dataDir).sort(), ['admin-token', 'admin-token.unshown', 'mothership-id', 'secrets-key'], 'loadConfig wrote into DATA_DIR');
    } finally {
      remove();
    }
  });

  it('generates the admin token and installation id once and keeps them; values the environment sets are not written', () => {
    const { dir, remove } = temporaryDir();
    try {
      const first = prepareDataDir(loadConfig({ DATA_DIR: dir }));
      assert.equal(first.adminTokenUnshown, true);
      assert.equal(prepareDataDir(loadConfig({ DATA_DIR: dir })).adminTokenUnshown, true, 'not shown yet: a start that failed before listening');
      // Of two starts that both found the mark (at the same moment), only the one that takes it shows the token.
      assert.deepEqual(takeUnshownTokenMark(first), { show: true, kept: false });
      assert.deepEqual(takeUnshownTokenMark(first), { show: false, kept: false });
      const second = prepareDataDir(loadConfig({ DATA_DIR: dir }));
      assert.equal(second.adminTokenUnshown, false);
      assert.equal(first.adminToken, second.adminToken);
      assert.equal(first.mothershipId, second.mothershipId);
      assert.deepEqual(first.secretsKey, second.secretsKey);
      assert.ok(first.adminToken.length >= 24);

      const other = temporaryDir();
      try {
        const given = prepareDataDir(
          loadConfig({ DATA_DIR: other.dir, ADMIN_TOKEN, MOTHERSHIP_ID: 'home', SECRETS_KEY: Buffer.alloc(32, 1).toString('base64') }),
        );
        assert.deepEqual([given.adminToken, given.adminTokenUnshown, given.mothershipId], [ADMIN_TOKEN, false, 'home']);
        assert.deepEqual(readdirSync(other.dir), []);
      } finally {
        other.remove();
      }
    } finally {
      remove();
    }
  });

  it('of two starts generating one value at once, both keep the one written first (outside review: each kept its own)', () => {
    const { dir, remove } = temporaryDir();
    try {
      const file = path.join(dir, 'admin-token');
      // The other start writes its value between this one's look for the file and its write.
      const kept = persisted(dir, 'admin-token', () => {
        writeFileSync(file, 'written-by-the-other-start\n');
        return 'generated-here';
      });
      assert.deepEqual(kept, { value: 'written-by-the-other-start', generated: false });
      assert.equal(readFileSync(file, 'utf8'), 'written-by-the-other-start\n');
      assert.deepEqual(readdirSync(dir), ['admin-token'], 'nothing left beside it');
    } finally {
      remove();
    }
  });

  it("a start of the same process id (a container beside another, both pid 1) leaves the other start's value alone", () => {
    const { dir, remove } = temporaryDir();
    try {
      const file = path.join(dir, 'secrets-key');
      // The other start linked its value into place and has not yet removed its temporary name.
      const kept = persisted(dir, 'secrets-key', () => {
        writeFileSync(file, 'written-by-the-other-start\n');
        linkSync(file, `${file}.tmp-${process.pid}`);
        return 'generated-here';
      });
      assert.equal(readFileSync(file, 'utf8'), 'written-by-the-other-start\n');
      assert.deepEqual(kept, { value: 'written-by-the-other-start', generated: false });
    } finally {
      remove();
    }
  });

  it('names the file when a value kept in DATA_DIR is damaged', () => {
    const { dir, remove } = temporaryDir();
    try {
      writeFileSync(path.join(dir, 'mothership-id'), 'Not An Id\n');
      writeFileSync(path.join(dir, 'secrets-key'), 'c2hvcnQ=\n');
      assert.throws(
        () => prepareDataDir(loadConfig({ DATA_DIR: dir, SECRETS_KEY: Buffer.alloc(32).toString('base64') })),
        /MOTHERSHIP_ID must be an id matching .*, got "Not An Id" \(from DATA_DIR\/mothership-id\)$/,
      );
      assert.throws(
        () => prepareDataDir(loadConfig({ DATA_DIR: dir, MOTHERSHIP_ID: 'home' })),
        /SECRETS_KEY must be 32 bytes, base64-encoded \(DATA_DIR\/secrets-key\)$/,
      );
    } finally {
      remove();
    }
  });

  it('refuses an admin-token file shorter than ADMIN_TOKEN may be: an empty one made the empty token the admin token', () => {
    const { dir, remove } = temporaryDir();
    try {
      for (const content of ['', '\n', 'short\n']) {
        writeFileSync(path.join(dir, 'admin-token'), content);
        assert.throws(
          () => prepareDataDir(loadConfig({ DATA_DIR: dir, MOTHERSHIP_ID: 'home', SECRETS_KEY: Buffer.alloc(32).toString('base64') })),
          (error: Error) =>
            error instanceof ConfigError &&
            error.message === 'ADMIN_TOKEN must be at least 16 characters (DATA_DIR/admin-token; remove the file to generate a new one)',
        );
      }
    } finally {
      remove();
    }
  });

  it('a mark it cannot remove (a read-only DATA_DIR) does not stop the start: the token is shown, and said to be shown again (review)', () => {
    const { dir, remove } = temporaryDir();
    try {
      const config = prepareDataDir(loadConfig({ DATA_DIR: dir }));
      // A directory in the mark's place: removing it fails as a read-only file system's EROFS does.
      rmSync(path.join(dir, 'admin-token.unshown'));
      mkdirSync(path.join(dir, 'admin-token.unshown'));
      assert.deepEqual(takeUnshownTokenMark(config), { show: true, kept: true });
    } finally {
      remove();
    }
  });

  it('a value it cannot write (a full disk) is a configuration error and leaves no file behind', () => {
    const { dir, remove } = temporaryDir();
    try {
      // The value is written beside its name first (a name of its own each start; here a chosen one),
      // and /dev/full answers every write with ENOSPC.
      symlinkSync('/dev/full', path.join(dir, 'admin-token.partial'));
      assert.throws(
        () => persisted(dir, 'admin-token', () => 'a token', 'admin-token.partial'),
        (error: Error) => error instanceof ConfigError && error.message === `Cannot write ${dir}/admin-token (DATA_DIR): the disk is full.`,
      );
      assert.deepEqual(readdirSync(dir), [], 'a half-written value was left for the next start to read');
    } finally {
      remove();
    }
  });
});

describe('docs/configuration.md', () => {
  it('states the default of every variable as the schema has it (`unset`: none)', () => {
    const docs = readFileSync(path.resolve(import.meta.dirname, '../../docs/configuration.md'), 'utf8');
    const schemaDefaults = new Map(Object.entries(ENV_SCHEMA.properties).map(([name, schema]) => [name, 'default' in schema ? schema.default : undefined]));
    const checked: string[] = [];
    // A row names one variable or several (`A` / `B`) and gives as many defaults, each `value` or unset.
    for (const [, names, defaults] of docs.matchAll(/^\| (`[A-Z_]+`(?: \/ `[A-Z_]+`)*) \| ([^|]+) \|/gm)) {
      const variables = names!.split(' / ').map((name) => name.slice(1, -1));
      const values = defaults!.trim().split(' / ');
      if (values.length !== variables.length) continue;
      variables.forEach((variable, index) => {
        const stated = /^`([^`]*)`$/.exec(values[index]!)?.[1] ?? (values[index]!.startsWith('unset') ? undefined : null);
        if (stated === null || !schemaDefaults.has(variable)) return; // prose (generated, see below): not a value
        const actual = schemaDefaults.get(variable);
        assert.equal(stated, actual === undefined ? undefined : String(actual), variable);
        checked.push(variable);
      });
    }
    assert.ok(checked.length >= 35, `only ${checked.length} variables checked: did the table change its form?`);
  });
});
