/**
 * Row types of every table, shared by SQLite and PostgreSQL. Timestamps are RFC 3339 UTC strings
 * (`toISOString()`), which sort correctly as text on both databases; JSON documents are stored as text.
 */
import type { ColumnType, Generated } from 'kysely';

/** Which database the service runs on: SQLite embedded (the default) or PostgreSQL (DATABASE_URL). */
export type Dialect = 'sqlite' | 'postgres';

export interface PersonsTable {
  id: string;
  name: string;
  presence: 'home' | 'not_home';
  zone_id: string | null;
  last_seen: string | null;
  /** When the person left their last zone; drives the away delay. */
  left_at: string | null;
  created_at: string;
  /** The name as names compare (presence's `nameKey`); null when a release before 031 wrote or renamed the row. */
  name_key: string | null;
}

export interface ZonesTable {
  id: string;
  name: string;
  created_at: string;
  /** As `PersonsTable.name_key`. */
  name_key: string | null;
}

/** A nullable column an insert may leave out (rows written by releases before it have none). */
type Optional<T> = ColumnType<T | null, T | null | undefined, T | null>;

export interface NodesTable {
  id: string;
  /** Set by an admin (PATCH /api/nodes/{id}); null: unnamed. */
  name: Optional<string>;
  /** The zone an admin placed the node in; may name a zone deleted by a release that did not clear it (read through a join). */
  zone_id: Optional<string>;
  quality: number;
  last_seen: string;
  /** 1 once node.online was announced, 0 once node.offline was (or before the first announcement). */
  online: number;
}

export interface SettingsTable {
  key: string;
  /** JSON text. Secret values are stored encrypted (see src/crypto.ts). */
  value: string;
  updated_at: string;
}

export interface EventsTable {
  seq: Generated<number>;
  event_type: string;
  timestamp: string;
  /** The serialized event payload, exactly as delivered. */
  payload: string;
}

export interface BaselinesTable {
  id: Generated<number>;
  commit_sha: string;
  recorded_at: string;
  /** The record's `timestamp` in UTC (`runAt`): the order of runs, whatever order they were posted in. */
  run_at: string;
  /** The record exactly as sent (raw JSON text). */
  record: string;
}

/**
 * What a baseline row takes beyond its record: its other columns and its entries in the run-order
 * and commit indexes, with the B-tree pages' free space (SQLite, minimal records at random times:
 * 154 bytes beside the record and the commit twice; a commit has at most 40 characters).
 */
export const BASELINE_ROW_OVERHEAD = 320;
/** A baseline row's stored bytes, as SQL over `row` (a table or trigger row name): its record as sent plus BASELINE_ROW_OVERHEAD. */
export const baselineRowBytesSql = (dialect: Dialect, row: string) =>
  `(${dialect === 'postgres' ? `octet_length(${row}.record)` : `length(cast(${row}.record as blob))`} + ${BASELINE_ROW_OVERHEAD})`;

/** The one row (id 1) counting the bytes of every baseline row (baselineRowBytesSql), kept by migration 030's triggers. */
export interface BaselineUsageTable {
  id: number;
  bytes: number | string;
}

export interface WebhookDeliveriesTable {
  id: Generated<number>;
  webhook_id: string;
  event_seq: number | null;
  event_type: string;
  url: string;
  payload: string;
  attempt: number;
  /**
   * One row per attempt: pending -> sending -> delivered | failed | retry_scheduled (a new row is the
   * retry), and retry_scheduled -> retried once that retry has its own outcome (022); pending ->
   * abandoned when the outbox is at its bound (webhook/outbox.ts).
   */
  state: 'pending' | 'sending' | 'delivered' | 'failed' | 'retry_scheduled' | 'retried' | 'abandoned';
  due_at: string;
  status_code: number | null;
  error: string | null;
  duration_ms: number | null;
  created_at: string;
  attempted_at: string | null;
  /** The start of the receiver's answer (WEBHOOK_LOG_BODY_LIMIT); null before the attempt, without an answer, or from a release before 022. */
  response_body: Optional<string>;
}

export interface BotsTable {
  id: string;
  name: string;
  secret_encrypted: string;
  previous_secret_encrypted: string | null;
  previous_secret_expires_at: string | null;
  created_at: string;
}

export interface MatchesTable {
  id: string;
  status: 'scheduled' | 'in_progress' | 'completed' | 'cancelled';
  replay: string | null;
  enrichment_requested_at: string | null;
  enrichment_status: 'queued' | 'running' | 'completed' | 'failed' | null;
  commentary: string | null;
  enrichment_error: string | null;
  enrichment_completed_at: string | null;
  created_at: string;
}

export interface EnrichmentJobsTable {
  id: Generated<number>;
  match_id: string;
  bot_id: string;
  state: 'queued' | 'running' | 'completed' | 'failed';
  attempts: number;
  run_after: string;
  lease_owner: string | null;
  lease_expires_at: string | null;
  enqueued_at: string;
  started_at: string | null;
  finished_at: string | null;
  last_error: string | null;
}

export interface WorkersTable {
  id: string;
  heartbeat_at: string;
}

export interface NoncesTable {
  key: string;
  expires_at: string;
}

export interface AdminSessionsTable {
  /** SHA-256 of the session id in the cookie; the id itself is never stored. */
  id_hash: string;
  created_at: string;
  last_seen_at: string;
  expires_at: string;
  /** Which admin token the session was opened under (an HMAC, not the token); a user's session holds its own check, which no admin token matches. */
  token_check: string;
  /** The dashboard user the session belongs to (021); null: signed in with the admin token. */
  user_id: Optional<string>;
  /** 1: "remember this device", a 30-day session (021); 0 or null: the ordinary one. */
  remembered: Optional<number>;
  /** What signed in, from its User-Agent ("Chrome on Android"), for the list of sessions (021). */
  device: Optional<string>;
}

/** A person who signs in to the dashboard with a password (021). */
export interface UsersTable {
  /** The sign-in name: an id (lowercase letters, digits, _ and -). */
  username: string;
  name: string;
  /** `admin` or `household` (Role in http/auth.ts). */
  role: string;
  /** scrypt, in the PHC string format with its parameters (users/password.ts). */
  password_hash: string;
  created_at: string;
}

/**
 * PostgreSQL: the transaction-level advisory lock every event append holds until its commit, so `seq`
 * order is commit order (events/log.ts; the enrichment batch function of migration 012 takes the same one).
 */
export const EVENT_APPEND_LOCK = 0x6d5f6576; // "m_ev"
/** PostgreSQL: the transaction-level advisory lock a heartbeat registering a new node holds, so NODE_LIMIT is exact. */
export const NODE_CREATE_LOCK = 0x6d5f6e64; // "m_nd"

/** PostgreSQL: the transaction-level advisory lock a person or zone create or rename holds while it checks that the name is not taken. */
export const NAME_CHECK_LOCK = 0x6d5f6e6d; // "m_nm"

/** PostgreSQL: the transaction-level advisory lock a baseline push holds from reading its history to its commit, so each push sees the ones before it. */
export const BASELINE_PUSH_LOCK = 0x6d5f626c; // "m_bl"

/** PostgreSQL: what a log row costs beyond its payload (its other columns, tuple header and index entries), in the storage budget's count (migration 016). */
export const LOG_ROW_OVERHEAD = 200;
/** PostgreSQL's TOAST: a payload beyond about 2 KB is stored out of line in chunks of 1996 bytes, four to an 8 KB page. */
const TOAST_INLINE_MAX = 1900;
const TOAST_CHUNK = 1996;
const TOAST_CHUNK_TAKES = 2048;

/**
 * PostgreSQL: a delivery row beyond its payload and the receiver's answer: its other columns and ten
 * index entries, in the three versions (pending, sending, finished) it has until a vacuum.
 */
export const DELIVERY_ROW_OVERHEAD = 1800;

/**
 * PostgreSQL: what a log row with a payload of `payloadBytes` takes on disk at most (compression only
 * makes it less), as the storage budget counts it; `overhead`: the rest of the row (a delivery's is
 * DELIVERY_ROW_OVERHEAD, plus its answer, counted when it is written).
 */
export const storedRowBytes = (payloadBytes: number, overhead = LOG_ROW_OVERHEAD): number =>
  (payloadBytes <= TOAST_INLINE_MAX ? payloadBytes : Math.ceil(payloadBytes / TOAST_CHUNK) * TOAST_CHUNK_TAKES) + overhead;

/** What a text column takes, inline or in TOAST chunks, in SQL (0 for null): `storedRowBytes` without the overhead. */
const storedTextSql = (column: string) =>
  `coalesce(case when octet_length(${column}) <= ${TOAST_INLINE_MAX} then octet_length(${column}) ` +
  `else ceil(octet_length(${column}) / ${TOAST_CHUNK}.0)::bigint * ${TOAST_CHUNK_TAKES} end, 0)`;
/** The answer a delivery row keeps (what the receiver said, or why there was no answer), in SQL; `row`: `new` or `old` in a row trigger. */
export const deliveryAnswerBytesSql = (row?: string) => {
  const column = (name: string) => (row ? `${row}.${name}` : name);
  return `(${storedTextSql(column('response_body'))} + ${storedTextSql(column('error'))})`;
};
/** `storedRowBytes` of an event row, in SQL, for the triggers (migration 023). */
export const STORED_ROW_BYTES_SQL = `(${storedTextSql('payload')} + ${LOG_ROW_OVERHEAD})`;
/** What a delivery row takes, in SQL, for the triggers (migration 025). */
export const STORED_DELIVERY_BYTES_SQL = `(${storedTextSql('payload')} + ${DELIVERY_ROW_OVERHEAD} + ${deliveryAnswerBytesSql()})`;

export interface ApiTokensTable {
  id: string;
  name: string;
  /** `ingest`, `read` or `admin` (TokenScope in http/auth.ts). */
  scope: string;
  /** SHA-256 (base64url) of the token; the token itself is never stored. */
  token_hash: string;
  created_at: string;
  /** Written at most once a minute per token. */
  last_used_at: string | null;
}

/** Which release (package version) first migrated the database to each schema (newest migration name). */
export interface SchemaReleasesTable {
  schema: string;
  version: string;
  migrated_at: string;
}

/** A topic the MQTT owner published retained (019); `payload_hash` null while its content is in doubt. */
export interface MqttRetainedTable {
  topic: string;
  payload_hash: string | null;
  updated_at: string;
}

export interface Schema {
  persons: PersonsTable;
  zones: ZonesTable;
  nodes: NodesTable;
  settings: SettingsTable;
  events: EventsTable;
  baselines: BaselinesTable;
  baseline_usage: BaselineUsageTable;
  webhook_deliveries: WebhookDeliveriesTable;
  bots: BotsTable;
  matches: MatchesTable;
  enrichment_jobs: EnrichmentJobsTable;
  workers: WorkersTable;
  nonces: NoncesTable;
  admin_sessions: AdminSessionsTable;
  api_tokens: ApiTokensTable;
  schema_releases: SchemaReleasesTable;
  mqtt_retained: MqttRetainedTable;
  users: UsersTable;
}
