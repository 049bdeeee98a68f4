/** The event payload every output carries (CONTRACT section 5; seed section 2.2). */
export const EVENT_TYPES = [
  'zone.entry',
  'zone.exit',
  'presence.changed',
  'fall.detected',
  'fall.cleared',
  'anomaly.detected',
  'system.health',
  'system.mode_changed',
  'person.created',
  'person.updated',
  'person.deleted',
  'zone.created',
  'zone.updated',
  'zone.deleted',
  'enrichment.requested',
  'enrichment.completed',
  'enrichment.failed',
  'baseline.recorded',
  'webhook.test',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];
export type Severity = 'info' | 'warning' | 'critical';

export interface EventPayload {
  event_type: EventType;
  timestamp: string;
  zone: string | null;
  person: string | null;
  blob_id: string | null;
  severity: Severity;
  detail: Record<string, unknown>;
}

/** An event after it was appended to the log: `json` is the exact text stored and delivered. */
export interface StoredEvent {
  seq: number;
  payload: EventPayload;
  json: string;
}

export interface EventFields {
  zone?: string | null;
  person?: string | null;
  blob_id?: string | null;
  severity?: Severity;
  detail?: Record<string, unknown>;
}

export function makeEvent(type: EventType, fields: EventFields = {}, timestamp = new Date().toISOString()): EventPayload {
  return {
    event_type: type,
    timestamp,
    zone: fields.zone ?? null,
    person: fields.person ?? null,
    blob_id: fields.blob_id ?? null,
    severity: fields.severity ?? 'info',
    detail: fields.detail ?? {},
  };
}
