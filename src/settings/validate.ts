import type { FieldError } from '../errors.js';
import { brokerTargetError, normalizedHost, webhookTargetError } from '../outbound.js';
import { checkClientCertificate } from './certificates.js';
import { applyPatch, type IntegrationPatch, type IntegrationSettings } from './model.js';

/** A topic level usable as a prefix: no wildcards, no empty levels, no leading or trailing slash. */
export function topicPrefixError(value: string): string | null {
  if (value === '') return 'must not be empty';
  if (/[+#]/.test(value)) return 'must not contain the MQTT wildcards + or #';
  if (value.startsWith('/') || value.endsWith('/')) return 'must not start or end with /';
  if (value.split('/').some((level) => level === '')) return 'must not contain an empty level (//)';
  // A level of spaces or invisible characters looks empty in every MQTT tool and in Home Assistant.
  if (value.split('/').some((level) => !/[^\s\u200b-\u200d\u2060\ufeff]/.test(level)))
    return 'must not contain a blank level (only spaces or invisible characters)';
  // eslint-disable-next-line no-control-regex -- control characters are exactly what this refuses
  if (/[\u0000-\u001f]/.test(value)) return 'must not contain control characters';
  return null;
}

/** Standard Webhooks secrets: `whsec_` + base64 of 24 to 64 random bytes. */
export function webhookSecretError(value: string): string | null {
  if (!/^whsec_[A-Za-z0-9+/]+={0,2}$/.test(value)) return 'must be whsec_ followed by base64';
  const bytes = Buffer.from(value.slice(6), 'base64').length;
  if (bytes < 24 || bytes > 64) return 'must encode 24 to 64 bytes';
  return null;
}

function caCertError(value: string): string | null {
  return /-----BEGIN CERTIFICATE-----[\s\S]+-----END CERTIFICATE-----/.test(value) ? null : 'must be a PEM certificate (-----BEGIN CERTIFICATE-----)';
}

/** The rules that depend on more than one field or on the URL's parts (docs/api.md, "Integration settings"). */
export function integrationErrors(settings: IntegrationSettings): FieldError[] {
  const errors: FieldError[] = [];
  const check = (path: string, error: string | null) => error && errors.push({ path, message: error });
  const { mqtt, webhook } = settings;
  if (mqtt.enabled && !mqtt.broker_url) errors.push({ path: '/mqtt/broker_url', message: 'is required when MQTT is enabled' });
  if (mqtt.broker_url) check('/mqtt/broker_url', brokerTargetError(mqtt.broker_url));
  check('/mqtt/discovery_prefix', topicPrefixError(mqtt.discovery_prefix));
  check('/mqtt/topic_root', topicPrefixError(mqtt.topic_root));
  check('/mqtt/birth_topic', topicPrefixError(mqtt.birth_topic));
  if (mqtt.ca_cert) check('/mqtt/ca_cert', caCertError(mqtt.ca_cert));
  if (mqtt.client_cert && mqtt.broker_url && !/^(mqtts|wss):/.test(brokerEndpoint(mqtt) ?? 'mqtts:'))
    errors.push({ path: '/mqtt/client_cert', message: 'is only sent over TLS: use mqtts:// or wss://, or turn TLS on' });
  // MQTT 3.1.1 does not allow a password without a username; brokers refuse the connection.
  if (mqtt.password && !mqtt.username) errors.push({ path: '/mqtt/username', message: 'is required when a password is set' });
  if (webhook.enabled && !webhook.url) errors.push({ path: '/webhook/url', message: 'is required when the webhook is enabled' });
  if (webhook.url) check('/webhook/url', webhookTargetError(webhook.url));
  if (webhook.secret) check('/webhook/secret', webhookSecretError(webhook.secret));
  return errors;
}

/**
 * Where the MQTT connection goes, as far as a stored password is concerned: the scheme with TLS
 * applied as the connection applies it, the host as the resolver reads it, and the port. Null when
 * there is no usable URL.
 */
export function brokerEndpoint(mqtt: IntegrationSettings['mqtt']): string | null {
  let url: URL;
  try {
    url = effectiveBrokerUrl(mqtt);
  } catch {
    return null;
  }
  return `${url.protocol}//${normalizedHost(url)}:${url.port}`;
}

/**
 * The broker URL the connection uses: TLS is on for mqtts://, wss:// or the TLS flag, and the flag
 * turns mqtt:// into mqtts:// and ws:// into wss://. Throws on an invalid URL.
 */
export function effectiveBrokerUrl(mqtt: Pick<IntegrationSettings['mqtt'], 'broker_url' | 'tls'>): URL {
  const url = new URL(mqtt.broker_url);
  if (mqtt.tls && url.protocol === 'mqtt:') url.protocol = 'mqtts:';
  if (mqtt.tls && url.protocol === 'ws:') url.protocol = 'wss:';
  return url;
}

/** The origin a webhook delivery goes to (scheme, host as resolved, port); null without a usable URL. */
export function webhookOrigin(url: string): string | null {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${normalizedHost(parsed)}:${parsed.port}`;
  } catch {
    return null;
  }
}

/** The secrets bound to the broker they were saved for, and what each is called in a refusal. */
const BOUND_SECRETS = { password: 'password', client_key: 'client key' } as const;

/**
 * A stored MQTT password or client key is bound to the broker it was saved for: a candidate (to
 * save or to test) that would send it somewhere else, or over weaker TLS, must carry it again.
 * Otherwise anyone who can call the settings API could read the password from a CONNECT packet sent
 * to their own host, or have the service prove its identity to a host of theirs. Weaker TLS: TLS
 * switched off, certificate verification switched off, or a different CA trusted.
 */
export function storedSecretError(
  field: keyof typeof BOUND_SECRETS,
  stored: IntegrationSettings['mqtt'],
  candidate: IntegrationSettings['mqtt'],
  patch: IntegrationPatch['mqtt'],
): FieldError | null {
  const reusesStored = Boolean(candidate[field]) && patch?.[field] === undefined && candidate[field] === stored[field];
  if (!reusesStored) return null;
  const endpoint = brokerEndpoint(candidate);
  const storedEndpoint = brokerEndpoint(stored);
  const moved = endpoint !== storedEndpoint;
  const tlsWeakened =
    endpoint !== null && /^(mqtts|wss):/.test(endpoint) && ((candidate.tls_insecure && !stored.tls_insecure) || candidate.ca_cert !== stored.ca_cert);
  if (!moved && !tlsWeakened) return null;
  const name = BOUND_SECRETS[field];
  return {
    path: `/mqtt/${field}`,
    message: moved
      ? `must be entered again: the stored ${name} is only sent to the broker it was saved for (scheme, host and port)`
      : `must be entered again: the stored ${name} is not sent over weaker TLS (verification off or a different CA) than it was saved with`,
  };
}

/**
 * What a save or a test would use: the patch merged into the stored settings (an encrypted client
 * key unlocked with its passphrase), and every rule it breaks (400 naming each field).
 */
export function candidateSettings(
  stored: IntegrationSettings,
  patch: IntegrationPatch,
  nowMs: number,
): { settings: IntegrationSettings; errors: FieldError[] } {
  const settings = applyPatch(stored, patch);
  const bound = (Object.keys(BOUND_SECRETS) as (keyof typeof BOUND_SECRETS)[]).map((field) => storedSecretError(field, stored.mqtt, settings.mqtt, patch.mqtt));
  const certificate = checkClientCertificate(settings.mqtt, patch.mqtt, nowMs);
  settings.mqtt.client_key = certificate.client_key;
  return { settings, errors: [...integrationErrors(settings), ...certificate.errors, ...bound.filter((error) => error !== null)] };
}
