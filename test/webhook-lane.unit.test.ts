import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as turn } from 'node:timers/promises';
import { DispatchLane, type LaneWork } from '../src/webhook/lane.js';
import { deferred } from './helpers/deferred.js';

/** Every settled promise's callbacks run: the lane has done all it can until a test's gate opens. */
const settled = async () => {
  for (let i = 0; i < 20; i++) await turn();
};

/**
 * A lane over an in-memory queue of due rows. `answers` holds the answer of a row the test wants to
 * hold back (a slow receiver); every other row is answered at once with `ok <row>`.
 */
function fakeLane(concurrency: number, due: string[]) {
  const answers = new Map<string, ReturnType<typeof deferred<string | null>>>();
  const seen = { claims: [] as number[], sent: [] as string[], records: [] as string[][], released: [] as string[], failures: [] as unknown[] };
  const work: LaneWork<string, string> = {
    claim: async (limit) => {
      seen.claims.push(limit);
      return due.splice(0, limit);
    },
    send: (row) => {
      seen.sent.push(row);
      return answers.get(row)?.promise ?? Promise.resolve(`ok ${row}`);
    },
    record: async (answered) => {
      seen.records.push(answered.map(({ row, answer }) => `${row}: ${answer}`));
    },
    release: async (rows) => {
      seen.released.push(...rows);
    },
    failed: (error) => seen.failures.push(error),
  };
  const hold = (row: string) => {
    const answer = deferred<string | null>();
    answers.set(row, answer);
    return answer;
  };
  const lane = new DispatchLane(concurrency, work);
  lane.start();
  /** A claim reads, then `row` is committed and announced by a kick before that claim answers. */
  const announceDuringClaim = async (row: string) => {
    const claim = work.claim;
    const gate = deferred<void>();
    work.claim = async (limit) => {
      const rows = await claim(limit);
      await gate.promise;
      work.claim = claim;
      return rows;
    };
    lane.kick();
    await settled();
    due.push(row);
    lane.kick();
    gate.resolve();
    await settled();
  };
  return { lane, work, seen, hold, due, announceDuringClaim };
}

describe('webhook dispatch lane', () => {
  it('a slow answer holds up its own slot only: the rows behind it go through the others', async () => {
    const { lane, seen, hold, due } = fakeLane(2, ['slow', 'a', 'b']);
    const slow = hold('slow');
    lane.kick();
    await settled();
    due.push('c', 'd');
    lane.kick();
    await settled();
    assert.deepEqual(seen.sent, ['slow', 'a', 'b', 'c', 'd']);
    assert.deepEqual(seen.records.flat().sort(), ['a: ok a', 'b: ok b', 'c: ok c', 'd: ok d']);
    slow.resolve('late');
    await settled();
    assert.ok(seen.records.flat().includes('slow: late'));
  });

  it('claims at most its concurrency, and only once the claimed rows are taken', async () => {
    const { lane, seen } = fakeLane(
      3,
      Array.from({ length: 10 }, (_, i) => `r${i}`),
    );
    lane.kick();
    await settled();
    assert.equal(seen.sent.length, 10);
    assert.ok(
      seen.claims.every((limit) => limit === 3),
      `claims of ${seen.claims.join(', ')}`,
    );
    // 10 rows: four claims that found some, then the ones that found nothing (one per slot at most).
    assert.ok(seen.claims.length >= 5 && seen.claims.length <= 4 + 3, `${seen.claims.length} claims`);
  });

  it('a kick opens slots as rows come, not all of them: one delivery is one claim that finds it and one that finds nothing more', async () => {
    const { lane, seen, due } = fakeLane(16, ['a']);
    lane.kick();
    lane.kick();
    await settled();
    assert.deepEqual(seen.sent, ['a']);
    assert.equal(seen.claims.length, 2);
    due.push(...Array.from({ length: 20 }, (_, i) => `r${i}`));
    lane.kick();
    await settled();
    assert.equal(seen.sent.length, 21);
    assert.ok(seen.claims.length <= 2 + 2 + 16, `${seen.claims.length} claims`);
  });

  it('claimed rows each get a slot at once, up to the concurrency', async () => {
    const { lane, seen, hold } = fakeLane(3, ['a', 'b', 'c', 'd']);
    const held = ['a', 'b', 'c', 'd'].map(hold);
    lane.kick();
    await settled();
    assert.deepEqual(seen.sent.sort(), ['a', 'b', 'c']);
    held[0]!.resolve('answered');
    await settled();
    assert.deepEqual(seen.sent.sort(), ['a', 'b', 'c', 'd']);
  });

  it('a kick during a claim that finds nothing claims again: a row committed meanwhile is not left for the poll', async () => {
    const { seen, announceDuringClaim } = fakeLane(1, []);
    await announceDuringClaim('late');
    assert.deepEqual(seen.sent, ['late']);
  });

  it('records the answers that came back before each claim: one write per round of the slots, not one per answer', async () => {
    const { lane, seen, hold } = fakeLane(2, ['a', 'b', 'c', 'd']);
    const [a, b] = ['a', 'b'].map(hold);
    lane.kick();
    await settled();
    // a's slot frees: it records a and claims c and d, sends them one after the other, and records both
    // with the claim that finds nothing more.
    a!.resolve('answered');
    await settled();
    assert.deepEqual(seen.records, [['a: answered'], ['c: ok c', 'd: ok d']]);
    b!.resolve('late');
    await settled();
    assert.deepEqual(seen.records.at(-1), ['b: late']);
  });

  it('a row announced while a claim runs gets a free slot at once, not when a busy one frees', async () => {
    const { seen, hold, announceDuringClaim } = fakeLane(2, ['a']);
    hold('a');
    await announceDuringClaim('b');
    assert.deepEqual(seen.sent.sort(), ['a', 'b'], 'b went out while a still waits for its answer');
  });

  it('an answer that comes back while the last claim runs is recorded, not left for the next kick', async () => {
    const { lane, work, seen, hold } = fakeLane(2, ['a', 'b']);
    const b = hold('b');
    const claim = work.claim;
    const gate = deferred<void>();
    work.claim = async (limit) => {
      // The second claim (a's slot, after its answer) waits while b is answered.
      if (seen.claims.length === 1) await gate.promise;
      return claim(limit);
    };
    lane.kick();
    await settled();
    b.resolve('late');
    await settled();
    gate.resolve();
    await settled();
    assert.deepEqual(seen.records.flat().sort(), ['a: ok a', 'b: late']);
  });

  it('a stop waits for the attempts in flight and their record, takes no more rows, and puts back what a shutdown cut off', async () => {
    const { lane, seen, hold, due } = fakeLane(2, ['a', 'cut']);
    const a = hold('a');
    const cut = hold('cut');
    lane.kick();
    await settled();
    due.push('never');
    const stopping = lane.stop();
    a.resolve('answered');
    cut.resolve(null);
    await stopping;
    assert.deepEqual(seen.sent, ['a', 'cut']);
    assert.deepEqual(seen.records, [['a: answered']]);
    assert.deepEqual(seen.released, ['cut']);
    lane.kick();
    await settled();
    assert.deepEqual(seen.sent, ['a', 'cut'], 'a stopped lane sends nothing');
  });

  it('a stop puts back the rows it claimed and had not sent', async () => {
    const { lane, seen, hold } = fakeLane(2, ['a', 'b', 'c', 'd']);
    const [a, b, c] = ['a', 'b', 'c'].map(hold);
    lane.kick();
    await settled();
    // b's slot frees first: it claims c and d, sends c, and d waits for a slot.
    b!.resolve('answered');
    await settled();
    assert.deepEqual(seen.sent, ['a', 'b', 'c']);
    const stopping = lane.stop();
    a!.resolve('answered');
    c!.resolve('answered');
    await stopping;
    assert.deepEqual(seen.released, ['d']);
    assert.deepEqual(seen.records.flat().sort(), ['a: answered', 'b: answered', 'c: answered']);
  });

  it('an attempt that throws is reported, its row left claimed, and its slot goes on with the next row', async () => {
    const { lane, work, seen } = fakeLane(1, ['a', 'b']);
    const send = work.send;
    work.send = (row) => (row === 'a' ? Promise.reject(new Error('cannot sign')) : send(row));
    lane.kick();
    await settled();
    assert.equal(seen.failures.length, 1);
    assert.deepEqual(seen.records.flat(), ['b: ok b']);
  });

  it('a failed claim is reported once and ends the slots; the next kick claims again', async () => {
    const { lane, work, seen } = fakeLane(3, ['a']);
    const claim = work.claim;
    work.claim = async () => {
      work.claim = claim;
      throw new Error('database away');
    };
    lane.kick();
    await settled();
    assert.equal(seen.failures.length, 1);
    assert.deepEqual(seen.sent, []);
    lane.kick();
    await settled();
    assert.deepEqual(seen.sent, ['a']);
  });
});
