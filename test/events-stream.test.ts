import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { EventLog } from '../src/events/index.js';
import { ADMIN_TOKEN, DIALECTS, eventually, startTestApp, type TestApp } from './helpers/app.js';
import { STREAM_RECHECK_MS } from '../src/events/routes.js';
import { openStream } from './helpers/stream.js';

const BUDGET = 64 * 1024;
/** An event of about this many bytes: under any byte cap `detail` may get, and many of them. */
const EVENT_BYTES = 8 * 1024;
/** Far more than the kernel's socket buffers on loopback (a few MiB each way) and than a page of the log. */
const EVENTS = 3000;
/** What a stream may hold beyond its budget: one event, and the frame lines of a page read from the log. */
const SLACK = EVENT_BYTES + 500 * 64;

/** A stream whose client reads nothing until `resume()`: its socket fills, then the server's buffer. */
function openPausedStream(base: string, after: number, token = ADMIN_TOKEN) {
  return new Promise<{ resume: () => void; ids: number[]; close: () => void }>((resolve, reject) => {
    const ids: number[] = [];
    const request = http.get(`${base}/api/events/stream?after=${after}`, { headers: { authorization: `Bearer ${token}` } }, (response) => {
      assert.equal(response.statusCode, 200);
      response.pause();
      let text = '';
      response.setEncoding('utf8');
      resolve({
        ids,
        resume: () => {
          response.on('data', (chunk: string) => {
            text += chunk;
            let end: number;
            while ((end = text.indexOf('\n\n')) >= 0) {
              const id = /^id: (\d+)$/m.exec(text.slice(0, end))?.[1];
              if (id) ids.push(Number(id));
              text = text.slice(end + 2);
            }
          });
          response.resume();
        },
        close: () => request.destroy(),
      });
    });
    request.on('error', reject);
  });
}

async function bufferedBytes(app: TestApp): Promise<number> {
  const metrics = (await app.api('GET', '/metrics')).body as string;
  return Number(/^mothership_event_stream_buffered_bytes (\d+)/m.exec(metrics)![1]);
}

/** Appends `count` events of about `bytes` each, a hundred per transaction. */
async function appendLarge(events: EventLog, count: number, bytes: number): Promise<void> {
  for (let done = 0; done < count; done += 100)
    await events.write(async (_trx, emit) => {
      for (let i = done; i < Math.min(count, done + 100); i++) emit('anomaly.detected', { detail: { i, blob: 'x'.repeat(bytes) } });
    });
}

const consecutiveFrom = (ids: number[], first: number, last: number) => ids.length === last - first + 1 && ids.every((id, index) => id === first + index);

for (const dialect of DIALECTS) {
  describe(`event streams: memory, caps and the shared follower (${dialect})`, () => {
    let app: TestApp;
    let base: string;
    before(async () => {
      app = await startTestApp(dialect, { EVENT_STREAM_BUFFER_BYTES: String(BUDGET), EVENT_STREAMS_PER_CLIENT: '25', EVENT_STREAMS_MAX: '30' });
      base = await app.http.listen({ port: 0, host: '127.0.0.1' });
    });
    after(() => app.cleanup());

    it('a client that stops reading holds at most its byte budget in the server, and then gets every event once, in order', async () => {
      const start = await app.events.lastSeq();
      const paused = await Promise.all([openPausedStream(base, start), openPausedStream(base, start), openPausedStream(base, start)]);
      const live = await openStream(base, start);
      try {
        let most = 0;
        const writing = appendLarge(app.events, EVENTS, EVENT_BYTES);
        // Each paused stream fills its socket and then its budget; sample while the log grows.
        await eventually(
          async () => {
            const bytes = await bufferedBytes(app);
            most = Math.max(most, bytes);
            assert.ok(bytes <= 3 * (BUDGET + SLACK), `three paused streams hold ${bytes} bytes (budget ${BUDGET} each)`);
            return bytes >= 3 * BUDGET;
          },
          60_000,
          'the paused streams to fill their budgets',
        );
        await writing;
        const end = await app.events.lastSeq();
        for (let sample = 0; sample < 20; sample++) {
          const bytes = await bufferedBytes(app);
          most = Math.max(most, bytes);
          assert.ok(bytes <= 3 * (BUDGET + SLACK), `three paused streams hold ${bytes} bytes (budget ${BUDGET} each)`);
        }
        await eventually(() => live.ids.length >= end - start, 60_000, 'the reading stream to get every event');
        assert.ok(consecutiveFrom(live.ids, start + 1, end), 'the reading stream: every event once, in order');

        for (const stream of paused) stream.resume();
        await eventually(() => paused.every((stream) => stream.ids.length >= end - start), 60_000, 'the paused streams to catch up');
        for (const stream of paused) assert.ok(consecutiveFrom(stream.ids, start + 1, end), 'a paused stream, resumed: every event once, in order');
        // New events after the catch-up come live again.
        await app.events.emit('anomaly.detected', { detail: { after: 'catch-up' } });
        await eventually(() => paused.every((stream) => stream.ids.at(-1) === end + 1), 10_000, 'the next event on every stream');
      } finally {
        for (const stream of paused) stream.close();
        await live.close();
      }
    });

    it('reads the log once for all open streams, not once per stream', async () => {
      let reads = 0;
      for (const method of ['page', 'history'] as const) {
        const original = app.events[method].bind(app.events) as (...args: unknown[]) => Promise<never>;
        app.events[method] = ((...args: unknown[]) => {
          reads++;
          return original(...args);
        }) as never;
      }
      const streams = await Promise.all(Array.from({ length: 20 }, () => openStream(base)));
      try {
        // Another process's event is not on this process's bus: only reading the log finds it.
        const other = new EventLog(app.database, []);
        // The shared feed reads the log once a second (POLL_MS) however many streams are open; under a
        // loaded machine the wait may span a few polls, but never one read per stream.
        const polls = (since: number) => Math.ceil((performance.now() - since) / 1000);
        const before = reads;
        let started = performance.now();
        await other.emit('anomaly.detected', { detail: { from: 'another process' } });
        await eventually(
          () => streams.every((stream) => stream.events.some((seen) => seen.detail.from === 'another process')),
          10_000,
          'every stream to show it',
        );
        assert.ok(reads - before <= 1 + polls(started) && reads - before < streams.length, `${reads - before} reads of the log for 20 streams`);

        // This process's own events come from its bus: no read at all.
        const quiet = reads;
        started = performance.now();
        for (let i = 0; i < 20; i++) await app.events.emit('anomaly.detected', { detail: { i } });
        const last = await app.events.lastSeq();
        await eventually(() => streams.every((stream) => stream.ids.at(-1) === last), 10_000, 'every stream to show them');
        assert.ok(reads - quiet <= polls(started), `${reads - quiet} reads of the log for 20 streams and 20 events of this process`);
      } finally {
        await Promise.all(streams.map((stream) => stream.close()));
        delete (app.events as Partial<EventLog>).page;
        delete (app.events as Partial<EventLog>).history;
      }
    });
  });

  describe(`event streams over the caps (${dialect})`, () => {
    let app: TestApp;
    let base: string;
    before(async () => {
      app = await startTestApp(dialect, { EVENT_STREAMS_PER_CLIENT: '2', EVENT_STREAMS_MAX: '3' });
      base = await app.http.listen({ port: 0, host: '127.0.0.1' });
    });
    after(() => app.cleanup());

    const open = (token: string) => fetch(`${base}/api/events/stream`, { headers: { authorization: `Bearer ${token}` } });

    it('refuses a stream over the per-client cap with 429 and over the total with 503, each a problem with Retry-After, and frees the slot when a stream closes', async () => {
      const reader = (await app.api('POST', '/api/tokens', { name: 'Grafana', scope: 'read' })).body.token as string;
      const other = (await app.api('POST', '/api/tokens', { name: 'Another', scope: 'read' })).body.token as string;
      const held: Response[] = [];
      try {
        for (let i = 0; i < 2; i++) held.push(await open(ADMIN_TOKEN));
        assert.deepEqual(
          held.map((response) => response.status),
          [200, 200],
        );

        const overClient = await open(ADMIN_TOKEN);
        assert.equal(overClient.status, 429);
        assert.match(overClient.headers.get('content-type')!, /^application\/problem\+json/);
        assert.equal(overClient.headers.get('retry-after'), '10');
        const problem = (await overClient.json()) as { code: string; detail: string };
        assert.equal(problem.code, 'too_many_streams');
        assert.match(problem.detail, /2 event streams/);

        // Another token is another client.
        held.push(await open(reader));
        assert.equal(held[2]!.status, 200);

        const overTotal = await open(other);
        assert.equal(overTotal.status, 503);
        assert.equal(overTotal.headers.get('retry-after'), '10');
        const full = (await overTotal.json()) as { code: string; detail: string };
        assert.equal(full.code, 'service_unavailable');
        assert.match(full.detail, /3 event streams/);

        // A closed stream gives its slot back.
        await held.shift()!.body!.cancel();
        const again = await eventually(
          async () => {
            const response = await open(ADMIN_TOKEN);
            if (response.status === 200) return response;
            await response.body?.cancel();
            return null;
          },
          5000,
          'a slot after a stream closed',
        );
        held.push(again);
      } finally {
        await Promise.all(held.map((response) => response.body?.cancel()));
      }
    });
  });

  describe(`an event stream ends when its credential does (${dialect})`, () => {
    let app: TestApp;
    let base: string;
    before(async () => {
      app = await startTestApp(dialect);
      base = await app.http.listen({ port: 0, host: '127.0.0.1' });
    });
    after(() => app.cleanup());

    /** Resolves true when `stream` ends within a recheck and some slack, false when it stays open. */
    const endsSoon = (stream: { ended: Promise<void> }) =>
      Promise.race([stream.ended.then(() => true), new Promise<boolean>((resolve) => setTimeout(resolve, STREAM_RECHECK_MS * 2 + 2000, false))]);

    it("a revoked token: its open stream ends; another token's stays open", async () => {
      const revoked = (await app.api('POST', '/api/tokens', { name: 'Wall display', scope: 'read' })).body as { id: string; token: string };
      const kept = (await app.api('POST', '/api/tokens', { name: 'Grafana', scope: 'read' })).body as { id: string; token: string };
      const doomed = await openStream(base, undefined, { authorization: `Bearer ${revoked.token}` });
      const staying = await openStream(base, undefined, { authorization: `Bearer ${kept.token}` });
      try {
        assert.equal((await app.api('DELETE', `/api/tokens/${revoked.id}`)).status, 204);
        assert.equal(await endsSoon(doomed), true, "the revoked token's stream ended");
        await app.events.emit('anomaly.detected', { detail: { after: 'revocation' } });
        await eventually(() => staying.events.some((event) => event.detail.after === 'revocation'), 5000, 'the other stream to go on');
        assert.equal(
          doomed.events.some((event) => event.detail.after === 'revocation'),
          false,
        );
      } finally {
        await Promise.all([doomed.close(), staying.close()]);
      }
    });

    it('an ended dashboard session: its open stream ends', async () => {
      const signedIn = await app.api('POST', '/api/session', { token: ADMIN_TOKEN }, { authorization: '' });
      const cookie = String(signedIn.headers['set-cookie']).split(';')[0]!;
      const stream = await openStream(base, undefined, { cookie, 'sec-fetch-site': 'same-origin' });
      try {
        const [session] = (await app.api('GET', '/api/sessions')).body as { id: string }[];
        assert.equal((await app.api('DELETE', `/api/sessions/${session!.id}`)).status, 204);
        assert.equal(await endsSoon(stream), true, "the ended session's stream ended");
      } finally {
        await stream.close();
      }
    });
  });
}
