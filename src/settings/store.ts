import { EventEmitter } from 'node:events';
import type { SecretBox } from '../crypto.js';
import type { Database, Db } from '../db/index.js';
import { PollGate, prepare, putSetting, settingFingerprint, storedSettingFingerprint, type Prepared } from '../db/index.js';
import { invalidFields } from '../errors.js';
import { candidateSettings } from './validate.js';
import { changedFields, DEFAULT_SETTINGS, derivedWebhookFields, type IntegrationPatch, type IntegrationSettings, type SettingsChange } from './model.js';
import { pollEvery, type Poller } from '../ticks.js';

/**
 * Secrets, sealed with the SecretBox: those of release 0.1.0 as `<field>_sealed`, later ones in the
 * group's `sealed` object. Release 0.1.0 reads every `*_sealed` key into its settings and its next
 * save would write a field it does not know back in clear; `sealed` it ignores (and drops when it
 * saves: the client certificate is then asked for again, never written in clear).
 */
const SECRET_FIELDS = { mqtt: ['password', 'ca_cert'], webhook: ['secret', 'previous_secret'] } as const;
const LATER_SECRET_FIELDS: Record<'mqtt' | 'webhook', readonly string[]> = { mqtt: ['client_cert', 'client_key'], webhook: [] };
/** How often each instance looks for a save made by another one (settings reach every instance within about this). */
const WATCH_MS = 1000;
const KEY = 'integration';
/** Where events go: what an append reads of the settings. */
export type WebhookTarget = Pick<IntegrationSettings['webhook'], 'enabled' | 'url' | 'event_types'>;
/** A WebhookTarget as this instance applied it, with its setting's key and the fingerprint of the row it was read from. */
export type WebhookView = WebhookTarget & { key: string; fingerprint: string };

/**
 * The settings table row `integration`: secrets sealed with the SecretBox, everything else as is.
 * Emits `change` with the new settings and the fields that changed, so each integration
 * reconfigures at once, and only for a change of its own fields: after each save here, and (while
 * started) within WATCH_MS of a save by another instance on the same database.
 */
export class SettingsStore extends EventEmitter<{ change: [SettingsChange] }> {
  /** What this process's integrations were last told, and the fingerprint (`settingFingerprint`) of the row it was read from. */
  private applied: { settings: IntegrationSettings; fingerprint: string } | null = null;
  private watch: Poller | null = null;
  /** On SQLite the watch reads the row only after a commit (a save by another process). */
  private readonly gate: PollGate;
  /** Saves of this process in flight: the watch must not report one as another instance's before it is told here. */
  private saving = 0;
  /** The stored row, compiled once (db/prepared.ts): on SQLite `webhookTargetWithin` reads it for every event. */
  private readonly storedRow: Prepared<{ value: string }>;

  constructor(
    private readonly database: Database,
    private readonly box: SecretBox,
  ) {
    super();
    this.gate = new PollGate(database);
    this.storedRow = prepare(database, [], (db) => db.selectFrom('settings').select('value').where('key', '=', KEY));
  }

  /** The current settings, as stored now. */
  async get(): Promise<IntegrationSettings> {
    return (await this.read(this.database.db)).settings;
  }

  /**
   * The settings as this process's integrations were last told them: a save here at once, one on
   * another instance within WATCH_MS. For what may lag that much (the dispatcher's signing secrets,
   * read for every batch it sends); read from the database before `start`.
   */
  current(): Promise<IntegrationSettings> {
    return this.applied ? Promise.resolve(this.applied.settings) : this.get();
  }

  /**
   * Where events go, read inside the event's own transaction: an event accepted after the webhook
   * was enabled (here or on another instance) gets its delivery. Reads the row without opening its
   * secrets: on SQLite it runs for every event (on PostgreSQL when `webhookView` is not of the row).
   */
  async webhookTargetWithin(trx: Db): Promise<WebhookTarget> {
    const [row] = (await this.storedRow.execute(trx, {})).rows;
    const stored = row && (JSON.parse(row.value) as { webhook?: Partial<IntegrationSettings['webhook']> });
    const { enabled, url, event_types } = DEFAULT_SETTINGS.webhook;
    return { enabled: stored?.webhook?.enabled ?? enabled, url: stored?.webhook?.url ?? url, event_types: stored?.webhook?.event_types ?? event_types };
  }

  /**
   * Where events go as `current` has them, with the fingerprint of the row they were read from: an
   * append may use them only while the row is still that one (`isStoredSetting`, checked inside its
   * transaction). Null before `start`.
   */
  webhookView(): WebhookView | null {
    if (!this.applied) return null;
    const { enabled, url, event_types } = this.applied.settings.webhook;
    return { enabled, url, event_types, key: KEY, fingerprint: this.applied.fingerprint };
  }

  /** Remembers what the integrations start with, and watches for saves by other instances. */
  async start(): Promise<IntegrationSettings> {
    const { settings, fingerprint } = await this.read(this.database.db);
    this.applied = { settings, fingerprint };
    this.watch = pollEvery(WATCH_MS, () => this.checkForChange());
    return settings;
  }

  async stop(): Promise<void> {
    await this.watch?.stop();
    this.watch = null;
  }

  /**
   * A save by another instance: the row is not the one applied (its text, as two saves in one
   * millisecond have the same time). Tells the integrations what changed, as a save here would.
   */
  private async checkForChange(): Promise<void> {
    if (!this.gate.due()) return;
    try {
      const before = this.applied;
      const stored = await storedSettingFingerprint(this.database.db, KEY);
      if (!this.applied || this.saving > 0) return;
      if (stored === this.applied.fingerprint) return this.gate.quietUntil(Infinity);
      const { settings, fingerprint } = await this.read(this.database.db);
      // A save here began or ended meanwhile: what was read may be older than it.
      if (this.saving > 0 || this.applied !== before || fingerprint === this.applied.fingerprint) return;
      const previous = this.applied.settings;
      this.applied = { settings, fingerprint };
      const changed = changedFields(previous, settings);
      if (changed.mqtt.length || changed.webhook.length) this.emit('change', { settings, changed });
    } catch {
      // The database is away for a moment: the next check tries again.
    }
  }

  private async read(trx: Db): Promise<{ settings: IntegrationSettings; fingerprint: string }> {
    const [row] = (await this.storedRow.execute(trx, {})).rows;
    const stored = row && (JSON.parse(row.value) as { mqtt?: Record<string, unknown>; webhook?: Record<string, unknown> });
    const settings: IntegrationSettings = { mqtt: { ...DEFAULT_SETTINGS.mqtt }, webhook: { ...DEFAULT_SETTINGS.webhook } };
    for (const group of ['mqtt', 'webhook'] as const) {
      const values = stored?.[group] ?? {};
      const target = settings[group] as Record<string, unknown>;
      const open = (sealed: unknown) => (sealed ? this.box.open(String(sealed)) : '');
      for (const [key, value] of Object.entries(values)) {
        if (key === 'sealed') for (const field of LATER_SECRET_FIELDS[group]) target[field] = open((value as Record<string, unknown>)[field]);
        else if (key.endsWith('_sealed')) target[key.slice(0, -7)] = open(value);
        else if (key in target) target[key] = value;
      }
    }
    return { settings, fingerprint: settingFingerprint(row?.value) };
  }

  /** Validates the merged result (400 naming each field) and saves it. */
  async update(patch: IntegrationPatch): Promise<IntegrationSettings> {
    const next = await this.save((stored) => {
      const { settings: merged, errors } = candidateSettings(stored, patch, Date.now());
      merged.webhook = derivedWebhookFields(stored.webhook, merged.webhook, Date.now());
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
        const { settings: stored } = await this.read(trx);
        const next = change(stored);
        if (!next) return null;
        return { previous: stored, next, fingerprint: await putSetting(trx, KEY, this.seal(next)) };
      })
      .finally(() => this.saving--);
    if (!saved) return null;
    if (this.applied) this.applied = { settings: saved.next, fingerprint: saved.fingerprint };
    this.emit('change', { settings: saved.next, changed: changedFields(saved.previous, saved.next) });
    return saved.next;
  }

  private seal(settings: IntegrationSettings): object {
    const sealGroup = (group: 'mqtt' | 'webhook') => {
      const out: Record<string, unknown> = {};
      const sealed: Record<string, string> = {};
      const seal = (value: unknown) => (value ? this.box.seal(String(value)) : '');
      for (const [key, value] of Object.entries(settings[group])) {
        if ((SECRET_FIELDS[group] as readonly string[]).includes(key)) out[`${key}_sealed`] = seal(value);
        else if (LATER_SECRET_FIELDS[group].includes(key)) sealed[key] = seal(value);
        else out[key] = value;
      }
      return Object.keys(sealed).length ? { ...out, sealed } : out;
    };
    return { mqtt: sealGroup('mqtt'), webhook: sealGroup('webhook') };
  }
}
