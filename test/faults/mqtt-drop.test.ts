import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createTestEnv, eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { freePort, observer, startBroker } from '../helpers/broker.js';
import { startService, stopProcess } from '../helpers/process.js';

const PERSONS = Array.from({ length: 20 }, (_, index) => `p${index}`);
const ZONES = ['kitchen', 'hall', 'office', 'garden', 'attic'];
const pick = <T>(list: T[]) => list[Math.floor(Math.random() * list.length)]!;

/** What the broker should hold for every person and zone, read from the service's own API. */
async function expectedState(app: TestApp, topic: (kind: string, id: string, leaf: string) => string): Promise<Map<string, string | undefined>> {
  const expected = new Map<string, string | undefined>();
  const zones: { id: string; name: string; count: number; occupied: boolean; occupants: string[] }[] = (await app.api('GET', '/api/zones')).body;
  for (const person of (await app.api('GET', '/api/persons')).body) {
    // A person not seen yet (`unknown`) has no retained presence or tracker state.
    const presence = person.presence === 'unknown' ? undefined : person.presence;
    expected.set(topic('person', person.id, 'presence'), presence);
    const room = person.zone ? zones.find((zone) => zone.id === person.zone)!.name : null;
    expected.set(topic('person', person.id, 'attributes'), JSON.stringify({ zone: person.zone, room, last_seen: person.last_seen }));
    expected.set(topic('person', person.id, 'tracker'), presence);
  }
  for (const zone of zones) {
    expected.set(topic('zone', zone.id, 'occupancy'), JSON.stringify({ count: zone.count, occupied: zone.occupied, occupants: zone.occupants }));
  }
  return expected;
}

describe('MQTT state after the broker drops the connection mid-publish', () => {
  it('every change after a broker crash and restart is published within 1 s, and the broker ends equal to the database', async () => {
    const broker = await startBroker();
    const mid = `ms${randomBytes(4).toString('hex')}`;
    const root = `root${randomBytes(4).toString('hex')}`;
    const app = await startTestApp('sqlite', { MOTHERSHIP_ID: mid, MQTT_BACKOFF_INITIAL_MS: '100', MQTT_BACKOFF_MAX_MS: '300' }, { start: true });
    const topic = (kind: string, id: string, leaf: string) => `${root}/${mid}/${kind}/${id}/${leaf}`;
    const enter = (person: string, zone: string) => app.api('POST', '/api/events', { type: 'zone.entry', person, zone });
    let view: Awaited<ReturnType<typeof observer>> | null = null;
    // The load of the current trial: stopped before the app closes, so a failed assertion is what the test reports.
    let stopLoad = async () => {};
    try {
      for (const id of PERSONS) await app.api('POST', '/api/persons', { id, name: id });
      for (const id of ZONES) await app.api('POST', '/api/zones', { id, name: id });
      await app.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: broker.url, topic_root: root } });
      const connected = () =>
        eventually(async () => (await app.api('GET', '/api/settings/integration')).body.mqtt.status.connected === true, 10_000, 'MQTT connected');
      await connected();

      for (let trial = 0; trial < 3; trial++) {
        // Zone entries flow, 10 at a time, while the broker is killed and started again.
        let flowing = true;
        const load = (async () => {
          while (flowing) await Promise.all(Array.from({ length: 10 }, () => enter(pick(PERSONS), pick(ZONES))));
        })();
        stopLoad = async () => {
          flowing = false;
          await load.catch(() => {});
        };
        await new Promise((resolve) => setTimeout(resolve, 150));
        await broker.stop('SIGKILL');
        await new Promise((resolve) => setTimeout(resolve, 100));
        await broker.start();
        await connected();
        await new Promise((resolve) => setTimeout(resolve, 300));
        flowing = false;
        await load;

        await view?.close();
        view = await observer(broker.url, [`${root}/${mid}/#`]);
        // Every change from now on reaches the broker within 1 s.
        for (let change = 0; change < 5; change++) {
          const person = PERSONS[(trial * 5 + change) % PERSONS.length]!;
          const zone = ZONES[change % ZONES.length]!;
          const response = await enter(person, zone);
          assert.equal(response.status, 202);
          const since = Date.now();
          const stored = (await app.api('GET', `/api/persons/${person}`)).body;
          const wanted = JSON.stringify({ zone: stored.zone, room: zone, last_seen: stored.last_seen });
          assert.equal(stored.zone, zone);
          await eventually(
            () => view!.last(topic('person', person, 'attributes')) === wanted,
            1000,
            `trial ${trial}: ${person} in ${zone} published within 1 s`,
          );
          assert.ok(Date.now() - since <= 1000);
        }
        // And what the broker retains is what the database holds, for every entity.
        const expected = await expectedState(app, topic);
        await eventually(
          async () => {
            const retained = await observer(broker.url, [`${root}/${mid}/person/#`, `${root}/${mid}/zone/#`]);
            await new Promise((resolve) => setTimeout(resolve, 200));
            await retained.close();
            const wrong = [...expected].filter(([key, value]) => retained.last(key) !== value);
            return (
              wrong.length === 0 ||
              (assert.fail(`trial ${trial}: ${wrong.length} of ${expected.size} retained states differ from the database, e.g. ${wrong[0]![0]}`) as never)
            );
          },
          3000,
          'retained state equals the database',
        );
      }
    } finally {
      await stopLoad();
      await view?.close();
      await app.cleanup();
      await broker.destroy();
    }
  });
});

describe('shutdown never waits on a publish', () => {
  for (const when of ['during a broker outage', 'right after a broker drop mid-publish'] as const) {
    it(`SIGTERM ${when}: the process exits within 5 s`, async () => {
      const broker = await startBroker();
      const env = await createTestEnv('sqlite', {
        MOTHERSHIP_ID: `ms${randomBytes(4).toString('hex')}`,
        MQTT_BACKOFF_INITIAL_MS: '100',
        MQTT_BACKOFF_MAX_MS: '300',
      });
      const setup = await startTestApp('sqlite', {}, { testEnv: env });
      for (const id of PERSONS) await setup.api('POST', '/api/persons', { id, name: id });
      for (const id of ZONES) await setup.api('POST', '/api/zones', { id, name: id });
      await setup.api('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: broker.url } });
      await setup.close();
      const { child: service, base } = await startService(env.env, await freePort());
      try {
        const headers = { authorization: `Bearer ${env.env.ADMIN_TOKEN}`, 'content-type': 'application/json' };
        await eventually(
          async () =>
            ((await (await fetch(`${base}/api/settings/integration`, { headers })).json()) as { mqtt: { status: { connected: boolean } } }).mqtt.status
              .connected === true,
          10_000,
          'MQTT connected',
        );
        let flowing = true;
        const load = (async () => {
          while (flowing) {
            await Promise.all(
              Array.from({ length: 10 }, () =>
                fetch(`${base}/api/events`, {
                  method: 'POST',
                  headers,
                  body: JSON.stringify({ type: 'zone.entry', person: pick(PERSONS), zone: pick(ZONES) }),
                }).catch(() => null),
              ),
            );
          }
        })();
        await new Promise((resolve) => setTimeout(resolve, 300));
        await broker.stop('SIGKILL');
        if (when === 'during a broker outage') await new Promise((resolve) => setTimeout(resolve, 1000));
        flowing = false;
        await load;
        const started = Date.now();
        const exited = new Promise((resolve) => service.once('exit', resolve));
        service.kill('SIGTERM');
        const outcome = await Promise.race([exited.then(() => 'exited'), new Promise((resolve) => setTimeout(() => resolve('still running'), 5000))]);
        assert.equal(outcome, 'exited', `still running 5 s after SIGTERM\n${service.output().slice(-2000)}`);
        assert.ok(Date.now() - started < 5000);
      } finally {
        await stopProcess(service, 'SIGKILL');
        await env.cleanup();
        await broker.destroy();
      }
    });
  }
});
