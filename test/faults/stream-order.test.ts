import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DIALECTS, eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { openStream } from '../helpers/stream.js';

const increasing = (ids: number[]) => ids.every((id, index) => index === 0 || id > ids[index - 1]!);

for (const dialect of DIALECTS) {
  describe(`the event stream under concurrent writers (${dialect})`, () => {
    let app: TestApp;
    let base: string;
    before(async () => {
      app = await startTestApp(dialect);
      base = await app.http.listen({ port: 0, host: '127.0.0.1' });
    });
    after(() => app.cleanup());

    for (const writers of [8, 32]) {
      it(`${writers} writers: every committed event reaches the live stream once, in sequence order, and a resume loses nothing`, async () => {
        const start = (await app.api('GET', '/api/events?order=desc&limit=1')).body.last_seq as number;
        const live = await openStream(base, start);
        const total = 480;
        let posted = 0;
        const second: { opening?: Promise<Awaited<ReturnType<typeof openStream>>>; stream?: Awaited<ReturnType<typeof openStream>> } = {};
        let resumedFrom = 0;
        const writer = async () => {
          while (posted < total) {
            posted++;
            const response = await app.api('POST', '/api/events', { type: 'anomaly.detected', detail: { n: posted } });
            assert.equal(response.status, 202);
            // Halfway, a second client resumes from the last id the first one has seen.
            if (posted >= total / 2 && !second.opening) {
              resumedFrom = live.ids.at(-1) ?? start;
              second.opening = openStream(base, resumedFrom);
              second.stream = await second.opening;
            }
          }
        };
        await Promise.all(Array.from({ length: writers }, writer));
        const committed: number[] = [];
        for (let after = start; ;) {
          const page = (await app.api('GET', `/api/events?after=${after}&limit=1000`)).body;
          if (page.events.length === 0) break;
          committed.push(...page.events.map((event: { seq: number }) => event.seq));
          after = page.last_seq;
        }
        assert.equal(committed.length, total);
        try {
          await eventually(
            () => live.ids.length >= total && second.stream!.ids.length >= committed.filter((seq) => seq > resumedFrom).length,
            10_000,
            'streams caught up',
          ).catch(() => {});
          assert.ok(increasing(live.ids), 'the live stream is in sequence order');
          assert.deepEqual(
            live.ids,
            committed,
            `live stream: ${committed.length - new Set(live.ids).size} of ${committed.length} committed events missing or repeated`,
          );
          const expectedResume = committed.filter((seq) => seq > resumedFrom);
          assert.deepEqual(second.stream!.ids, expectedResume, 'the resumed stream holds every event after its Last-Event-ID, once, in order');
        } finally {
          await live.close();
          await second.stream?.close();
        }
      });
    }
  });
}
