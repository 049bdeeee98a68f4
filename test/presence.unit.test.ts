import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { slugify } from '../src/ids.js';
import {
  awaySweepIntervalMs,
  enterZone,
  exitZone,
  isAwayDue,
  markAway,
  nodeSweepIntervalMs,
  occupancyAfter,
  type PersonState,
} from '../src/presence/transitions.js';

const away: PersonState = { presence: 'not_home', zone_id: null, left_at: null, last_seen: null };
const at = '2026-11-21T10:00:00.000Z';

describe('presence transitions', () => {
  it('entering from away: entry then presence change to home', () => {
    const { next, events } = enterZone(away, 'kitchen', at);
    assert.deepEqual(next, { presence: 'home', zone_id: 'kitchen', left_at: null, last_seen: at });
    assert.deepEqual(
      events.map((event) => event.type),
      ['zone.entry', 'presence.changed'],
    );
  });

  it('a first sighting changes presence from unknown, as the API reported it, and a return from not_home (outside test)', () => {
    const first = enterZone(away, 'kitchen', at);
    assert.deepEqual(first.events.at(-1)?.detail, { from: 'unknown', to: 'home' });
    const gone = markAway(exitZone(first.next, 'kitchen', at, 0).next);
    const back = enterZone(gone.next, 'kitchen', at);
    assert.deepEqual(back.events.at(-1)?.detail, { from: 'not_home', to: 'home' });
  });

  it("a move's occupancy: the others read before it, and the person where the move leaves them", () => {
    const inKitchen = enterZone(away, 'kitchen', at).next;
    const { next } = enterZone(inKitchen, 'garden', at);
    const others = new Map([
      ['kitchen', 2],
      ['garden', 0],
    ]);
    assert.equal(occupancyAfter(others, next, 'garden'), 1);
    assert.equal(occupancyAfter(others, next, 'kitchen'), 2);
    assert.equal(occupancyAfter(new Map(), next, 'hall'), 0);
  });

  it('entering another zone exits the previous one first', () => {
    const inKitchen = enterZone(away, 'kitchen', at).next;
    const { next, events } = enterZone(inKitchen, 'garden', at);
    assert.equal(next.zone_id, 'garden');
    assert.deepEqual(
      events.map((event) => [event.type, event.zone]),
      [
        ['zone.exit', 'kitchen'],
        ['zone.entry', 'garden'],
      ],
    );
  });

  it('exiting starts the away delay; with no delay the person is away at once', () => {
    const inKitchen = enterZone(away, 'kitchen', at).next;
    const delayed = exitZone(inKitchen, 'kitchen', at, 60_000);
    assert.deepEqual(delayed.next, { presence: 'home', zone_id: null, left_at: at, last_seen: at });
    assert.equal(isAwayDue(delayed.next, Date.parse(at) + 59_999, 60_000), false);
    assert.equal(isAwayDue(delayed.next, Date.parse(at) + 60_000, 60_000), true);
    const immediate = exitZone(inKitchen, 'kitchen', at, 0);
    assert.equal(immediate.next.presence, 'not_home');
    assert.deepEqual(
      immediate.events.map((event) => event.type),
      ['zone.exit', 'presence.changed'],
    );
  });

  it('an exit from another zone changes nothing', () => {
    const inKitchen = enterZone(away, 'kitchen', at).next;
    const { next, events } = exitZone(inKitchen, 'garden', '2026-11-24T08:00:00.000Z', 0);
    assert.deepEqual(next, inKitchen, 'not even last_seen moves');
    assert.deepEqual(events[0], { type: 'zone.exit', zone: 'garden', detail: { ignored: true, reason: 'not_in_zone' } });
  });

  it('marking a person away who is already away emits nothing', () => {
    assert.deepEqual(markAway(away).events, []);
  });

  it('slugifies names into topic-safe ids', () => {
    assert.equal(slugify('Ada Lovelace', 'p'), 'ada-lovelace');
    assert.equal(slugify('Zoë’s Room #2', 'p'), 'zoe-s-room-2');
    assert.equal(slugify('+/#', 'zone'), 'zone');
    assert.equal(slugify('Große Küche', 'zone'), 'grosse-kuche');
    assert.equal(slugify('Bjørn Ærøskøbing Łódź', 'p'), 'bjorn-aeroskobing-lodz');
    assert.match(slugify('x'.repeat(100), 'p'), /^[a-z0-9][a-z0-9_-]{0,63}$/);
  });

  it('sweeps often enough that a transition is at most a tenth of the node timeout (a quarter of the away delay) late, and at most a second', () => {
    assert.deepEqual([30_000, 5_000, 200, 0].map(nodeSweepIntervalMs), [1000, 500, 50, 50]);
    assert.deepEqual([60_000, 2_000, 100, 0].map(awaySweepIntervalMs), [1000, 500, 50, 50]);
  });
});
