import type { FastifyInstance } from 'fastify';
import { invalidFields } from '../errors.js';
import { idString, nullableString, withSchemaTypes } from '../http/index.js';
import { TEXT_LIMITS } from '../limits.js';
import { certificateSummary } from './certificates.js';
import {
  DEFAULT_WEBHOOK_EVENT_TYPES,
  derivedWebhookFields,
  DISCOVERY_MODES,
  generateWebhookSecret,
  PROTOCOL_VERSIONS,
  WEBHOOK_EVENT_TYPES,
  webhookSigningSecrets,
  type IntegrationSettings,
} from './model.js';
import type { SettingsStore } from './store.js';
import { brokerEndpoint, candidateSettings, webhookOrigin } from './validate.js';

const text = (maxLength: number) => ({ type: 'string', maxLength }) as const;
const writeOnly = (maxLength: number, description: string) =>
  ({ type: ['string', 'null'], maxLength, description: `${description} Write-only: absent keeps the stored value, null or "" clears it.` }) as const;

const mqttInput = {
  type: 'object',
  additionalProperties: false,
  properties: {
    enabled: { type: 'boolean' },
    broker_url: { ...text(2048), description: 'mqtt://, mqtts://, ws:// or wss:// with host and port' },
    username: text(256),
    password: writeOnly(1024, 'Broker password.'),
    tls: { type: 'boolean' },
    tls_insecure: { type: 'boolean', description: 'Skip verification of the broker certificate' },
    ca_cert: writeOnly(TEXT_LIMITS.pem, 'PEM CA certificate to trust.'),
    client_cert: writeOnly(TEXT_LIMITS.pem, 'PEM client certificate (a chain may follow) for a broker that requires one; needs TLS and client_key.'),
    client_key: writeOnly(
      TEXT_LIMITS.pem,
      'PEM private key of client_cert (encrypted: with client_key_passphrase). Bound to the broker like the password: another host, port or weaker TLS needs it again.',
    ),
    client_key_passphrase: {
      type: ['string', 'null'],
      maxLength: 1024,
      description: 'Unlocks an encrypted client_key sent in the same request; used once, never stored',
    },
    discovery_prefix: text(128),
    discovery_mode: {
      type: 'string',
      enum: DISCOVERY_MODES,
      description:
        'entity: one retained config per entity (every Home Assistant version); device: one per installation (HA 2024.11+). Switching migrates the entities (docs/mqtt.md)',
    },
    topic_root: text(128),
    birth_topic: { ...text(256), description: "Home Assistant's birth message topic (its MQTT setting, default homeassistant/status)" },
    protocol_version: {
      type: 'string',
      enum: PROTOCOL_VERSIONS,
      description: '5 (default) reports publishes and subscriptions the broker refuses; 3.1.1 for brokers without MQTT 5, where refused publishes go unnoticed',
    },
  },
} as const;

const webhookInput = {
  type: 'object',
  additionalProperties: false,
  properties: {
    enabled: { type: 'boolean' },
    url: { ...text(2048), description: 'http:// or https:// URL receiving every event' },
    secret: writeOnly(200, 'Standard Webhooks secret (whsec_ + base64).'),
    event_types: {
      type: ['array', 'null'],
      items: { type: 'string', enum: WEBHOOK_EVENT_TYPES },
      uniqueItems: true,
      maxItems: WEBHOOK_EVENT_TYPES.length,
      description: `The event types delivered (an empty list: none). null: the default, every type except system.health, including types added by later releases`,
    },
  },
} as const;

const statusSchema = (properties: Record<string, unknown>) => ({ type: 'object', properties }) as const;

const viewSchema = {
  type: 'object',
  properties: {
    mqtt: {
      type: 'object',
      properties: {
        enabled: { type: 'boolean' },
        broker_url: { type: 'string' },
        username: { type: 'string' },
        password_set: { type: 'boolean' },
        tls: { type: 'boolean' },
        tls_insecure: { type: 'boolean' },
        ca_cert_set: { type: 'boolean' },
        client_cert_set: { type: 'boolean' },
        client_cert_subject: { ...nullableString, description: "The stored client certificate's subject, e.g. CN=mothership" },
        client_cert_expires_at: { ...nullableString, description: 'When the stored client certificate expires (the broker refuses it from then on)' },
        client_key_set: { type: 'boolean' },
        discovery_prefix: { type: 'string' },
        discovery_mode: { type: 'string', enum: DISCOVERY_MODES },
        birth_topic: { type: 'string' },
        topic_root: { type: 'string' },
        protocol_version: { type: 'string', enum: PROTOCOL_VERSIONS },
        status: statusSchema({
          connected: { type: 'boolean' },
          last_error: nullableString,
          last_connected_at: nullableString,
          next_reconnect_at: nullableString,
          client_id_conflict: {
            type: 'boolean',
            description:
              'Another client keeps connecting with the installation client id (an older release still running?): the service backs off; last_error says more',
          },
          role: { type: 'string', enum: ['leader', 'standby'], description: 'standby: another instance on this database owns the MQTT connection' },
          leader_since: nullableString,
          refused_publishes: {
            type: 'integer',
            description: 'Publishes the broker refused on this connection (MQTT 5 only: a 3.1.1 broker acknowledges them)',
          },
          refused_subscriptions: { type: 'integer', description: 'Subscriptions the broker refused on this connection' },
          last_refusal: {
            type: ['object', 'null'],
            description: 'The last publish or subscription the broker refused, with its MQTT reason (0x87: not authorized by its ACL)',
            properties: {
              kind: { type: 'string', enum: ['publish', 'subscribe'] },
              topic: { type: 'string' },
              reason: { type: 'string' },
              reason_code: { type: 'integer' },
              at: { type: 'string' },
            },
          },
        }),
      },
    },
    webhook: {
      type: 'object',
      properties: {
        enabled: { type: 'boolean' },
        url: { type: 'string' },
        secret_set: { type: 'boolean' },
        event_types: { type: 'array', items: { type: 'string' }, description: 'The event types delivered' },
        event_types_default: { type: 'boolean', description: 'true: the default subscription (every type except system.health), which takes new types too' },
        previous_secret_expires_at: {
          ...nullableString,
          description: 'Until then deliveries also carry a signature with the secret replaced last (rotation grace)',
        },
        status: statusSchema({
          last_delivery_at: nullableString,
          last_status_code: { type: ['integer', 'null'] },
          last_error: nullableString,
          disabled_reason: {
            ...nullableString,
            description: 'Why the service switched the webhook off (the receiver answered 410 Gone); null once enabled again',
          },
        }),
      },
    },
  },
} as const;

/**
 * What these routes ask of the integrations they configure, as shapes: mqtt/ and webhook/ read the
 * settings, so settings/ names neither (app.ts passes MqttIntegration and WebhookService).
 */
export interface IntegrationControls {
  mqtt: {
    status(): {
      enabled: boolean;
      connected: boolean;
      last_error: string | null;
      last_connected_at: string | null;
      next_reconnect_at: string | null;
      client_id_conflict: boolean;
      role: 'leader' | 'standby';
      leader_since: string | null;
      refused_publishes: number;
      refused_subscriptions: number;
      last_refusal: { kind: 'publish' | 'subscribe'; topic: string; reason: string; reason_code: number; at: string } | null;
    };
    test(settings: IntegrationSettings['mqtt'], options: { detailed: boolean }): Promise<{ ok: boolean; latency_ms: number | null; error: string | null }>;
    publishDiscovery(): Promise<{ published: number; refused: number }>;
    cleanupInstallation(installation: string): Promise<number>;
  };
  webhook: {
    /** The last attempt of the webhook saved at `url`. */
    status(url: string): Promise<{ last_delivery_at: string | null; last_status_code: number | null; last_error: string | null }>;
    test(
      candidate: { url: string; secrets: string[] },
      options: { detailed: boolean },
    ): Promise<{ ok: boolean; statusCode: number | null; durationMs: number; error: string | null }>;
  };
}

/**
 * The GET shape: secrets (password, CA and client certificates, client key, webhook secret) reduced
 * to `*_set` flags and the client certificate's subject and expiry, plus live status.
 */
async function view(settings: IntegrationSettings, { mqtt, webhook }: IntegrationControls) {
  const { password, ca_cert, client_cert, client_key, ...mqttRest } = settings.mqtt;
  const certificate = certificateSummary(client_cert);
  const { secret, previous_secret: _previous, previous_secret_expires_at, disabled_reason, event_types, ...webhookRest } = settings.webhook;
  const { enabled: _enabled, ...mqttStatus } = mqtt.status();
  const inGrace = webhookSigningSecrets(settings.webhook, Date.now()).length > 1;
  return {
    mqtt: {
      ...mqttRest,
      password_set: Boolean(password),
      ca_cert_set: Boolean(ca_cert),
      client_cert_set: Boolean(client_cert),
      client_cert_subject: certificate?.subject ?? null,
      client_cert_expires_at: certificate?.expires_at ?? null,
      client_key_set: Boolean(client_key),
      status: mqttStatus,
    },
    webhook: {
      ...webhookRest,
      secret_set: Boolean(secret),
      event_types: event_types ?? DEFAULT_WEBHOOK_EVENT_TYPES,
      event_types_default: event_types === null,
      previous_secret_expires_at: inGrace ? previous_secret_expires_at : null,
      status: { ...(await webhook.status(settings.webhook.url)), disabled_reason: disabled_reason || null },
    },
  };
}

export function settingsRoutes(server: FastifyInstance, deps: { store: SettingsStore } & IntegrationControls): void {
  const app = withSchemaTypes(server);
  const { store, mqtt, webhook } = deps;
  const tags = ['settings'];

  app.get(
    '/api/settings/integration',
    {
      schema: {
        operationId: 'getIntegrationSettings',
        tags,
        summary: 'MQTT and webhook settings with live status (secrets never returned)',
        response: { 200: viewSchema },
      },
    },
    async () => view(await store.get(), deps),
  );

  app.post(
    '/api/settings/integration',
    {
      schema: {
        operationId: 'updateIntegrationSettings',
        tags,
        summary: 'Save MQTT and webhook settings; MQTT reconnects at once when one of its fields changed',
        body: { type: 'object', additionalProperties: false, properties: { mqtt: mqttInput, webhook: webhookInput } },
        response: { 200: viewSchema },
      },
    },
    async (request) => view(await store.update(request.body), deps),
  );

  app.post(
    '/api/settings/integration/test',
    {
      config: { rateLimit: { group: 'integration_test', cost: 10 } },
      schema: {
        operationId: 'testIntegrationSettings',
        tags,
        summary: 'Test candidate settings (not saved): connects to the broker, sends a webhook.test delivery',
        response: {
          200: {
            type: 'object',
            description: 'Only the targets tested',
            required: [],
            properties: {
              mqtt: { type: 'object', properties: { ok: { type: 'boolean' }, latency_ms: { type: ['integer', 'null'] }, error: nullableString } },
              webhook: {
                type: 'object',
                properties: {
                  ok: { type: 'boolean' },
                  status_code: { type: ['integer', 'null'] },
                  latency_ms: { type: ['integer', 'null'] },
                  error: nullableString,
                },
              },
            },
          },
        },
        body: {
          type: 'object',
          additionalProperties: false,
          properties: { target: { type: 'string', enum: ['mqtt', 'webhook', 'all'], default: 'all' }, mqtt: mqttInput, webhook: webhookInput },
        },
      },
    },
    async (request) => {
      const body = request.body ?? {};
      const target = body.target ?? 'all';
      const stored = await store.get();
      const { settings: candidate, errors: all } = candidateSettings(stored, body, Date.now());
      const errors = all.filter((error) => target === 'all' || error.path.startsWith(`/${target}/`));
      if ((target === 'mqtt' || target === 'all') && !candidate.mqtt.broker_url) errors.push({ path: '/mqtt/broker_url', message: 'is required to test MQTT' });
      if ((target === 'webhook' || target === 'all') && !candidate.webhook.url)
        errors.push({ path: '/webhook/url', message: 'is required to test the webhook' });
      const unique = errors.filter((error, index) => errors.findIndex((other) => other.path === error.path) === index);
      if (unique.length) throw invalidFields(unique);

      // Detailed socket errors only for the saved target: for any other host they would tell open
      // ports from closed ones, a port scanner run from the service's network position.
      const result: Record<string, unknown> = {};
      await Promise.all([
        (target === 'mqtt' || target === 'all') &&
          mqtt.test(candidate.mqtt, { detailed: brokerEndpoint(candidate.mqtt) === brokerEndpoint(stored.mqtt) }).then((outcome) => (result.mqtt = outcome)),
        (target === 'webhook' || target === 'all') &&
          webhook
            .test(
              // Signed as the deliveries after saving these values would be: during a rotation's grace, with both secrets.
              { url: candidate.webhook.url, secrets: webhookSigningSecrets(derivedWebhookFields(stored.webhook, candidate.webhook, Date.now()), Date.now()) },
              { detailed: webhookOrigin(candidate.webhook.url) === webhookOrigin(stored.webhook.url) },
            )
            .then(({ ok, statusCode, durationMs, error }) => (result.webhook = { ok, status_code: statusCode, latency_ms: durationMs, error })),
      ]);
      return result;
    },
  );

  app.post(
    '/api/settings/integration/discovery',
    {
      config: { rateLimit: { group: 'discovery', cost: 10 }, problems: ['conflict', 'bad_gateway'] },
      schema: {
        operationId: 'publishDiscovery',
        tags,
        summary:
          'Republish every Home Assistant discovery config (409 when MQTT is not connected; on an instance standing by for the MQTT owner, from a short-lived connection: 502 when the broker cannot be reached)',
        response: {
          200: {
            type: 'object',
            properties: {
              published: { type: 'integer', description: 'Retained config messages the broker accepted (1 in device mode)' },
              refused: {
                type: 'integer',
                description: 'Config messages the broker refused (its ACL): reported with MQTT 5 only, a 3.1.1 broker acknowledges them and drops them',
              },
            },
          },
        },
      },
    },
    async () => mqtt.publishDiscovery(),
  );

  app.post(
    '/api/settings/integration/mqtt-cleanup',
    {
      config: { rateLimit: { group: 'integration_test', cost: 10 }, problems: ['conflict', 'bad_gateway'] },
      schema: {
        operationId: 'cleanupMqttInstallation',
        tags,
        summary: 'Clear the retained configs and state a previous installation id left on the saved broker',
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['installation'],
          properties: { installation: { ...idString, description: 'The previous installation id (the device name in Home Assistant is "Mothership <id>")' } },
        },
        response: {
          200: { type: 'object', properties: { installation: { type: 'string' }, cleared: { type: 'integer', description: 'Retained messages cleared' } } },
        },
      },
    },
    async (request) => {
      const { installation } = request.body;
      return { installation, cleared: await mqtt.cleanupInstallation(installation) };
    },
  );

  app.post(
    '/api/settings/integration/webhook-secret',
    {
      schema: {
        operationId: 'rotateWebhookSecret',
        tags,
        summary: 'Generate and save a new webhook signing secret; returned once. The replaced one keeps signing for 24 h',
        response: {
          200: {
            type: 'object',
            properties: { secret: { type: 'string', description: 'whsec_ + base64; shown this once' }, previous_secret_expires_at: nullableString },
          },
        },
      },
    },
    async () => {
      const secret = generateWebhookSecret();
      const saved = await store.update({ webhook: { secret } });
      return { secret, previous_secret_expires_at: saved.webhook.previous_secret_expires_at || null };
    },
  );
}
