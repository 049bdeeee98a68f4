import { type Insertable, sql } from 'kysely';
import type { Database, Db } from '../db/index.js';
import { getSetting, insertWithNewId, NAME_CHECK_LOCK, NODE_CREATE_LOCK, now, type PersonsTable, putSetting, type Schema, uniqueId } from '../db/index.js';
import { SAFETY_EVENTS, unhandled, type Emit, type EventDetails, type EventLog, type Severity, type ZoneOccupancy } from '../events/index.js';
import { conflict, DomainError, invalid, notFound } from '../errors.js';
import {
  enterZone,
  exitZone,
  isAwayDue,
  markAway,
  nameKey,
  occupancyAfter,
  type OthersInZones,
  type PersonState,
  type Transition,
  type TransitionEvent,
} from './transitions.js';

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

export interface NodeView {
  id: string;
  name: string | null;
  zone: string | null;
  quality: number;
  last_seen: string;
  online: boolean;
}

/** One page of a list in id order; `next` is the cursor of the following page (null on the last). */
export interface Page<T> {
  items: T[];
  next: string | null;
}
export type NodePage = Page<NodeView>;

/** Where a list page starts (after `cursor`, an id) and how many it holds. */
export interface PageRequest {
  limit: number;
  cursor?: string;
}

/** A create: `duplicate_name` confirms a name another person (zone) already has. */
export interface NamedInput {
  id?: string;
  name: string;
  duplicate_name?: boolean;
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

/** Persons, zones, nodes, system mode, fall state and sensing-event ingest (`POST /api/events`). */
export class PresenceService {
  constructor(
    private readonly database: Database,
    private readonly events: EventLog,
    private readonly options: { awayDelayMs: number; nodeTimeoutMs: number; limits: RecordLimits },
  ) {}

  private get db(): Db {
    return this.database.db;
  }

  // ---- persons ----

  /** Every person, in id order (what MQTT publishes). */
  async listPersons(): Promise<PersonView[]> {
    return (await this.db.selectFrom('persons').selectAll().orderBy('id').execute()).map(toPersonView);
  }

  /** A page of persons in id order, after `cursor` (the previous page's last id). */
  async personsPage(page: PageRequest): Promise<Page<PersonView>> {
    let query = this.db
      .selectFrom('persons')
      .selectAll()
      .orderBy('id')
      .limit(page.limit + 1);
    if (page.cursor !== undefined) query = query.where('id', '>', page.cursor);
    return pageOf((await query.execute()).map(toPersonView), page.limit);
  }

  getPerson(id: string): Promise<PersonView> {
    return readPerson(this.db, id);
  }

  createPerson(input: NamedInput): Promise<PersonView> {
    const newPerson = (id: string): PersonsTable => ({
      id,
      name: input.name,
      presence: 'not_home',
      zone_id: null,
      last_seen: null,
      left_at: null,
      created_at: now(),
      name_key: nameKey(input.name),
    });
    return this.createNamed('persons', input, newPerson, (id) => toPersonView(newPerson(id)));
  }

  updatePerson(id: string, input: { name?: string }): Promise<PersonView> {
    return this.events.write(async (trx, emit) => {
      await readPerson(trx, id);
      if (input.name !== undefined) await rename(trx, 'persons', id, input.name);
      const person = await readPerson(trx, id);
      emit('person.updated', { person: id, zone: person.zone, detail: { name: person.name } });
      return person;
    });
  }

  deletePerson(id: string): Promise<void> {
    return this.events.write(async (trx, emit) => {
      // Locked: a deletion at the same time waits, then finds the person gone (404, one event).
      const person = await requireRow(this.database.forUpdate(trx.selectFrom('persons').select(['name', 'zone_id']).where('id', '=', id)), 'Person', id);
      await trx.deleteFrom('persons').where('id', '=', id).execute();
      emit('person.deleted', { person: id, zone: person.zone_id, detail: { name: person.name } });
    });
  }

  // ---- zones ----

  /** Every zone with its occupants, in id order (what MQTT publishes). */
  async listZones(): Promise<ZoneView[]> {
    const zones: ZoneView[] = [];
    for (let page: Page<ZoneView> | null = null; page === null || page.next !== null;) {
      page = await this.zonesPage({ limit: 1000, cursor: page?.next ?? undefined });
      zones.push(...page.items);
    }
    return zones;
  }

  /** A page of zones in id order, after `cursor`, each with its occupants. */
  async zonesPage(page: PageRequest): Promise<Page<ZoneView>> {
    let query = this.db
      .selectFrom('zones')
      .select(['id', 'name'])
      .orderBy('id')
      .limit(page.limit + 1);
    if (page.cursor !== undefined) query = query.where('id', '>', page.cursor);
    const { items: zones, next } = pageOf(await query.execute(), page.limit);
    // The occupants of this page's zones only: a page costs its zones, not the whole household.
    const persons = zones.length
      ? await this.db
          .selectFrom('persons')
          .select(['id', 'zone_id'])
          .where(
            'zone_id',
            'in',
            zones.map((zone) => zone.id),
          )
          .orderBy('id')
          .execute()
      : [];
    const occupants = new Map<string, string[]>();
    for (const person of persons) occupants.set(person.zone_id!, [...(occupants.get(person.zone_id!) ?? []), person.id]);
    return { items: zones.map((zone) => zoneView(zone, occupants.get(zone.id) ?? [])), next };
  }

  getZone(id: string): Promise<ZoneView> {
    return readZone(this.db, id);
  }

  /** A zone's name, null when there is no such zone: without its occupants, which a building's hall has by the thousand. */
  async zoneName(id: string): Promise<string | null> {
    const zone = await this.db.selectFrom('zones').select('name').where('id', '=', id).executeTakeFirst();
    return zone?.name ?? null;
  }

  createZone(input: NamedInput): Promise<ZoneView> {
    return this.createNamed(
      'zones',
      input,
      (id) => ({ id, name: input.name, created_at: now(), name_key: nameKey(input.name) }),
      (id) => zoneView({ id, name: input.name }, []),
    );
  }

  /**
   * A person's or zone's create: within its limit, an id chosen or derived from the name, a name
   * another already has confirmed, then its `.created` event. On PostgreSQL creates take turns under
   * a lock (two at once would each find the name free, or the last place); SQLite writes one
   * transaction at a time anyway.
   */
  private async createNamed<T extends 'persons' | 'zones', View>(
    table: T,
    input: NamedInput,
    row: (id: string) => Insertable<Schema[T]>,
    view: (id: string) => View,
  ): Promise<View> {
    const kind = KINDS[table];
    keyOf(input.name);
    if (asksName(input)) await keyNames(this.database, table);
    return this.events.write(async (trx, emit) => {
      if (this.database.dialect === 'postgres') await sql`select pg_advisory_xact_lock(${NAME_CHECK_LOCK})`.execute(trx);
      // A chosen id already taken is a conflict first, full or not: a client reads it as "already there".
      if (
        input.id !== undefined &&
        (await trx
          .selectFrom(table as 'persons' | 'zones')
          .select('id')
          .where('id', '=', input.id)
          .executeTakeFirst())
      )
        throw conflict(`${kind.title} "${input.id}" already exists`);
      await refuseBeyondLimit(trx, table, this.options.limits[table], `${kind.title} "${input.id ?? input.name}" is not added`);
      const id = await insertWithNewId(trx, table, input.id, () => uniqueId(trx, table, input.name, kind.what), row);
      if (id === null) throw conflict(`${kind.title} "${input.id}" already exists`);
      await refuseTakenName(trx, table, id, input);
      emit(kind.created, { ...(table === 'persons' ? { person: id } : { zone: id }), detail: { name: input.name } });
      return view(id);
    });
  }

  updateZone(id: string, input: { name?: string }): Promise<ZoneView> {
    return this.events.write(async (trx, emit) => {
      await readZone(trx, id);
      if (input.name !== undefined) await rename(trx, 'zones', id, input.name);
      const zone = await readZone(trx, id);
      emit('zone.updated', { zone: id, detail: { name: zone.name } });
      return zone;
    });
  }

  /** Deleting a zone moves its occupants out of it (they start their away delay). */
  deleteZone(id: string): Promise<void> {
    return this.events.write(async (trx, emit) => {
      // Lock order, as in ingest: the zone, then the persons. An entry waiting for the zone then
      // finds it gone (404); one that locked it first has committed its occupant, moved out here.
      const zone = await requireRow(this.database.forUpdate(trx.selectFrom('zones').select('name').where('id', '=', id)), 'Zone', id);
      const occupants = await this.database.forUpdate(trx.selectFrom('persons').selectAll().where('zone_id', '=', id).orderBy('id')).execute();
      const at = now();
      for (const row of occupants) await this.applyTransition(trx, emit, row.id, exitZone(row, id, at, this.options.awayDelayMs), null);
      await trx.updateTable('nodes').set({ zone_id: null }).where('zone_id', '=', id).execute();
      await trx.deleteFrom('zones').where('id', '=', id).execute();
      emit('zone.deleted', { zone: id, detail: { name: zone.name, count: occupants.length } });
    });
  }

  // ---- sensing events ----

  /** Applies one sensing event; answers the payload of the event that was ingested. `client`: the request's (`EventLog.write`). */
  ingest(input: SensingEvent, client?: string) {
    const writer = client === undefined ? undefined : { client, safety: SAFETY_EVENTS.includes(input.type) };
    return this.events.write(async (trx, emit) => {
      const blob = input.blob_id ?? null;
      // Lock order, as in deleteZone: the zone, then the person. A deletion at the same time comes
      // wholly before this event (the row is gone: 404) or wholly after it (it sees what it did).
      if (input.type !== 'zone.entry' && input.type !== 'zone.exit') {
        if (input.zone !== undefined) await requireRow(this.lockZone(trx, input.zone), 'Zone', input.zone);
        if (input.person !== undefined)
          await requireRow(this.database.forUpdate(trx.selectFrom('persons').select('id').where('id', '=', input.person)), 'Person', input.person);
      }
      switch (input.type) {
        case 'zone.entry':
        case 'zone.exit': {
          const person = await this.lockMove(trx, input.person, input.zone);
          const at = now();
          const transition = input.type === 'zone.entry' ? enterZone(person, input.zone, at) : exitZone(person, input.zone, at, this.options.awayDelayMs);
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
        default:
          return unhandled(input);
      }
    }, writer);
  }

  /**
   * A zone move's locks in one statement, each a round trip every move would wait for: the zone
   * (shared) and then the person (for update), the order deleteZone takes them in. No row: the zone or
   * the person is missing (404, the zone's first, as the locks go).
   */
  private async lockMove(trx: Db, personId: string, zoneId: string): Promise<PersonState> {
    const row = await this.database
      .forUpdate(
        trx
          .selectFrom('persons')
          .selectAll('persons')
          .select((eb) => this.database.forShare(eb.selectFrom('zones').select('zones.id').where('zones.id', '=', zoneId)).as('zone_found'))
          .where('persons.id', '=', personId),
      )
      .executeTakeFirst();
    if (!row || row.zone_found === null) {
      await requireRow(this.lockZone(trx, zoneId), 'Zone', zoneId);
      throw notFound('Person', personId);
    }
    return row;
  }

  private lockZone(trx: Db, id: string) {
    return this.database.forShare(trx.selectFrom('zones').select('id').where('id', '=', id));
  }

  /**
   * Writes a person's new state and emits the transition's events, each with its zone's occupancy:
   * the other persons in it, counted by the update's own statement (after the person's lock, so a
   * move that waited for it counts who entered meanwhile), and the person if the move leaves them there.
   * Returns the event of type `primary`.
   */
  private async applyTransition(trx: Db, emit: Emit, personId: string, transition: Transition, blob: string | null, primary?: string) {
    const { next } = transition;
    const zones = [...new Set(transition.events.flatMap((event) => (event.zone === null ? [] : [event.zone])))];
    const update = trx
      .updateTable('persons')
      .set({ presence: next.presence, zone_id: next.zone_id, left_at: next.left_at, last_seen: next.last_seen })
      .where('id', '=', personId);
    let counted: Record<string, unknown> = {};
    if (zones.length)
      counted = (await update.returning(zones.map((zone, index) => othersInZone(trx, zone, personId).as(`others_${index}`))).executeTakeFirst()) ?? {};
    else await update.execute();
    const others: OthersInZones = new Map(zones.map((zone, index) => [zone, Number(counted[`others_${index}`] ?? 0)]));
    let primaryEvent;
    for (const event of transition.events) {
      // Entry and exit always name their zone (TransitionEvent), so they always get their occupancy.
      const occupancy: Partial<ZoneOccupancy> = event.zone ? { count: occupancyAfter(others, next, event.zone) } : {};
      const detail = { ...event.detail, ...occupancy } as EventDetails[TransitionEvent['type']];
      const payload = emit(event.type, { person: personId, zone: event.zone, blob_id: blob, detail });
      if (event.type === primary && !primaryEvent) primaryEvent = payload;
    }
    return primaryEvent;
  }

  /** Marks every person whose away delay has run out as `not_home`; returns how many changed. */
  async sweepAway(nowMs = Date.now()): Promise<number> {
    const cutoff = new Date(nowMs - this.options.awayDelayMs).toISOString();
    const due = await this.db
      .selectFrom('persons')
      .select('id')
      .where('presence', '=', 'home')
      .where('zone_id', 'is', null)
      .where('left_at', '<=', cutoff)
      .execute();
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

  /** When the away sweep has something to do by the clock alone (ms): the first person home outside every zone comes due; Infinity when none. */
  async nextAwayDue(): Promise<number> {
    const row = await this.db
      .selectFrom('persons')
      .select((eb) => eb.fn.min('left_at').as('left_at'))
      .where('presence', '=', 'home')
      .where('zone_id', 'is', null)
      .executeTakeFirst();
    return row?.left_at ? Date.parse(row.left_at) + this.options.awayDelayMs : Infinity;
  }

  // ---- nodes, health, mode, fall ----

  /**
   * Records a heartbeat. A node that was announced online costs one statement; one that was not (its
   * first heartbeat, or its first after it went offline) is announced with node.online and a
   * system.health carrying the new count, in one transaction. `client`: the request's (`EventLog.write`).
   */
  async heartbeat(nodeId: string, reported: number, client?: string): Promise<void> {
    const writer = client === undefined ? undefined : { client, safety: false };
    const quality = storedQuality(reported);
    const at = now();
    const known = await this.database.write((db) =>
      db.updateTable('nodes').set({ quality, last_seen: at }).where('id', '=', nodeId).where('online', '=', 1).executeTakeFirst(),
    );
    if (Number(known.numUpdatedRows) === 1) return;
    await this.events.write(async (trx, emit) => {
      await this.admitNode(trx, nodeId);
      // Only the heartbeat that flips the row announces it: a concurrent one finds `online` already set.
      const flipped = await trx
        .insertInto('nodes')
        .values({ id: nodeId, quality, last_seen: at, online: 1 })
        .onConflict((oc) => oc.column('id').doUpdateSet({ quality, last_seen: at, online: 1 }).where('nodes.online', '=', 0))
        .returning('id')
        .executeTakeFirst();
      if (!flipped) {
        await trx.updateTable('nodes').set({ quality, last_seen: at }).where('id', '=', nodeId).execute();
        return;
      }
      emit('node.online', { detail: { node: nodeId, quality, last_seen: at } });
      emit('system.health', { detail: await readHealth(trx, this.onlineSince(Date.now())) });
    }, writer);
  }

  /** Announces node.offline, once, for each announced node silent for NODE_TIMEOUT_MS; returns how many. */
  async sweepOfflineNodes(nowMs = Date.now()): Promise<number> {
    const since = this.onlineSince(nowMs);
    const due = await this.db.selectFrom('nodes').select('id').where('online', '=', 1).where('last_seen', '<', since).limit(1).executeTakeFirst();
    if (!due) return 0;
    return this.events.write(async (trx, emit) => {
      // One statement picks and flips the rows: of two instances sweeping at once, each row goes to one.
      const silent = await trx
        .updateTable('nodes')
        .set({ online: 0 })
        .where('online', '=', 1)
        .where('last_seen', '<', since)
        .returning(['id', 'quality', 'last_seen'])
        .execute();
      for (const node of silent) emit('node.offline', { detail: { node: node.id, quality: Number(node.quality), last_seen: node.last_seen } });
      if (silent.length) emit('system.health', { detail: await readHealth(trx, since) });
      return silent.length;
    });
  }

  /** When the node sweep has something to do by the clock alone (ms): the node silent longest times out; Infinity when none is online. */
  async nextNodeTimeout(): Promise<number> {
    const row = await this.db
      .selectFrom('nodes')
      .select((eb) => eb.fn.min('last_seen').as('last_seen'))
      .where('online', '=', 1)
      .executeTakeFirst();
    return row?.last_seen ? Date.parse(row.last_seen) + this.options.nodeTimeoutMs : Infinity;
  }

  /**
   * Refuses a heartbeat that would register a node beyond NODE_LIMIT (nodes register themselves on
   * their first heartbeat, so one ingest token could otherwise create any number). On PostgreSQL the
   * registrations take turns under a lock, so concurrent ones never pass the limit together.
   */
  private async admitNode(trx: Db, nodeId: string): Promise<void> {
    const known = () => trx.selectFrom('nodes').select('id').where('id', '=', nodeId).executeTakeFirst();
    if (await known()) return;
    if (this.database.dialect === 'postgres') {
      await sql`select pg_advisory_xact_lock(${NODE_CREATE_LOCK})`.execute(trx);
      if (await known()) return; // registered by a heartbeat that held the lock before this one
    }
    await refuseBeyondLimit(trx, 'nodes', this.options.limits.nodes, `Node "${nodeId}" is not registered`);
  }

  /** A page of nodes in id order, after `cursor` (the previous page's last id). */
  async listNodes(page: PageRequest): Promise<NodePage> {
    let query = this.nodeRows(this.db)
      .orderBy('nodes.id')
      .limit(page.limit + 1);
    if (page.cursor !== undefined) query = query.where('nodes.id', '>', page.cursor);
    const since = this.onlineSince(Date.now());
    return pageOf(
      (await query.execute()).map((row) => nodeView(row, since)),
      page.limit,
    );
  }

  getNode(id: string): Promise<NodeView> {
    return this.readNode(this.db, id);
  }

  /** Renames a node or places it in a zone (`zone: null` takes it out of its zone). */
  updateNode(id: string, input: { name?: string; zone?: string | null }): Promise<NodeView> {
    return this.database.transaction(async (trx) => {
      await requireRow(this.database.forUpdate(trx.selectFrom('nodes').select('id').where('id', '=', id)), 'Node', id);
      // The zone is locked as an event locks it: a deletion at the same time comes wholly before (404) or after (it clears the zone).
      if (input.zone) await requireRow(this.database.forShare(trx.selectFrom('zones').select('id').where('id', '=', input.zone)), 'Zone', input.zone);
      if (input.name !== undefined) keyOf(input.name);
      const changes = { ...(input.name === undefined ? {} : { name: input.name }), ...(input.zone === undefined ? {} : { zone_id: input.zone }) };
      if (Object.keys(changes).length) await trx.updateTable('nodes').set(changes).where('id', '=', id).execute();
      return this.readNode(trx, id);
    });
  }

  /**
   * Forgets a node; a system.health with the new count follows when it was online. A node that
   * sends another heartbeat registers again (within NODE_LIMIT).
   */
  deleteNode(id: string): Promise<void> {
    return this.events.write(async (trx, emit) => {
      const node = await requireRow(this.database.forUpdate(trx.selectFrom('nodes').select('online').where('id', '=', id)), 'Node', id);
      await trx.deleteFrom('nodes').where('id', '=', id).execute();
      if (node.online) emit('system.health', { detail: await readHealth(trx, this.onlineSince(Date.now())) });
    });
  }

  private nodeRows(trx: Db) {
    return trx
      .selectFrom('nodes')
      .leftJoin('zones', 'zones.id', 'nodes.zone_id')
      .select(['nodes.id', 'nodes.name', 'zones.id as zone', 'nodes.quality', 'nodes.last_seen']);
  }

  private async readNode(trx: Db, id: string): Promise<NodeView> {
    return nodeView(await requireRow(this.nodeRows(trx).where('nodes.id', '=', id), 'Node', id), this.onlineSince(Date.now()));
  }

  /** A node is online while its last heartbeat is at most NODE_TIMEOUT_MS old. */
  private onlineSince(nowMs: number): string {
    return new Date(nowMs - this.options.nodeTimeoutMs).toISOString();
  }

  health(): Promise<HealthView> {
    return readHealth(this.db, this.onlineSince(Date.now()));
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

/**
 * A quality (0..100 %) as stored: rounded to 0.01, which both databases hold exactly alike (a
 * PostgreSQL `real` keeps about 7 digits and nothing below 1.4e-45; SQLite's is a double), and
 * never -0 (SQLite would keep 0, PostgreSQL -0).
 */
const storedQuality = (quality: number): number => Math.round(quality * 100) / 100 + 0;

function nodeView(row: { id: string; name: string | null; zone: string | null; quality: number; last_seen: string }, onlineSince: string): NodeView {
  return { id: row.id, name: row.name, zone: row.zone, quality: Number(row.quality), last_seen: row.last_seen, online: row.last_seen >= onlineSince };
}

/** `rows` read with a limit one above the page's: the page, and the cursor of the next when that extra row came. */
function pageOf<T extends { id: string }>(rows: T[], limit: number): Page<T> {
  const items = rows.slice(0, limit);
  return { items, next: rows.length > limit ? items.at(-1)!.id : null };
}

/** The most rows of each kind an installation keeps (NODE_LIMIT, PERSON_LIMIT, ZONE_LIMIT). */
export type RecordLimits = Record<'nodes' | 'persons' | 'zones', number>;

const KINDS = {
  nodes: {
    what: 'node',
    title: 'Node',
    setting: 'NODE_LIMIT',
    remedy: "Delete nodes no longer in use (DELETE /api/nodes/{id}, or the dashboard's Nodes page)",
  },
  persons: {
    what: 'person',
    title: 'Person',
    setting: 'PERSON_LIMIT',
    remedy: "Delete people no longer in use (DELETE /api/persons/{id}, or the dashboard's People page)",
    created: 'person.created',
  },
  zones: {
    what: 'zone',
    title: 'Zone',
    setting: 'ZONE_LIMIT',
    remedy: "Delete zones no longer in use (DELETE /api/zones/{id}, or Delete on the zone's page in the dashboard)",
    created: 'zone.created',
  },
} as const;

/**
 * A 409 `<kind>_limit_reached` when `table` already holds `limit` rows: a low-privilege credential
 * (a household session, an ingest token) could otherwise add rows until every sync, page and
 * discovery republish carried them. The caller holds what makes the count exact (a lock on PostgreSQL).
 */
async function refuseBeyondLimit(trx: Db, table: keyof RecordLimits, limit: number, subject: string): Promise<void> {
  const { count } = await trx
    .selectFrom(table)
    .select((eb) => eb.fn.countAll<string | number>().as('count'))
    .executeTakeFirstOrThrow();
  if (Number(count) < limit) return;
  const kind = KINDS[table];
  throw new DomainError(
    `${kind.what}_limit_reached`,
    `${subject}: this installation has ${limit} ${table === 'persons' ? 'people' : table}, the most ${kind.setting} allows. ${kind.remedy}, or raise ${kind.setting}.`,
  );
}

/**
 * A name's key; a name that shows nothing has none, and is refused as the schema's pattern refuses a
 * blank one (the pattern spells out the Basic Multilingual Plane only: an invisible character above
 * it passed).
 */
function keyOf(name: string): string {
  const key = nameKey(name);
  if (key === '') throw invalid('/name', 'must not be blank');
  return key;
}

async function rename(trx: Db, table: 'persons' | 'zones', id: string, name: string): Promise<void> {
  const key = keyOf(name);
  const row = () => trx.updateTable(table as 'persons').where('id', '=', id);
  await row().set({ name }).execute();
  // Apart: 031's trigger clears the key of a rename that leaves it as it was (the previous release's
  // way), so "Bob" to "BOB" in one statement left the row to be keyed again.
  await row().set({ name_key: key }).execute();
}

/**
 * The version of the keys nameKey makes: of its rule, and of the Unicode tables of the Node.js that
 * runs it (what is invisible, what normalises to what). Keys another version made are set to null
 * once, for keyNames to make them again: a key that no longer says what a name is would let a taken
 * name through.
 */
const NAME_KEY_VERSION = `2, Unicode ${process.versions.unicode}`;
const keyedByThisVersion = new WeakSet<Database>();

async function forgetKeysOfAnotherVersion(database: Database): Promise<void> {
  await database.transaction(async (trx) => {
    if (database.dialect === 'postgres') await sql`select pg_advisory_xact_lock(${NAME_CHECK_LOCK})`.execute(trx);
    if ((await getSetting<string>(trx, 'names.key_version')) === NAME_KEY_VERSION) return;
    for (const table of ['persons', 'zones'] as const)
      await trx
        .updateTable(table as 'persons')
        .set({ name_key: null })
        .where('name_key', 'is not', null)
        .execute();
    await putSetting(trx, 'names.key_version', NAME_KEY_VERSION);
  });
  keyedByThisVersion.add(database);
}

/** Rows a statement keys at once: a `select` each in a `union all`, within SQLite's 500 terms. */
const KEYS_PER_STATEMENT = 250;

/**
 * Stores the name key of the rows of `table` that have none (migration 031: rows written before it,
 * or by the previous release beside this one), in a transaction of its own, so that the checks after
 * it read only their name's rows whatever they answer. On PostgreSQL under the creates' lock, the rows
 * read again under it: creates at once after the upgrade each keyed every row, one waiting on the
 * other's row locks past the statement timeout. The name in the condition leaves a row renamed
 * meanwhile with the rename's own key.
 */
async function keyNames(database: Database, table: 'persons' | 'zones'): Promise<void> {
  if (!keyedByThisVersion.has(database)) await forgetKeysOfAnotherVersion(database);
  const unkeyed = (db: Db) => db.selectFrom(table).select(['id', 'name']).where('name_key', 'is', null);
  if (!(await unkeyed(database.db).limit(1).executeTakeFirst())) return;
  await database.transaction(async (trx) => {
    if (database.dialect === 'postgres') await sql`select pg_advisory_xact_lock(${NAME_CHECK_LOCK})`.execute(trx);
    const rows = await unkeyed(trx).execute();
    for (let start = 0; start < rows.length; start += KEYS_PER_STATEMENT) {
      const keyed = sql.join(
        rows.slice(start, start + KEYS_PER_STATEMENT).map((row) => sql`select ${row.id} as id, ${row.name} as name, ${nameKey(row.name)} as name_key`),
        sql` union all `,
      );
      await sql`update ${sql.table(table)} set name_key = keyed.name_key from (${keyed}) as keyed
        where ${sql.table(table)}.id = keyed.id and ${sql.table(table)}.name = keyed.name`.execute(trx);
    }
  });
}

/**
 * A 409 naming `/name` when the create derives its id from a name another row of `table` already
 * has (the same nameKey), unless the request confirms it (`duplicate_name`): a second "Bob" is a
 * mistake more often than a second Bob, and was stored as `bob-2` without a word. A create that
 * names its own `id` chose it knowingly, as clients before this rule did, and is not asked.
 */
async function refuseTakenName(trx: Db, table: 'persons' | 'zones', id: string, input: NamedInput): Promise<void> {
  if (!asksName(input)) return;
  const key = nameKey(input.name);
  // Rows without a key are what the previous release wrote since keyNames ran.
  const taken = (
    await trx
      .selectFrom(table)
      .select(['id', 'name', 'name_key'])
      .where('id', '!=', id)
      .where((row) => row.or([row('name_key', '=', key), row('name_key', 'is', null)]))
      .execute()
  ).find((row) => (row.name_key ?? nameKey(row.name)) === key);
  if (!taken) return;
  const what = table === 'persons' ? 'person' : 'zone';
  throw new DomainError('conflict', `The ${what} "${taken.id}" is already called "${taken.name}"`, {
    errors: [{ path: '/name', message: `is already the name of ${what} "${taken.id}"; send "duplicate_name": true to use it again` }],
  });
}

/** Whether a create checks its name against the others' (refuseTakenName). */
const asksName = (input: NamedInput): boolean => input.id === undefined && !input.duplicate_name;

function zoneView(zone: { id: string; name: string }, occupants: string[]): ZoneView {
  return { id: zone.id, name: zone.name, count: occupants.length, occupied: occupants.length > 0, occupants };
}

/** How many persons other than `personId` are in `zone`, over index persons_zone: a subquery of the move's update, or a query of its own. */
export const othersInZone = (db: Db, zone: string, personId: string) =>
  db
    .selectFrom('persons as other')
    .select((eb) => eb.fn.countAll<string | number>().as('count'))
    .where('other.zone_id', '=', zone)
    .where('other.id', '<>', personId);

// Readers take the handle to read through: the database, or the transaction a write runs in (a read
// through the database from inside a transaction throws TransactionMisuseError).
async function readPerson(trx: Db, id: string): Promise<PersonView> {
  return toPersonView(await requireRow(trx.selectFrom('persons').selectAll().where('id', '=', id), 'Person', id));
}

async function readZone(trx: Db, id: string): Promise<ZoneView> {
  const zone = await requireRow(trx.selectFrom('zones').select(['id', 'name']).where('id', '=', id), 'Zone', id);
  const occupants = await trx.selectFrom('persons').select('id').where('zone_id', '=', id).orderBy('id').execute();
  return zoneView(
    zone,
    occupants.map((row) => row.id),
  );
}

async function readHealth(trx: Db, onlineSince: string): Promise<HealthView> {
  const nodes = await trx.selectFrom('nodes').select('quality').where('last_seen', '>=', onlineSince).execute();
  const quality = nodes.length ? Math.round((nodes.reduce((sum, node) => sum + Number(node.quality), 0) / nodes.length) * 10) / 10 : null;
  return { node_count: nodes.length, quality, mode: await readMode(trx) };
}

/** The row `query` reads, or a 404 naming `what` and `id`: the row may have gone since the request checked it. */
async function requireRow<T>(query: { executeTakeFirst(): Promise<T | undefined> }, what: string, id: string): Promise<T> {
  const row = await query.executeTakeFirst();
  if (!row) throw notFound(what, id);
  return row;
}

async function readMode(trx: Db): Promise<Mode> {
  return (await getSetting<Mode>(trx, 'system.mode')) ?? 'home';
}
