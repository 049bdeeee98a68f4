import { randomUUID } from 'node:crypto';
import type { Database, Db } from '../db/index.js';
import { now, prepare, type Prepared } from '../db/index.js';
import type { AppendHook, StoredEvent } from '../events/index.js';
import type { SettingsStore } from '../settings/index.js';

/**
 * The webhook's transactional outbox: inside an event's transaction, one pending delivery per event
 * while the webhook is on. It is part of writing an event in every process (see
 * `createEventPipeline`), so events a standalone worker writes are delivered like any other; the
 * dispatcher (WebhookService) of whichever process serves sends them.
 */
/** A delivery's `webhook-id` (Standard Webhooks `msg_` form): one per event, kept by its retries and redeliveries. */
export const newWebhookId = (): string => `msg_${randomUUID().replace(/-/g, '')}`;

export class WebhookOutbox implements AppendHook {
  /** Compiled once (db/prepared.ts): it runs for every event while the webhook is on. */
  private readonly insertPending: Prepared<unknown, 'webhookId' | 'seq' | 'type' | 'url' | 'payload' | 'at'>;
  private enqueued = false;

  constructor(
    database: Database,
    private readonly settings: SettingsStore,
  ) {
    this.insertPending = prepare(database, ['webhookId', 'seq', 'type', 'url', 'payload', 'at'], (db, param) =>
      db.insertInto('webhook_deliveries').values({
        webhook_id: param('webhookId'),
        event_seq: param('seq'),
        event_type: param('type'),
        url: param('url'),
        payload: param('payload'),
        attempt: 1,
        state: 'pending',
        due_at: param('at'),
        status_code: null,
        error: null,
        duration_ms: null,
        created_at: param('at'),
        attempted_at: null,
      }),
    );
  }

  async append(trx: Db, events: StoredEvent[]): Promise<void> {
    const webhook = await this.settings.webhookTargetWithin(trx);
    if (!webhook.enabled || !webhook.url) return;
    const at = now();
    for (const event of events) {
      await this.insertPending.execute(trx, {
        webhookId: newWebhookId(),
        seq: event.seq,
        type: event.payload.event_type,
        url: webhook.url,
        payload: event.json,
        at,
      });
    }
    this.enqueued = true;
  }

  appendedInSql(): void {
    this.enqueued = true;
  }

  /** Whether this process added deliveries since the last call: its dispatcher then wakes at once instead of at the next poll. */
  takeEnqueued(): boolean {
    const enqueued = this.enqueued;
    this.enqueued = false;
    return enqueued;
  }
}
