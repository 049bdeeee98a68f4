import type { Database, Db } from '../db/index.js';
import { now } from '../db/index.js';
import { uniqueId } from '../db/ids.js';
import { getSetting, putSetting } from '../db/kv.js';
import type { Emit, EventDetails, EventLog, Severity } from '../events/index.js';
import { conflict, notFound } from '../http/problem.js';
import type { PersonsTable } from '../db/schema.js';
import { enterZone, exitZone, isAwayDue, markAway, type PersonState, type Transition, type TransitionEvent } from './transitions.js';

export const MODES = ['home', 'away', 'sleep', 'vacation'] as const;
export type Mode = (typeof MODES)[number];

export interface PersonView {
  id: string;
  name: string;
  presence: 'home' | 'not_home';
  zone: string | null;
  last_seen: string | null;
}

export interface ZoneView {
  id: string;
  name: string;
  count: number;
  occupied: boolean;
  occupants: string[];
}

export interface HealthView {
  node_count: number;
  quality: number | null;
  mode: Mode;
}

export interface FallState {
  state: 'ON' | 'OFF';
  person: string | null;
  zone: string | null;
  timestamp: string | null;
}

export type SensingEvent =
  | { type: 'zone.entry' | 'zone.exit'; person: string; zone: string; blob_id?: string }
  | { type: 'fall.detected'; person?: string; zone?: string; blob_id?: string }
  | { type: 'fall.cleared'; person?: string; zone?: string; blob_id?: string }
  | { type: 'anomaly.detected'; person?: string; zone?: string; blob_id?: string; severity?: Severity; detail?: Record<string, unknown> };

const toPersonView = (row: PersonsTable): PersonView => ({
  id: row.id,
  name: row.name,
  presence: row.presence,
  zone: row.zone_id,
  last_seen: row.last_seen,
});

/** Persons, zones, nodes, system mode, fall state and sensing-event ingest (CONTRACT section 4). */
export class PresenceService {
  constructor(
    private readonly database: Database,
    private readonly events: EventLog,
    private readonly options: { awayDelayMs: number; nodeTimeoutMs: number },
  ) {}

  private get db(): Db {
    return this.database.db;
  }

  // ---- persons ----

  async listPersons(): Promise<PersonView[]> {
    return (await this.db.selectFrom('persons').selectAll().orderBy('id').execute()).map(toPersonView);
  }

  getPerson(id: string): Promise<PersonView> {
    return readPerson(this.db, id);
  }

  createPerson(input: { id?: string; name: string }): Promise<PersonView> {
    return this.events.write(async (trx, emit) => {
      const id = input.id ?? (await uniqueId(trx, 'persons', input.name, 'person'));
      if (await trx.selectFrom('persons').select('id').where('id', '=', id).executeTakeFirst()) throw conflict(`Person "${id}" already exists`);
      const row: PersonsTable = { id, name: input.name, presence: 'not_home', zone_id: null, last_seen: null, left_at: null, created_at: now() };
      await trx.insertInto('persons').values(row).execute();
      emit('person.created', { person: id, detail: { name: input.name } });
      return toPersonView(row);
    });
  }

  updatePerson(id: string, input: { name?: string }): Promise<PersonView> {
    return this.events.write(async (trx, emit) => {
      await readPerson(trx, id);
      if (input.name !== undefined) await trx.updateTable('persons').set({ name: input.name }).where('id', '=', id).execute();
      const person = await readPerson(trx, id);
      emit('person.updated', { person: id, zone: person.zone, detail: { name: person.name } });
      return person;
    });
  }

  deletePerson(id: string): Promise<void> {
    return this.events.write(async (trx, emit) => {
      const person = await readPerson(trx, id);
      await trx.deleteFrom('persons').where('id', '=', id).execute();
      emit('person.deleted', { person: id, zone: person.zone, detail: { name: person.name } });
    });
  }

  // ---- zones ----

  async listZones(): Promise<ZoneView[]> {
    const [zones, persons] = await Promise.all([
      this.db.selectFrom('zones').select(['id', 'name']).orderBy('id').execute(),
      this.db.selectFrom('persons').select(['id', 'zone_id']).where('zone_id', 'is not', null).orderBy('id').execute(),
    ]);
    const occupants = new Map<string, string[]>();
    for (const person of persons) occupants.set(person.zone_id!, [...(occupants.get(person.zone_id!) ?? []), person.id]);
    return zones.map((zone) => zoneView(zone, occupants.get(zone.id) ?? []));
  }

  getZone(id: string): Promise<ZoneView> {
    return readZone(this.db, id);
  }


  createZone(input: { id?: string; name: string }): Promise<ZoneView> {
    return this.events.write(async (trx, emit) => {
      const id = input.id ?? (await uniqueId(trx, 'zones', input.name, 'zone'));
      if (await trx.selectFrom('zones').select('id').where('id', '=', id).executeTakeFirst()) throw conflict(`Zone "${id}" already exists`);
      await trx.insertInto('zones').values({ id, name: input.name, created_at: now() }).execute();
      emit('zone.created', { zone: id, detail: { name: input.name } });
      return zoneView({ id, name: input.name }, []);
    });
  }

  updateZone(id: string, input: { name?: string }): Promise<ZoneView> {
    return this.events.write(async (trx, emit) => {
      await readZone(trx, id);
      if (input.name !== undefined) await trx.updateTable('zones').set({ name: input.name }).where('id', '=', id).execute();
      const zone = await readZone(trx, id);
      emit('zone.updated', { zone: id, detail: { name: zone.name } });
      return zone;
    });
  }

  /** Deleting a zone moves its occupants out of it (they start their away delay). */
  deleteZone(id: string): Promise<void> {
    return this.events.write(async (trx, emit) => {
      const zone = await readZone(trx, id);
      const at = now();
      for (const personId of zone.occupants) {
        const row = await trx.selectFrom('persons').selectAll().where('id', '=', personId).executeTakeFirstOrThrow();
        await this.applyTransition(trx, emit, personId, exitZone(row, id, at, this.options.awayDelayMs), null);
      }
      await trx.deleteFrom('zones').where('id', '=', id).execute();
      emit('zone.deleted', { zone: id, detail: { name: zone.name, occupants: zone.occupants } });
    });
  }

  // ---- sensing events ----

  /** Applies one sensing event; answers the payload of the event that was ingested. */
  ingest(input: SensingEvent) {
    return this.events.write(async (trx, emit) => {
      const blob = input.blob_id ?? null;
      if (input.person !== undefined) await this.requireExists(trx, 'persons', 'Person', input.person);
      if (input.zone !== undefined) await this.requireExists(trx, 'zones', 'Zone', input.zone);
      switch (input.type) {
        case 'zone.entry':
        case 'zone.exit': {
          const row = await this.database.forUpdate(trx.selectFrom('persons').selectAll().where('id', '=', input.person)).executeTakeFirstOrThrow();
          const at = now();
          const transition =
            input.type === 'zone.entry' ? enterZone(row, input.zone, at) : exitZone(row, input.zone, at, this.options.awayDelayMs);
          return this.applyTransition(trx, emit, input.person, transition, blob, input.type);
        }
        case 'fall.detected':
        case 'fall.cleared': {
          const state: FallState =
            input.type === 'fall.detected'
              ? { state: 'ON', person: input.person ?? null, zone: input.zone ?? null, timestamp: now() }
              : { state: 'OFF', person: input.person ?? null, zone: input.zone ?? null, timestamp: now() };
          await putSetting(trx, 'fall.state', state);
          return emit(input.type, {
            person: input.person,
            zone: input.zone,
            blob_id: blob,
            severity: input.type === 'fall.detected' ? 'critical' : 'info',
            detail: { state: state.state },
          });
        }
        case 'anomaly.detected':
          return emit('anomaly.detected', {
            person: input.person,
            zone: input.zone,
            blob_id: blob,
            severity: input.severity ?? 'warning',
            detail: input.detail ?? {},
          });
      }
    });
  }

  private async requireExists(trx: Db, table: 'persons' | 'zones', what: string, id: string): Promise<void> {
    const row = await trx.selectFrom(table).select('id').where('id', '=', id).executeTakeFirst();
    if (!row) throw notFound(what, id);
  }

  /** Writes a person's new state and emits the transition's events; returns the one of type `primary`. */
  private async applyTransition(trx: Db, emit: Emit, personId: string, transition: Transition, blob: string | null, primary?: string) {
    const { next } = transition;
    await trx
      .updateTable('persons')
      .set({ presence: next.presence, zone_id: next.zone_id, left_at: next.left_at, last_seen: next.last_seen })
      .where('id', '=', personId)
      .execute();
    let primaryEvent;
    for (const event of transition.events) {
      const occupancy = event.zone ? await this.occupancyDetail(trx, event.zone) : {};
      // Entry and exit always name their zone (TransitionEvent), so they always get their occupancy.
      const detail = { ...event.detail, ...occupancy } as EventDetails[TransitionEvent['type']];
      const payload = emit(event.type, { person: personId, zone: event.zone, blob_id: blob, detail });
      if (event.type === primary && !primaryEvent) primaryEvent = payload;
    }
    return primaryEvent;
  }

  private async occupancyDetail(trx: Db, zone: string) {
    const occupants = (await trx.selectFrom('persons').select('id').where('zone_id', '=', zone).orderBy('id').execute()).map((row) => row.id);
    return { count: occupants.length, occupants };
  }

  /** Marks every person whose away delay has run out as `not_home`; returns how many changed. */
  async sweepAway(nowMs = Date.now()): Promise<number> {
    const cutoff = new Date(nowMs - this.options.awayDelayMs).toISOString();
    const due = await this.db.selectFrom('persons').select('id').where('presence', '=', 'home').where('zone_id', 'is', null).where('left_at', '<=', cutoff).execute();
    let changed = 0;
    for (const { id } of due) {
      await this.events.write(async (trx, emit) => {
        const row = await this.database.forUpdate(trx.selectFrom('persons').selectAll().where('id', '=', id)).executeTakeFirst();
        if (!row || !isAwayDue(row as PersonState, nowMs, this.options.awayDelayMs)) return;
        await this.applyTransition(trx, emit, id, markAway(row), null);
        changed++;
      });
    }
    return changed;
  }

  // ---- nodes, health, mode, fall ----

  async heartbeat(nodeId: string, quality: number): Promise<void> {
    const at = now();
    await this.database.write((db) =>
      db
        .insertInto('nodes')
        .values({ id: nodeId, quality, last_seen: at })
        .onConflict((oc) => oc.column('id').doUpdateSet({ quality, last_seen: at }))
        .execute(),
    );
  }

  async health(): Promise<HealthView> {
    const since = new Date(Date.now() - this.options.nodeTimeoutMs).toISOString();
    const nodes = await this.db.selectFrom('nodes').select('quality').where('last_seen', '>=', since).execute();
    const quality = nodes.length ? Math.round((nodes.reduce((sum, node) => sum + Number(node.quality), 0) / nodes.length) * 10) / 10 : null;
    return { node_count: nodes.length, quality, mode: await this.mode() };
  }

  mode(): Promise<Mode> {
    return readMode(this.db);
  }

  setMode(mode: Mode, source: 'api' | 'mqtt'): Promise<Mode> {
    return this.events.write(async (trx, emit) => {
      const previous = await readMode(trx);
      if (previous === mode) return mode;
      await putSetting(trx, 'system.mode', mode);
      emit('system.mode_changed', { detail: { from: previous, to: mode, source } });
      return mode;
    });
  }

  async fallState(): Promise<FallState> {
    return (await getSetting<FallState>(this.db, 'fall.state')) ?? { state: 'OFF', person: null, zone: null, timestamp: null };
  }

  async emitHealth(): Promise<HealthView> {
    const health = await this.health();
    await this.events.emit('system.health', { detail: { ...health } });
    return health;
  }
}

function zoneView(zone: { id: string; name: string }, occupants: string[]): ZoneView {
  return { id: zone.id, name: zone.name, count: occupants.length, occupied: occupants.length > 0, occupants };
}

// Readers take the handle to read through: the database, or the transaction a write runs in (a read
// through the database from inside a transaction throws TransactionMisuseError).
async function readPerson(trx: Db, id: string): Promise<PersonView> {
  const row = await trx.selectFrom('persons').selectAll().where('id', '=', id).executeTakeFirst();
  if (!row) throw notFound('Person', id);
  return toPersonView(row);
}

async function readZone(trx: Db, id: string): Promise<ZoneView> {
  const zone = await trx.selectFrom('zones').select(['id', 'name']).where('id', '=', id).executeTakeFirst();
  if (!zone) throw notFound('Zone', id);
  const occupants = await trx.selectFrom('persons').select('id').where('zone_id', '=', id).orderBy('id').execute();
  return zoneView(zone, occupants.map((row) => row.id));
}

async function readMode(trx: Db): Promise<Mode> {
  return (await getSetting<Mode>(trx, 'system.mode')) ?? 'home';
}
