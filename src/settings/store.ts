import { EventEmitter } from 'node:events';
import type { SecretBox } from '../crypto.js';
import type { Database, Db } from '../db/index.js';
import { getSetting, putSetting } from '../db/kv.js';
import { ProblemError } from '../http/problem.js';
import { memo } from '../memo.js';
import { integrationErrors, storedPasswordError } from './validate.js';

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
    discovery_prefix: string;
    topic_root: string;
    birth_topic: string;
  };
  webhook: { enabled: boolean; url: string; secret: string };
}

/** What a POST may carry: every field optional; write-only secrets: absent keeps, null or "" clears. */
export interface IntegrationPatch {
  mqtt?: Partial<Omit<IntegrationSettings['mqtt'], 'password' | 'ca_cert'>> & { password?: string | null; ca_cert?: string | null };
  webhook?: Partial<Omit<IntegrationSettings['webhook'], 'secret'>> & { secret?: string | null };
}

export const DEFAULT_SETTINGS: IntegrationSettings = {
  mqtt: { enabled: false, broker_url: '', username: '', password: '', tls: false, tls_insecure: false, ca_cert: '', discovery_prefix: 'homeassistant', topic_root: 'mothership', birth_topic: 'homeassistant/status' },
  webhook: { enabled: false, url: '', secret: '' },
};

const SECRET_FIELDS = { mqtt: ['password', 'ca_cert'], webhook: ['secret'] } as const;
/** Every event write reads the webhook settings; a save here clears the cache, other processes see it within this time. */
const CACHE_MS = 2000;
const KEY = 'integration';

/** Which fields of each group a save changed: what each integration reacts to, and nothing else. */
export interface SettingsChange {
  settings: IntegrationSettings;
  changed: { mqtt: Array<keyof IntegrationSettings['mqtt']>; webhook: Array<keyof IntegrationSettings['webhook']> };
}

export function changedFields(previous: IntegrationSettings, next: IntegrationSettings): SettingsChange['changed'] {
  const diff = <T extends object>(before: T, after: T) => (Object.keys(after) as Array<keyof T>).filter((key) => before[key] !== after[key]);
  return { mqtt: diff(previous.mqtt, next.mqtt), webhook: diff(previous.webhook, next.webhook) };
}

/** Merges a patch into settings with the write-only rules for secrets. */
export function applyPatch(current: IntegrationSettings, patch: IntegrationPatch): IntegrationSettings {
  const merge = <T extends object>(base: T, changes: object | undefined): T => {
    const next = { ...base } as Record<string, unknown>;
    for (const [key, value] of Object.entries(changes ?? {})) if (value !== undefined) next[key] = value ?? '';
    return next as T;
  };
  return { mqtt: merge(current.mqtt, patch.mqtt), webhook: merge(current.webhook, patch.webhook) };
}

/**
 * The settings table row `integration`: secrets sealed with the SecretBox, everything else as is.
 * Emits `change` after each save with the new settings and the fields that changed, so each
 * integration reconfigures at once, and only for a change of its own fields.
 */
export class SettingsStore extends EventEmitter<{ change: [SettingsChange] }> {
  private readonly cached = memo(CACHE_MS, (trx: Db) => this.read(trx));

  constructor(
    private readonly database: Database,
    private readonly box: SecretBox,
  ) {
    super();
  }

  /** The current settings, cached for CACHE_MS. */
  get(): Promise<IntegrationSettings> {
    return this.cached.get(this.database.db);
  }

  /** The same, from inside a transaction: a cold cache loads through it. */
  getWithin(trx: Db): Promise<IntegrationSettings> {
    return this.cached.get(trx);
  }

  private async read(trx: Db): Promise<IntegrationSettings> {
    const stored = await getSetting<{ mqtt?: Record<string, unknown>; webhook?: Record<string, unknown> }>(trx, KEY);
    const settings: IntegrationSettings = { mqtt: { ...DEFAULT_SETTINGS.mqtt }, webhook: { ...DEFAULT_SETTINGS.webhook } };
    for (const group of ['mqtt', 'webhook'] as const) {
      const values = stored?.[group] ?? {};
      for (const [key, value] of Object.entries(values)) {
        if (key.endsWith('_sealed')) (settings[group] as Record<string, unknown>)[key.slice(0, -7)] = value ? this.box.open(String(value)) : '';
        else if (key in settings[group]) (settings[group] as Record<string, unknown>)[key] = value;
      }
    }
    return settings;
  }

  /** Validates the merged result (400 naming each field) and saves it. */
  async update(patch: IntegrationPatch): Promise<IntegrationSettings> {
    const { previous, next } = await this.database.transaction(async (trx) => {
      const stored = await this.read(trx);
      const merged = applyPatch(stored, patch);
      const errors = integrationErrors(merged);
      const passwordError = storedPasswordError(stored.mqtt, merged.mqtt, patch.mqtt);
      if (passwordError) errors.push(passwordError);
      if (errors.length) throw new ProblemError(400, 'validation_failed', errors.map((error) => `${error.path} ${error.message}`).join('; '), errors);
      await putSetting(trx, KEY, this.seal(merged));
      return { previous: stored, next: merged };
    });
    this.cached.clear();
    this.emit('change', { settings: next, changed: changedFields(previous, next) });
    return next;
  }

  private seal(settings: IntegrationSettings): object {
    const sealGroup = (group: 'mqtt' | 'webhook') => {
      const out: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(settings[group])) {
        if ((SECRET_FIELDS[group] as readonly string[]).includes(key)) out[`${key}_sealed`] = value ? this.box.seal(String(value)) : '';
        else out[key] = value;
      }
      return out;
    };
    return { mqtt: sealGroup('mqtt'), webhook: sealGroup('webhook') };
  }
}
