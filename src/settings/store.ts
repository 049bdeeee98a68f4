import { EventEmitter } from 'node:events';
import { ROTATION_GRACE_MS, type SecretBox } from '../crypto.js';
import type { Database, Db } from '../db/index.js';
import { getSetting, putSetting, settingUpdatedAt } from '../db/index.js';
import { invalidFields } from '../errors.js';
import { memo } from '../memo.js';
import { integrationErrors, storedPasswordError } from './validate.js';
import { applyPatch, changedFields, DEFAULT_SETTINGS, type IntegrationPatch, type IntegrationSettings, type SettingsChange } from './model.js';

const SECRET_FIELDS = { mqtt: ['password', 'ca_cert'], webhook: ['secret', 'previous_secret'] } as const;
/** Reads outside a transaction are cached this long; a save clears the cache, a change by another instance is seen by the watch. */
const CACHE_MS = 2000;
/** How often each instance looks for a save made by another one (settings reach every instance within about this). */
const WATCH_MS = 1000;
const KEY = 'integration';

/**
 * The fields a save does not set but follow from it: a replaced secret stays valid for the grace
 * period (a cleared one does not: the user asked for unsigned deliveries), and enabling the webhook
 * clears why it was switched off.
 */
function derivedWebhookFields(stored: IntegrationSettings['webhook'], merged: IntegrationSettings['webhook'], nowMs: number): IntegrationSettings['webhook'] {
  const next = { ...merged };
  if (merged.secret !== stored.secret) {
    const keepPrevious = Boolean(stored.secret && merged.secret);
    next.previous_secret = keepPrevious ? stored.secret : '';
    next.previous_secret_expires_at = keepPrevious ? new Date(nowMs + ROTATION_GRACE_MS).toISOString() : '';
  }
  if (merged.enabled) next.disabled_reason = '';
  return next;
}

/**
 * The settings table row `integration`: secrets sealed with the SecretBox, everything else as is.
 * Emits `change` with the new settings and the fields that changed, so each integration
 * reconfigures at once, and only for a change of its own fields: after each save here, and (while
 * started) within WATCH_MS of a save by another instance on the same database.
 */
export class SettingsStore extends EventEmitter<{ change: [SettingsChange] }> {
  private readonly cached = memo(CACHE_MS, (trx: Db) => this.read(trx));
  /** What this process's integrations were last told, and the row's time then. */
  private applied: { settings: IntegrationSettings; updatedAt: string | null } | null = null;
  private watch: NodeJS.Timeout | null = null;
  private checking: Promise<void> | null = null;
  /** Saves of this process in flight: the watch must not report one as another instance's before it is told here. */
  private saving = 0;

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

  /**
   * Where events go, read inside the event's own transaction, never from a cache: an event
   * accepted after the webhook was enabled (here or on another instance) gets its delivery.
   * Reads the row without opening its secrets: it runs for every event.
   */
  async webhookTargetWithin(trx: Db): Promise<Pick<IntegrationSettings['webhook'], 'enabled' | 'url'>> {
    const stored = await getSetting<{ webhook?: { enabled?: boolean; url?: string } }>(trx, KEY);
    return { enabled: stored?.webhook?.enabled ?? DEFAULT_SETTINGS.webhook.enabled, url: stored?.webhook?.url ?? DEFAULT_SETTINGS.webhook.url };
  }

  /** Remembers what the integrations start with, and watches for saves by other instances. */
  async start(): Promise<IntegrationSettings> {
    const updatedAt = await settingUpdatedAt(this.database.db, KEY);
    const settings = await this.read(this.database.db);
    this.applied = { settings, updatedAt };
    this.watch = setInterval(() => void (this.checking ??= this.checkForChange().finally(() => (this.checking = null))), WATCH_MS);
    this.watch.unref();
    return settings;
  }

  async stop(): Promise<void> {
    if (this.watch) clearInterval(this.watch);
    this.watch = null;
    await this.checking;
  }

  /** A save by another instance: the row's time moved. Tells the integrations what changed, as a save here would. */
  private async checkForChange(): Promise<void> {
    try {
      const updatedAt = await settingUpdatedAt(this.database.db, KEY);
      if (!this.applied || this.saving > 0 || updatedAt === this.applied.updatedAt) return;
      const settings = await this.read(this.database.db);
      if (this.saving > 0 || updatedAt === this.applied.updatedAt) return; // a save here began or ended meanwhile
      const previous = this.applied.settings;
      this.applied = { settings, updatedAt };
      this.cached.clear();
      const changed = changedFields(previous, settings);
      if (changed.mqtt.length || changed.webhook.length) this.emit('change', { settings, changed });
    } catch {
      // The database is away for a moment: the next check tries again.
    }
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
    const next = await this.save((stored) => {
      const merged = applyPatch(stored, patch);
      merged.webhook = derivedWebhookFields(stored.webhook, merged.webhook, Date.now());
      const errors = integrationErrors(merged);
      const passwordError = storedPasswordError(stored.mqtt, merged.mqtt, patch.mqtt);
      if (passwordError) errors.push(passwordError);
      if (errors.length) throw invalidFields(errors);
      return merged;
    });
    return next!;
  }

  /**
   * Switches the webhook off because its receiver said it is gone, unless the URL was changed since
   * that attempt (the new URL has not said anything yet). Whether it did.
   */
  async disableWebhook(url: string, reason: string): Promise<boolean> {
    const next = await this.save((stored) =>
      stored.webhook.enabled && stored.webhook.url === url ? { ...stored, webhook: { ...stored.webhook, enabled: false, disabled_reason: reason } } : null,
    );
    return next !== null;
  }

  /** Reads, changes (null: no change) and writes in one transaction, then tells the integrations what changed. */
  private async save(change: (stored: IntegrationSettings) => IntegrationSettings | null): Promise<IntegrationSettings | null> {
    this.saving++;
    const saved = await this.database
      .transaction(async (trx) => {
        const stored = await this.read(trx);
        const next = change(stored);
        if (!next) return null;
        return { previous: stored, next, updatedAt: await putSetting(trx, KEY, this.seal(next)) };
      })
      .finally(() => this.saving--);
    if (!saved) return null;
    if (this.applied) this.applied = { settings: saved.next, updatedAt: saved.updatedAt };
    this.cached.clear();
    this.emit('change', { settings: saved.next, changed: changedFields(saved.previous, saved.next) });
    return saved.next;
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
