/**
 * A zone's occupant count after the change, carried by every event that concerns a zone's people.
 * The occupant list stays out of events (it grows with the zone): the zone's MQTT occupancy state
 * and `GET /api/zones/{id}` carry it.
 */
export interface ZoneOccupancy {
  count: number;
}
type Presence = 'home' | 'not_home';
type EnrichmentJob = { match_id: string; bot_id: string; job_id: number };
/** A sensing node's last heartbeat: the event payload has no node field, so `node` names it. */
type NodeChange = { node: string; quality: number; last_seen: string };

/**
 * The `detail` of each event type (docs/webhook.md, "Event types"): the one source for the
 * producers (a wrong shape fails to compile), the consumers, and the list of types the API serves.
 */
export interface EventDetails {
  'zone.entry': ZoneOccupancy & { from_zone: string | null; already_inside: boolean };
  'zone.exit': ZoneOccupancy & { reason?: 'entered_other_zone' | 'not_in_zone'; to_zone?: string; ignored?: true };
  /** `from` is `unknown` at a person's first sighting. */
  'presence.changed': Partial<ZoneOccupancy> & { from: Presence | 'unknown'; to: Presence };
  'fall.detected': { state: 'ON' };
  'fall.cleared': { state: 'OFF' };
  /** What the sensing node sent. */
  'anomaly.detected': Record<string, unknown>;
  'system.health': { node_count: number; quality: number | null; mode: string };
  /** A node's first heartbeat, or its first after it went offline. */
  'node.online': NodeChange;
  /** No heartbeat for NODE_TIMEOUT_MS. */
  'node.offline': NodeChange;
  'system.mode_changed': { from: string; to: string; source: 'api' | 'mqtt' };
  'person.created': { name: string };
  'person.updated': { name: string };
  'person.deleted': { name: string };
  'zone.created': { name: string };
  'zone.updated': { name: string };
  /** `count`: how many people the deletion moved out of the zone (each has its own zone.exit before it). */
  'zone.deleted': { name: string; count: number };
  'enrichment.requested': EnrichmentJob;
  'enrichment.completed': EnrichmentJob & { attempts: number };
  'enrichment.failed': EnrichmentJob & { attempts: number; error: string };
  'baseline.recorded': { id: number; commit_sha: string; subject_geomean: number; grep_1000_mean_ms: number; regressed: boolean; regressions: string[] };
  'webhook.test': { message: string };
}

export type EventType = keyof EventDetails;

/** Who causes an event: the dashboard's activity filter groups the types by it. */
export type EventGroup = 'household' | 'changes' | 'system' | 'automation';

/**
 * Every event type with its group, in the order the docs list them: the one runtime list (a type
 * missing here, or not in EventDetails, fails to compile). The API's enums and the dashboard's
 * generated event-types.js come from it.
 */
export const EVENT_GROUPS = {
  'zone.entry': 'household',
  'zone.exit': 'household',
  'presence.changed': 'household',
  'fall.detected': 'household',
  'fall.cleared': 'household',
  'anomaly.detected': 'household',
  'system.health': 'system',
  'node.online': 'system',
  'node.offline': 'system',
  'system.mode_changed': 'changes',
  'person.created': 'changes',
  'person.updated': 'changes',
  'person.deleted': 'changes',
  'zone.created': 'changes',
  'zone.updated': 'changes',
  'zone.deleted': 'changes',
  'enrichment.requested': 'automation',
  'enrichment.completed': 'automation',
  'enrichment.failed': 'automation',
  'baseline.recorded': 'automation',
  'webhook.test': 'automation',
} as const satisfies Record<EventType, EventGroup>;

export const EVENT_TYPES = Object.keys(EVENT_GROUPS) as EventType[];

/** The `default` of a switch that must handle every event (or sensing event) type: one left out fails to compile here, naming it. */
export function unhandled(event: never): never {
  const { event_type, type } = event as { event_type?: string; type?: string };
  throw new Error(`event type ${event_type ?? type} is not handled`);
}

/** The events a household must get most: never refused or abandoned for another writer's bulk (storage budget, webhook outbox). */
export const SAFETY_EVENTS: readonly EventType[] = ['fall.detected', 'fall.cleared'];

export type Severity = 'info' | 'warning' | 'critical';

/** The event payload every output carries; `detail` is the shape of its `event_type`. */
export type EventPayload<T extends EventType = EventType> = {
  [K in T]: {
    event_type: K;
    timestamp: string;
    zone: string | null;
    person: string | null;
    blob_id: string | null;
    severity: Severity;
    detail: EventDetails[K];
  };
}[T];

/** An event about to be appended: `json` is the exact text stored and delivered. */
export interface SerializedEvent {
  payload: EventPayload;
  json: string;
}

/** An event after it was appended to the log. */
export interface StoredEvent extends SerializedEvent {
  seq: number;
}

export interface EventFields<T extends EventType = EventType> {
  zone?: string | null;
  person?: string | null;
  blob_id?: string | null;
  severity?: Severity;
  detail: EventDetails[T];
}

export function makeEvent<T extends EventType>(type: T, fields: EventFields<T>, timestamp = new Date().toISOString()): EventPayload<T> {
  return {
    event_type: type,
    timestamp,
    zone: fields.zone ?? null,
    person: fields.person ?? null,
    blob_id: fields.blob_id ?? null,
    severity: fields.severity ?? 'info',
    detail: fields.detail,
  } as EventPayload<T>;
}
