/** The integration settings as data: their shape, defaults, and the pure rules for merging and comparing them. */
import { randomBytes } from 'node:crypto';
import { rotationGraceEnd, validSecrets } from '../crypto.js';
import { EVENT_TYPES, type EventType } from '../events/index.js';

/** The event types a webhook can subscribe to: every type the log records (`webhook.test` is only ever sent by the Test button). */
export const WEBHOOK_EVENT_TYPES = EVENT_TYPES.filter((type) => type !== 'webhook.test');
/**
 * What a webhook receives until its subscription is set: every type except `system.health`, a
 * heartbeat of the whole system that arrives every minute and after each node change.
 */
export const DEFAULT_WEBHOOK_EVENT_TYPES = WEBHOOK_EVENT_TYPES.filter((type) => type !== 'system.health');

/** Whether a webhook with this subscription (null: the default, which also takes types added by later releases) gets events of `type`. */
export function webhookSubscribed(eventTypes: readonly string[] | null, type: string): boolean {
  return (eventTypes ?? DEFAULT_WEBHOOK_EVENT_TYPES).includes(type as EventType);
}

/**
 * How discovery configs reach Home Assistant: `entity`, one retained config per entity (every HA
 * version), or `device`, one per installation with every entity as a component (HA 2024.11+).
 */
export const DISCOVERY_MODES = ['entity', 'device'] as const;

/**
 * The MQTT protocol version: `5` reports what the broker refuses (reason codes); `3.1.1` for brokers
 * that do not speak 5 (Mosquitto before 1.6), where a publish the broker's ACL denies is
 * acknowledged like any other.
 */
export const PROTOCOL_VERSIONS = ['5', '3.1.1'] as const;

/** The integration settings with secrets in clear; never leaves the process. */
export interface IntegrationSettings {
  mqtt: {
    enabled: boolean;
    broker_url: string;
    username: string;
    password: string;
    tls: boolean;
    tls_insecure: boolean;
    ca_cert: string;
    /** PEM: the client certificate (a chain may follow) and its key, for a broker that requires one. */
    client_cert: string;
    /** Unencrypted PKCS #8 PEM (an encrypted key is unlocked when saved); bound to the broker like the password. */
    client_key: string;
    discovery_prefix: string;
    discovery_mode: (typeof DISCOVERY_MODES)[number];
    topic_root: string;
    birth_topic: string;
    protocol_version: (typeof PROTOCOL_VERSIONS)[number];
  };
  webhook: {
    enabled: boolean;
    url: string;
    secret: string;
    /** The event types delivered; null: the default (DEFAULT_WEBHOOK_EVENT_TYPES). */
    event_types: EventType[] | null;
    /** Kept by the store, never set by a save: the secret before the last change, still signing until the time below. */
    previous_secret: string;
    previous_secret_expires_at: string;
    /** Why the service switched the webhook off (the receiver answered 410 Gone); cleared when it is enabled again. */
    disabled_reason: string;
  };
}

type WriteOnlyMqttField = 'password' | 'ca_cert' | 'client_cert' | 'client_key';

/** What a POST may carry: every field optional; write-only secrets: absent keeps, null or "" clears. */
export interface IntegrationPatch {
  mqtt?: Partial<Omit<IntegrationSettings['mqtt'], WriteOnlyMqttField>> & { [field in WriteOnlyMqttField]?: string | null } & {
    /** Unlocks an encrypted `client_key` sent with it; never stored. */
    client_key_passphrase?: string | null;
  };
  webhook?: Partial<Pick<IntegrationSettings['webhook'], 'enabled' | 'url' | 'event_types'>> & { secret?: string | null };
}

export const DEFAULT_SETTINGS: IntegrationSettings = {
  mqtt: {
    enabled: false,
    broker_url: '',
    username: '',
    password: '',
    tls: false,
    tls_insecure: false,
    ca_cert: '',
    client_cert: '',
    client_key: '',
    discovery_prefix: 'homeassistant',
    discovery_mode: 'entity',
    topic_root: 'mothership',
    birth_topic: 'homeassistant/status',
    protocol_version: '5',
  },
  webhook: { enabled: false, url: '', secret: '', event_types: null, previous_secret: '', previous_secret_expires_at: '', disabled_reason: '' },
};

/** Which fields of each group a save changed: what each integration reacts to, and nothing else. */
export interface SettingsChange {
  settings: IntegrationSettings;
  changed: { mqtt: Array<keyof IntegrationSettings['mqtt']>; webhook: Array<keyof IntegrationSettings['webhook']> };
}

export function changedFields(previous: IntegrationSettings, next: IntegrationSettings): SettingsChange['changed'] {
  const diff = <T extends object>(before: T, after: T) =>
    (Object.keys(after) as Array<keyof T>).filter((key) => JSON.stringify(before[key]) !== JSON.stringify(after[key]));
  return { mqtt: diff(previous.mqtt, next.mqtt), webhook: diff(previous.webhook, next.webhook) };
}

/**
 * The secrets deliveries are signed with at `nowMs`: the current one, and during the grace period
 * the one it replaced, so a receiver that still verifies with the old secret loses nothing.
 */
export function webhookSigningSecrets(webhook: IntegrationSettings['webhook'], nowMs: number): string[] {
  return webhook.secret ? validSecrets(webhook.secret, webhook.previous_secret, Date.parse(webhook.previous_secret_expires_at), nowMs) : [];
}

/**
 * Merges a patch into settings with the write-only rules for secrets: null clears a text field to
 * "" and resets the event subscription to its default; what is no setting (a key's passphrase) stays out.
 */
export function applyPatch(current: IntegrationSettings, patch: IntegrationPatch): IntegrationSettings {
  const merge = <T extends object>(base: T, changes: object | undefined): T => {
    const next = { ...base } as Record<string, unknown>;
    for (const [key, value] of Object.entries(changes ?? {})) if (value !== undefined && key in base) next[key] = value ?? (key === 'event_types' ? null : '');
    return next as T;
  };
  return { mqtt: merge(current.mqtt, patch.mqtt), webhook: merge(current.webhook, patch.webhook) };
}

/** A fresh Standard Webhooks secret: `whsec_` + base64 of 32 random bytes (the form `webhookSecretError` accepts). */
export const generateWebhookSecret = () => 'whsec_' + randomBytes(32).toString('base64');

/**
 * The webhook fields a save does not set but follow from it: a replaced secret stays valid for the
 * grace period (a cleared one does not: the user asked for unsigned deliveries), and enabling the
 * webhook clears why it was switched off. The Test button signs with the same result, so it is
 * signed as the deliveries after the save would be.
 */
export function derivedWebhookFields(
  stored: IntegrationSettings['webhook'],
  merged: IntegrationSettings['webhook'],
  nowMs: number,
): IntegrationSettings['webhook'] {
  const next = { ...merged };
  if (merged.secret !== stored.secret) {
    const keepPrevious = Boolean(stored.secret && merged.secret);
    next.previous_secret = keepPrevious ? stored.secret : '';
    next.previous_secret_expires_at = keepPrevious ? rotationGraceEnd(nowMs) : '';
  }
  if (merged.enabled) next.disabled_reason = '';
  return next;
}
