import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { backoffDelay } from '../src/mqtt/backoff.js';
import { allConfigs, defaultEntityId, deviceConfig, personConfigs, removal, systemConfigs, zoneConfigs } from '../src/mqtt/discovery.js';
import { Topics } from '../src/mqtt/topics.js';
import { sweepable } from '../src/mqtt/sweep.js';
import { emptyPending, hasWork, recordChange } from '../src/mqtt/pending.js';
import { interpretMessage } from '../src/mqtt/commands.js';
import { makeEvent } from '../src/events/index.js';
import { personState, zoneState } from '../src/mqtt/state.js';
import { matchesRecord, planPublish, type Outgoing } from '../src/mqtt/plan.js';
import { RetainedPublisher, STEP, type PublishTarget } from '../src/mqtt/publisher.js';
import { payloadHash, type RetainedRecord } from '../src/mqtt/record.js';
import { mqttSensorState, mqttTrackerState, personStateFromTrackers, type TrackerState } from './helpers/home-assistant.js';
import { clientOptions, describeMqttError, MAX_INBOUND_PACKET_BYTES } from '../src/mqtt/connection.js';
import { applyPatch, changedFields, DEFAULT_SETTINGS, topicPrefixError, webhookSecretError } from '../src/settings/index.js';
import { brokerTargetError, webhookTargetError } from '../src/outbound.js';

const context = { topics: new Topics('mothership', 'ms-1', 'homeassistant'), version: '1.2.3' };
const shared = {
  availability: [{ topic: 'mothership/ms-1/availability', payload_available: 'online', payload_not_available: 'offline' }],
  device: { identifiers: ['mothership_ms-1'], name: 'Mothership ms-1', manufacturer: 'Mothership', model: 'Presence hub', sw_version: '1.2.3' },
  origin: { name: 'Mothership', sw_version: '1.2.3' },
  qos: 1,
};

describe('MQTT reconnect backoff', () => {
  it('doubles from 5 s and caps at 120 s', () => {
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6, 7, 8, 50].map((attempt) => backoffDelay(attempt, 5000, 120_000)),
      [5000, 10_000, 20_000, 40_000, 80_000, 120_000, 120_000, 120_000, 120_000],
    );
  });
});

describe('Home Assistant discovery payloads', () => {
  it('a person: a device tracker (what HA person entities take), a presence binary sensor and a room sensor', () => {
    assert.deepEqual(personConfigs(context, { id: 'ada', name: 'Ada' }), [
      {
        topic: 'homeassistant/device_tracker/ms-1/person_ada/config',
        payload: {
          name: 'Ada',
          unique_id: 'ms-1_person_ada_tracker',
          default_entity_id: 'device_tracker.mothership_ada',
          ...shared,
          state_topic: 'mothership/ms-1/person/ada/tracker',
          payload_home: 'home',
          payload_not_home: 'not_home',
          source_type: 'router',
          json_attributes_topic: 'mothership/ms-1/person/ada/attributes',
        },
      },
      {
        topic: 'homeassistant/binary_sensor/ms-1/person_ada_presence/config',
        payload: {
          name: 'Ada presence',
          unique_id: 'ms-1_person_ada_presence',
          default_entity_id: 'binary_sensor.mothership_ada_presence',
          ...shared,
          state_topic: 'mothership/ms-1/person/ada/presence',
          payload_on: 'home',
          payload_off: 'not_home',
          device_class: 'presence',
          json_attributes_topic: 'mothership/ms-1/person/ada/attributes',
        },
      },
      {
        topic: 'homeassistant/sensor/ms-1/person_ada_room/config',
        payload: {
          name: 'Ada room',
          unique_id: 'ms-1_person_ada_room',
          default_entity_id: 'sensor.mothership_ada_room',
          ...shared,
          state_topic: 'mothership/ms-1/person/ada/attributes',
          value_template: "{{ value_json.room if value_json.room else 'None' }}",
          icon: 'mdi:map-marker',
        },
      },
    ]);
  });

  it('zone: a measurement count sensor and an occupancy binary sensor on the occupancy topic', () => {
    assert.deepEqual(zoneConfigs(context, { id: 'kitchen', name: 'Kitchen' }), [
      {
        topic: 'homeassistant/sensor/ms-1/zone_kitchen_count/config',
        payload: {
          name: 'Kitchen occupants',
          unique_id: 'ms-1_zone_kitchen_count',
          default_entity_id: 'sensor.mothership_kitchen_occupancy_count',
          ...shared,
          state_topic: 'mothership/ms-1/zone/kitchen/occupancy',
          value_template: '{{ value_json.count }}',
          state_class: 'measurement',
          icon: 'mdi:account-group',
          json_attributes_topic: 'mothership/ms-1/zone/kitchen/occupancy',
        },
      },
      {
        topic: 'homeassistant/binary_sensor/ms-1/zone_kitchen_occupied/config',
        payload: {
          name: 'Kitchen occupied',
          unique_id: 'ms-1_zone_kitchen_occupied',
          default_entity_id: 'binary_sensor.mothership_kitchen_occupied',
          ...shared,
          state_topic: 'mothership/ms-1/zone/kitchen/occupancy',
          value_template: "{{ 'ON' if value_json.occupied else 'OFF' }}",
          payload_on: 'ON',
          payload_off: 'OFF',
          device_class: 'occupancy',
        },
      },
    ]);
  });

  it('system: fall (safety), diagnostics node count and quality, the mode select', () => {
    const configs = Object.fromEntries(systemConfigs(context).map((config) => [config.topic, config.payload]));
    assert.deepEqual(Object.keys(configs), [
      'homeassistant/binary_sensor/ms-1/fall/config',
      'homeassistant/sensor/ms-1/node_count/config',
      'homeassistant/sensor/ms-1/quality/config',
      'homeassistant/select/ms-1/mode/config',
    ]);
    assert.deepEqual(configs['homeassistant/binary_sensor/ms-1/fall/config'], {
      name: 'Fall detected',
      unique_id: 'ms-1_fall',
      default_entity_id: 'binary_sensor.mothership_fall_detected',
      ...shared,
      state_topic: 'mothership/ms-1/fall',
      value_template: '{{ value_json.state }}',
      payload_on: 'ON',
      payload_off: 'OFF',
      device_class: 'safety',
      json_attributes_topic: 'mothership/ms-1/fall',
    });
    assert.deepEqual(configs['homeassistant/sensor/ms-1/quality/config'], {
      name: 'Sensing quality',
      unique_id: 'ms-1_quality',
      default_entity_id: 'sensor.mothership_sensing_quality',
      ...shared,
      state_topic: 'mothership/ms-1/system/health',
      value_template: '{{ value_json.quality }}',
      unit_of_measurement: '%',
      state_class: 'measurement',
      entity_category: 'diagnostic',
      icon: 'mdi:signal',
    });
    assert.equal((configs['homeassistant/sensor/ms-1/node_count/config'] as any).entity_category, 'diagnostic');
    assert.deepEqual(configs['homeassistant/select/ms-1/mode/config'], {
      name: 'System mode',
      unique_id: 'ms-1_mode',
      default_entity_id: 'select.mothership_mode',
      ...shared,
      state_topic: 'mothership/ms-1/system/mode',
      command_topic: 'mothership/ms-1/system/mode/set',
      options: ['home', 'away', 'sleep', 'vacation'],
      icon: 'mdi:home-switch',
    });
  });

  it('entity ids are valid for Home Assistant whatever the ids contain', () => {
    // HA's rule (homeassistant/core.py valid_entity_id): lowercase letters, digits, single underscores, none at the ends.
    const valid = /^(?!.+__)(?!_)[\da-z_]+(?<!_)\.(?!_)[\da-z_]+(?<!_)$/;
    for (const id of ['ada', 'a-b', 'x_', '9--9', 'kitchen-2']) {
      const entityId = (personConfigs(context, { id, name: id })[0]!.payload as { default_entity_id: string }).default_entity_id;
      assert.match(entityId, valid, entityId);
    }
    assert.equal(defaultEntityId('binary_sensor', 'kitchen-2', 'occupied'), 'binary_sensor.mothership_kitchen_2_occupied');
  });

  it('every config is unique and removal empties each topic', () => {
    const configs = allConfigs(context, [{ id: 'ada', name: 'Ada' }], [{ id: 'hall', name: 'Hall' }]);
    assert.equal(configs.length, 9);
    assert.equal(new Set(configs.map((config) => (config.payload as any).unique_id)).size, 9);
    assert.deepEqual(removal(personConfigs(context, { id: 'ada', name: '' })), [
      { topic: 'homeassistant/device_tracker/ms-1/person_ada/config', payload: null },
      { topic: 'homeassistant/binary_sensor/ms-1/person_ada_presence/config', payload: null },
      { topic: 'homeassistant/sensor/ms-1/person_ada_room/config', payload: null },
    ]);
  });
});

describe('device-based discovery (HA 2024.11+)', () => {
  const configs = allConfigs(context, [{ id: 'ada', name: 'Ada' }], [{ id: 'hall', name: 'Hall' }]);

  it('one config at {prefix}/device/{mid}/config: shared options on top, each entity a component under its per-entity object id', () => {
    const { topic, payload } = deviceConfig(context, configs);
    assert.equal(topic, 'homeassistant/device/ms-1/config');
    const { cmps, ...top } = payload as { cmps: Record<string, Record<string, unknown>> };
    assert.deepEqual(top, shared, 'device, origin (required by HA for device discovery), availability and qos once');
    // HA's DEVICE_DISCOVERY_SCHEMA (mqtt/schemas.py) refuses any other top-level key, and a component
    // with more than its platform must carry a unique_id.
    const allowedTop = [
      'device',
      'origin',
      'availability',
      'availability_mode',
      'availability_template',
      'availability_topic',
      'payload_available',
      'payload_not_available',
      'state_topic',
      'command_topic',
      'qos',
      'encoding',
      'message_expiry_interval',
    ];
    assert.deepEqual(
      Object.keys(top).filter((key) => !allowedTop.includes(key)),
      [],
    );
    for (const component of Object.values(cmps)) assert.ok(Object.keys(component).length === 1 || typeof component.unique_id === 'string');
    // The component id is the per-entity object id, and the device topic's object id is the mid, so HA
    // computes the same discovery id (`ms-1 person_ada_presence`) in both forms: a switch migrates.
    assert.deepEqual(Object.keys(cmps).sort(), configs.map((config) => config.topic.split('/')[3]!).sort());
    assert.deepEqual(cmps.person_ada_presence, {
      p: 'binary_sensor',
      name: 'Ada presence',
      unique_id: 'ms-1_person_ada_presence',
      default_entity_id: 'binary_sensor.mothership_ada_presence',
      state_topic: 'mothership/ms-1/person/ada/presence',
      payload_on: 'home',
      payload_off: 'not_home',
      device_class: 'presence',
      json_attributes_topic: 'mothership/ms-1/person/ada/attributes',
      qos: 1,
    });
    for (const config of configs) {
      const component = cmps[config.topic.split('/')[3]!]!;
      const { p, ...own } = component;
      assert.equal(p, config.topic.split('/')[1], 'the platform is the per-entity topic component');
      const { device: _device, origin: _origin, availability: _availability, ...expected } = config.payload as Record<string, unknown>;
      // HA copies availability and the rest into each component (mqtt/discovery.py), but not qos:
      // without its own, a component subscribes at QoS 0.
      assert.deepEqual(own, expected, 'every key of the per-entity config but the shared ones, qos included');
    }
  });

  it("a removed entity is its platform alone, Home Assistant's removal signal", () => {
    const remaining = allConfigs(context, [], [{ id: 'hall', name: 'Hall' }]);
    const { payload } = deviceConfig(context, remaining, removal(personConfigs(context, { id: 'ada', name: '' })));
    const { cmps } = payload as { cmps: Record<string, Record<string, unknown>> };
    assert.deepEqual(cmps.person_ada_presence, { p: 'binary_sensor' });
    assert.deepEqual(cmps.person_ada, { p: 'device_tracker' });
    assert.equal(cmps.zone_hall_count!.p, 'sensor');
  });
});

describe('what an event changes on the broker', () => {
  const context = { topics: new Topics('ms', 'mid', 'homeassistant'), version: '1.0.0' };

  it('marks the entities to republish and the retained topics to clear', () => {
    const pending = emptyPending();
    assert.equal(hasWork(pending), false);
    assert.equal(
      recordChange(pending, makeEvent('zone.entry', { person: 'ada', zone: 'den', detail: { from_zone: null, already_inside: false, count: 1 } }), context),
      true,
    );
    assert.deepEqual([...pending.persons, ...pending.zones], ['ada', 'den']);
    // A deletion moves each occupant out with a zone.exit of its own, before the zone.deleted.
    recordChange(pending, makeEvent('zone.exit', { person: 'bob', zone: 'hall', detail: { count: 0 } }), context);
    recordChange(pending, makeEvent('zone.deleted', { zone: 'hall', detail: { name: 'Hall', count: 1 } }), context);
    assert.ok(pending.persons.has('bob'), "a deleted zone's occupants are republished (moved out)");
    assert.ok(pending.clearTopics.has('ms/mid/zone/hall/occupancy'));
    assert.deepEqual(
      pending.removed.map((message) => [message.topic, message.payload]),
      zoneConfigs(context, { id: 'hall', name: '' }).map((config) => [config.topic, null]),
    );
    const removedBefore = pending.removed.length;
    recordChange(pending, makeEvent('person.deleted', { person: 'cy', detail: { name: 'Cy' } }), context);
    for (const topic of ['presence', 'attributes', 'tracker']) assert.ok(pending.clearTopics.has(`ms/mid/person/cy/${topic}`), topic);
    assert.deepEqual(
      pending.removed.slice(removedBefore).map((message) => [message.topic, message.payload]),
      personConfigs(context, { id: 'cy', name: '' }).map((config) => [config.topic, null]),
      "a deleted person's discovery configs are queued for removal",
    );
    recordChange(pending, makeEvent('person.created', { person: 'di', detail: { name: 'Di' } }), context);
    assert.ok(pending.configs.persons.has('di') && pending.persons.has('di'));
    recordChange(pending, makeEvent('fall.detected', { detail: { state: 'ON' } }), context);
    recordChange(pending, makeEvent('system.mode_changed', { detail: { from: 'home', to: 'away', source: 'api' } }), context);
    assert.equal(pending.fall && pending.mode, true);
  });

  it('ignores events that change no retained state', () => {
    const pending = emptyPending();
    for (const event of [
      makeEvent('baseline.recorded', { detail: { id: 1, commit_sha: 'a', subject_geomean: 1, grep_1000_mean_ms: 1, regressed: false, regressions: [] } }),
      makeEvent('webhook.test', { detail: { message: 'x' } }),
      // An exit from a zone the person was not in changes nothing.
      makeEvent('zone.exit', { person: 'ada', zone: 'den', detail: { ignored: true, reason: 'not_in_zone', count: 0 } }),
    ]) {
      assert.equal(recordChange(pending, event, context), false);
    }
    assert.equal(hasWork(pending), false);
  });
});

describe('what a message from the broker asks for', () => {
  const topics = new Topics('ms', 'mid', 'homeassistant');
  const interpret = (topic: string, payload: string, retained = false) => interpretMessage({ topic, payload, retained }, topics);

  it('a birth message asks for a full sync; other statuses do not', () => {
    assert.deepEqual(interpret('homeassistant/status', 'online'), { kind: 'full-sync' });
    assert.deepEqual(interpret('homeassistant/status', 'offline'), { kind: 'ignore' });
  });

  it('a live mode command sets the mode; a retained or unknown one does not', () => {
    assert.deepEqual(interpret('ms/mid/system/mode/set', 'away'), { kind: 'set-mode', mode: 'away' });
    assert.deepEqual(interpret('ms/mid/system/mode/set', 'away', true), { kind: 'ignore' });
    assert.deepEqual(interpret('ms/mid/system/mode/set', 'party'), { kind: 'ignore', reason: 'unknown mode' });
  });

  it('any message on one of our discovery topics, retained or live, is checked against what we published', () => {
    for (const retained of [true, false]) {
      assert.deepEqual(interpret('homeassistant/binary_sensor/mid/person_old_presence/config', '{}', retained), { kind: 'check-config' });
      assert.deepEqual(interpret('homeassistant/device/mid/config', '', retained), { kind: 'check-config' });
    }
    assert.deepEqual(interpret('homeassistant/binary_sensor/other/person_old_presence/config', '{}', true), { kind: 'ignore' }, 'another installation');
    assert.deepEqual(interpret('ms/mid/person/old/presence', 'home', true), { kind: 'ignore' });
  });
});

describe('what the broker is sent (the record of retained topics)', () => {
  const held = new Map<string, string | null>([
    ['a', payloadHash('1')],
    ['b', payloadHash('2')],
    ['doubt', null],
    ['gone', payloadHash('x')],
  ]);

  it('only what the broker does not hold already; clears always; the record minus what should exist cleared last', () => {
    const expected: [string, string][] = [
      ['a', '1'],
      ['b', '3'],
      ['doubt', 'y'],
      ['new', 'z'],
      ['other', ''],
    ];
    assert.deepEqual(
      planPublish(expected, held).map(([topic, payload]) => [topic, payload]),
      [
        ['b', '3'],
        ['doubt', 'y'],
        ['new', 'z'],
        ['other', ''],
      ],
    );
    assert.deepEqual(
      planPublish(expected, held, { clearUnexpected: true })
        .map(([topic, payload]) => [topic, payload])
        .slice(-1),
      [['gone', '']],
    );
    assert.deepEqual(
      planPublish([['a', '1']], held, { force: new Set(['a']) }).map(([topic, payload, hash]) => [topic, payload, hash]),
      [['a', '1', payloadHash('1')]],
    );
  });

  it('a full sync is taken one step at a time as it is sent: its thousands of payloads are never all in memory', async () => {
    const total = 3 * STEP + 7;
    let taken = 0;
    let published = 0;
    let mostUnsent = 0;
    function* messages(): Generator<Outgoing> {
      for (let index = 0; index < total; index++) {
        taken++;
        mostUnsent = Math.max(mostUnsent, taken - published);
        yield [`t/${index}`, 'x', payloadHash('x')];
      }
    }
    const client = {
      connected: true,
      publish: (_topic: string, _payload: string, _options: unknown, callback: (error?: Error) => void) => {
        published++;
        setImmediate(() => callback());
      },
    };
    const record = { write: async () => {} } as unknown as RetainedRecord;
    const publisher = new RetainedPublisher(record, () => {});
    await publisher.send({ client, refused: () => {} } as unknown as PublishTarget, messages());
    assert.equal(published, total);
    assert.ok(mostUnsent <= STEP, `${mostUnsent} messages were built before they were sent (a step is ${STEP})`);
    assert.equal(publisher.held.size, total);
  });

  it('a message matches the record when it is what the broker holds by it (a clear: nothing held)', () => {
    assert.equal(matchesRecord(held, 'a', '1'), true, 'our own publish coming back');
    assert.equal(matchesRecord(held, 'a', '{"fake":true}'), false, 'a stranger replaced it');
    assert.equal(matchesRecord(held, 'a', ''), false, 'a stranger cleared it');
    assert.equal(matchesRecord(held, 'unknown', ''), true, 'our own clear coming back');
    assert.equal(matchesRecord(held, 'unknown', '{}'), false, 'a ghost');
    assert.equal(matchesRecord(held, 'doubt', '{}'), false, 'in doubt: republished');
  });
});

describe('MQTT state payloads', () => {
  it('a person: presence, attributes with the room, and the tracker (home or not_home); a zone: count, occupied, occupants', () => {
    const topics = new Topics('mothership', 'ms-1', 'homeassistant');
    assert.deepEqual(personState(topics, { id: 'ada', name: 'Ada', presence: 'home', zone: 'kitchen', last_seen: '2026-11-21T22:00:00.000Z' }, 'Kitchen'), [
      ['mothership/ms-1/person/ada/presence', 'home'],
      ['mothership/ms-1/person/ada/attributes', '{"zone":"kitchen","room":"Kitchen","last_seen":"2026-11-21T22:00:00.000Z"}'],
      ['mothership/ms-1/person/ada/tracker', 'home'],
    ]);
    const seen = '2026-11-21T22:00:00.000Z';
    assert.equal(personState(topics, { id: 'ada', name: 'Ada', presence: 'home', zone: null, last_seen: seen }, null)[2]![1], 'home');
    assert.equal(personState(topics, { id: 'ada', name: 'Ada', presence: 'not_home', zone: null, last_seen: seen }, null)[2]![1], 'not_home');
    // Not seen yet: no presence and no tracker state (Home Assistant shows unknown), only the attributes.
    assert.deepEqual(personState(topics, { id: 'ada', name: 'Ada', presence: 'not_home', zone: null, last_seen: null }, null), [
      ['mothership/ms-1/person/ada/attributes', '{"zone":null,"room":null,"last_seen":null}'],
    ]);
    assert.deepEqual(zoneState(topics, { id: 'kitchen', name: 'Kitchen', count: 1, occupied: true, occupants: ['ada'] }), [
      'mothership/ms-1/zone/kitchen/occupancy',
      '{"count":1,"occupied":true,"occupants":["ada"]}',
    ]);
  });
});

describe('MQTT client options', () => {
  const base = { ...DEFAULT_SETTINGS.mqtt, enabled: true, broker_url: 'mqtt://broker.lan:1883' };
  it('turns TLS on for mqtts://, wss:// or the TLS flag, trusting the CA and honouring tls_insecure', () => {
    assert.equal(clientOptions(base, 'c').url, 'mqtt://broker.lan:1883');
    // No broker client can make this process hold a message of any size: MQTT 5 asks the broker to drop larger ones.
    assert.equal(clientOptions(base, 'c').options.properties?.maximumPacketSize, MAX_INBOUND_PACKET_BYTES);
    assert.equal(clientOptions({ ...base, protocol_version: '3.1.1' }, 'c').options.properties, undefined);
    assert.equal(clientOptions(base, 'c').options.rejectUnauthorized, undefined);
    const flagged = clientOptions({ ...base, tls: true, ca_cert: 'PEM' }, 'c');
    assert.equal(flagged.url, 'mqtts://broker.lan:1883');
    assert.equal(flagged.options.ca, 'PEM');
    assert.equal(flagged.options.rejectUnauthorized, true);
    assert.equal(clientOptions({ ...base, broker_url: 'ws://h:9001/mqtt', tls: true, tls_insecure: true }, 'c').url, 'wss://h:9001/mqtt');
    assert.equal(clientOptions({ ...base, broker_url: 'wss://h:9001', tls_insecure: true }, 'c').options.rejectUnauthorized, false);
    assert.equal(clientOptions({ ...base, username: 'u', password: 'p' }, 'c').options.password, 'p');
    assert.equal(clientOptions(base, 'c').options.reconnectPeriod, 0, 'we run the backoff ourselves');
  });

  it('explains connection failures', () => {
    assert.match(describeMqttError(Object.assign(new Error('Connection refused: Not authorized'), { code: 5 })), /not authorized/);
    assert.match(describeMqttError(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })), /connection refused/);
    assert.match(
      describeMqttError(Object.assign(new Error('self-signed certificate in certificate chain'), { code: 'SELF_SIGNED_CERT_IN_CHAIN' })),
      /^TLS error/,
    );
  });
});

describe('settings changes', () => {
  it('names the changed fields of each group, and none for a save that changes nothing', () => {
    const stored = applyPatch(DEFAULT_SETTINGS, { mqtt: { enabled: true, broker_url: 'mqtt://h:1883', username: 'u', password: 'p' } });
    assert.deepEqual(changedFields(stored, applyPatch(stored, { webhook: { url: 'http://x/' } })), { mqtt: [], webhook: ['url'] });
    assert.deepEqual(changedFields(stored, applyPatch(stored, { mqtt: { enabled: true, broker_url: 'mqtt://h:1883' } })), { mqtt: [], webhook: [] });
    assert.deepEqual(changedFields(stored, applyPatch(stored, { mqtt: { password: 'q', topic_root: 'r' } })), {
      mqtt: ['password', 'topic_root'],
      webhook: [],
    });
  });
});

describe('settings validation', () => {
  it('checks broker URLs', () => {
    assert.equal(brokerTargetError('mqtt://host:1883'), null);
    assert.equal(brokerTargetError('wss://host:443/mqtt'), null);
    assert.match(brokerTargetError('http://host:1883')!, /mqtt:\/\//);
    assert.match(brokerTargetError('mqtt://host')!, /port/);
    assert.match(brokerTargetError('mqtt://host:70000')!, /URL|port/);
    assert.match(brokerTargetError('notaurl')!, /URL/);
    assert.match(brokerTargetError('not a url')!, /spaces/);
    assert.match(brokerTargetError('mqtt://u:p@host:1883')!, /credentials/);
  });

  it('checks webhook URLs and secrets', () => {
    assert.equal(webhookTargetError('http://192.168.1.5:1880/hook'), null);
    assert.match(webhookTargetError('ftp://x/')!, /http/);
    assert.match(webhookTargetError('https://hooks.example.com:0/x')!, /port must be 1\.\.65535/, 'nothing listens on port 0');
    assert.match(webhookTargetError('http://[::1]:00/x')!, /port must be 1\.\.65535/);
    assert.match(webhookTargetError('http://example.com/\r\nX-Injected: 1')!, /control characters/);
    assert.match(brokerTargetError('mqtt://host:1883/\t')!, /control characters/);
    assert.equal(webhookSecretError('whsec_' + Buffer.alloc(32).toString('base64')), null);
    assert.match(webhookSecretError('secret')!, /whsec_/);
    assert.match(webhookSecretError('whsec_' + Buffer.alloc(8).toString('base64'))!, /24 to 64/);
  });

  it('checks topic prefixes', () => {
    for (const blank of [' ', 'mothership/ /x', '\u200b', 'a/\u3000']) assert.match(topicPrefixError(blank)!, /blank level/, JSON.stringify(blank));
    assert.equal(topicPrefixError('homeassistant'), null);
    assert.equal(topicPrefixError('home/assistant'), null);
    for (const bad of ['', 'a/+/b', '#', '/lead', 'trail/', 'a//b']) assert.ok(topicPrefixError(bad), bad);
  });

  it('keeps absent secrets, clears null and empty ones', () => {
    const stored = {
      ...DEFAULT_SETTINGS,
      mqtt: { ...DEFAULT_SETTINGS.mqtt, password: 'p', ca_cert: 'c' },
      webhook: { ...DEFAULT_SETTINGS.webhook, secret: 's' },
    };
    assert.equal(applyPatch(stored, { mqtt: { username: 'u' } }).mqtt.password, 'p');
    assert.equal(applyPatch(stored, { mqtt: { password: null } }).mqtt.password, '');
    assert.equal(applyPatch(stored, { mqtt: { ca_cert: '' } }).mqtt.ca_cert, '');
    assert.equal(applyPatch(stored, { webhook: { url: 'http://x/' } }).webhook.secret, 's');
    assert.equal(applyPatch(stored, { webhook: { secret: null } }).webhook.secret, '');
  });
});

describe("Home Assistant's person over what Mothership publishes (HA's own logic, test/helpers/home-assistant.ts)", () => {
  const topics = new Topics('mothership', 'ms-1', 'homeassistant');
  const [trackerConfig] = personConfigs(context, { id: 'ada', name: 'Ada' });
  const tracker = trackerConfig!.payload as { payload_home: string; payload_not_home: string; source_type: TrackerState['source_type']; state_topic: string };
  /** Ada's tracker as Home Assistant holds it after Mothership published her state at `at`. */
  const ours = (person: { presence: 'home' | 'not_home'; zone: string | null }, zoneName: string | null, at: number): TrackerState => {
    const published = new Map(personState(topics, { id: 'ada', name: 'Ada', last_seen: '2026-11-21T22:00:00.000Z', ...person }, zoneName));
    return {
      entity_id: 'device_tracker.mothership_ada',
      state: mqttTrackerState(tracker, published.get(tracker.state_topic)!),
      source_type: tracker.source_type,
      last_updated: at,
    };
  };
  const phone = (state: string, at: number): TrackerState => ({ entity_id: 'device_tracker.phone', state, source_type: 'gps', last_updated: at });
  const inKitchen = { presence: 'home' as const, zone: 'kitchen' };
  const away = { presence: 'not_home' as const, zone: null };

  it('without a phone: home in a room, not_home away', () => {
    assert.equal(personStateFromTrackers([ours(inKitchen, 'Kitchen', 2)]), 'home');
    assert.equal(personStateFromTrackers([ours({ presence: 'home', zone: null }, null, 2)]), 'home');
    assert.equal(personStateFromTrackers([ours(away, null, 2)]), 'not_home');
  });

  it("with a phone's GPS tracker: home whenever Mothership sees the person at home, even with a stale or newer phone saying away; the phone's zone when away", () => {
    assert.equal(personStateFromTrackers([ours(inKitchen, 'Kitchen', 2), phone('not_home', 1)]), 'home', 'stale phone');
    assert.equal(personStateFromTrackers([ours(inKitchen, 'Kitchen', 1), phone('not_home', 2)]), 'home', 'newer phone');
    assert.equal(personStateFromTrackers([ours(away, null, 2), phone('Work', 1)]), 'Work', 'away: the phone says where');
    assert.equal(personStateFromTrackers([ours(away, null, 2), phone('unavailable', 3)]), 'not_home');
  });

  it('a person not seen yet: the tracker holds no state (unknown), so person shows unknown, or the phone when there is one', () => {
    const published = new Map(personState(topics, { id: 'ada', name: 'Ada', presence: 'not_home', zone: null, last_seen: null }, null));
    assert.equal(published.has(tracker.state_topic), false);
    // An MQTT entity that never received a state message is `unknown` in Home Assistant.
    const unseen: TrackerState = { entity_id: 'device_tracker.mothership_ada', state: 'unknown', source_type: tracker.source_type, last_updated: 2 };
    assert.equal(personStateFromTrackers([unseen]), null);
    assert.equal(personStateFromTrackers([unseen, phone('Work', 1)]), 'Work');
  });

  it('the room sensor shows the room, unknown outside any', () => {
    const [, , roomConfig] = personConfigs(context, { id: 'ada', name: 'Ada' });
    const { value_template, state_topic } = roomConfig!.payload as { value_template: string; state_topic: string };
    assert.equal(value_template, "{{ value_json.room if value_json.room else 'None' }}");
    // The template, evaluated as Jinja would for these two values.
    const render = (attributes: { room: string | null }) => (attributes.room ? attributes.room : 'None');
    const attributesOf = (person: { presence: 'home' | 'not_home'; zone: string | null }, zoneName: string | null) =>
      JSON.parse(new Map(personState(topics, { id: 'ada', name: 'Ada', last_seen: '2026-11-21T22:00:00.000Z', ...person }, zoneName)).get(state_topic)!);
    assert.equal(mqttSensorState(render(attributesOf(inKitchen, 'Kitchen'))), 'Kitchen');
    assert.equal(mqttSensorState(render(attributesOf(away, null))), null);
  });
});

describe('what the sweep may clear when the service did not publish it', () => {
  const topics = new Topics('ms', 'mid', 'homeassistant');
  it('configs under its discovery topics and its state topics; not availability, the generation marker, commands or others', () => {
    for (const topic of ['homeassistant/sensor/mid/fake/config', 'homeassistant/device/mid/config', 'ms/mid/person/ada/state', 'ms/mid/legacy'])
      assert.equal(sweepable(topics, topic), true, topic);
    for (const topic of [
      'ms/mid/availability',
      'ms/mid/generation',
      'ms/mid/generation/probe',
      'ms/mid/system/mode/set',
      'ms/other/person/ada/presence',
      'homeassistant/sensor/other/x/config',
    ])
      assert.equal(sweepable(topics, topic), false, topic);
  });
});
