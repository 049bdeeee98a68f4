import { MODES } from '../presence/index.js';
import type { Topics } from './topics.js';

/**
 * Home Assistant MQTT discovery configs (pure). Keys follow Home Assistant's MQTT platform schemas
 * (homeassistant/components/mqtt/{binary_sensor,sensor,select}.py): Home Assistant drops unknown keys
 * and refuses invalid combinations with only a log line, so the tests pin these payloads exactly.
 */
export interface DiscoveryMessage {
  topic: string;
  /** The config object; `null` clears the entity (empty retained payload). */
  payload: Record<string, unknown> | null;
}

export interface DiscoveryContext {
  topics: Topics;
  version: string;
}

const device = ({ topics, version }: DiscoveryContext) => ({
  identifiers: [`mothership_${topics.mid}`],
  name: `Mothership ${topics.mid}`,
  manufacturer: 'Mothership',
  model: 'Presence hub',
  sw_version: version,
});

/**
 * The entity id Home Assistant should give the entity (`default_entity_id`, HA 2025.10+; older
 * versions drop the key): readable (`binary_sensor.mothership_ada_presence`) instead of one built
 * from the random installation id. Made valid for HA's entity id rule (lowercase letters, digits,
 * single underscores, none at either end), since an invalid one makes HA refuse the whole config.
 */
export function defaultEntityId(component: string, ...words: string[]): string {
  const objectId = ['mothership', ...words]
    .join('_')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '');
  return `${component}.${objectId}`;
}

/** What every entity of the installation has in common. */
const shared = (context: DiscoveryContext) => ({
  availability: [{ topic: context.topics.availability, payload_available: 'online', payload_not_available: 'offline' }],
  device: device(context),
  origin: { name: 'Mothership', sw_version: context.version },
  qos: 1,
});

function common(context: DiscoveryContext, uniqueSuffix: string, name: string, entityId: string) {
  return { name, unique_id: `${context.topics.mid}_${uniqueSuffix}`, default_entity_id: entityId, ...shared(context) };
}

export function personConfigs(context: DiscoveryContext, person: { id: string; name: string }): DiscoveryMessage[] {
  const { topics } = context;
  return [
    {
      // What Home Assistant's `person` entity takes as a source (it takes no binary sensor). Its
      // state is only home / not_home (see state.ts: a room name would read as away to `person`).
      topic: topics.discovery('device_tracker', `person_${person.id}`),
      payload: {
        ...common(context, `person_${person.id}_tracker`, person.name, defaultEntityId('device_tracker', person.id)),
        state_topic: topics.personTracker(person.id),
        payload_home: 'home',
        payload_not_home: 'not_home',
        source_type: 'router',
        json_attributes_topic: topics.personAttributes(person.id),
      },
    },
    {
      topic: topics.discovery('binary_sensor', `person_${person.id}_presence`),
      payload: {
        ...common(context, `person_${person.id}_presence`, `${person.name} presence`, defaultEntityId('binary_sensor', person.id, 'presence')),
        state_topic: topics.personPresence(person.id),
        payload_on: 'home',
        payload_off: 'not_home',
        device_class: 'presence',
        json_attributes_topic: topics.personAttributes(person.id),
      },
    },
    {
      // The room, from the attributes; `None` (no room) is Home Assistant's payload for "unknown".
      topic: topics.discovery('sensor', `person_${person.id}_room`),
      payload: {
        ...common(context, `person_${person.id}_room`, `${person.name} room`, defaultEntityId('sensor', person.id, 'room')),
        state_topic: topics.personAttributes(person.id),
        value_template: "{{ value_json.room if value_json.room else 'None' }}",
        icon: 'mdi:map-marker',
      },
    },
  ];
}

export function zoneConfigs(context: DiscoveryContext, zone: { id: string; name: string }): DiscoveryMessage[] {
  const { topics } = context;
  const state = topics.zoneOccupancy(zone.id);
  return [
    {
      topic: topics.discovery('sensor', `zone_${zone.id}_count`),
      payload: {
        ...common(context, `zone_${zone.id}_count`, `${zone.name} occupants`, defaultEntityId('sensor', zone.id, 'occupancy_count')),
        state_topic: state,
        value_template: '{{ value_json.count }}',
        state_class: 'measurement',
        icon: 'mdi:account-group',
        json_attributes_topic: state,
      },
    },
    {
      topic: topics.discovery('binary_sensor', `zone_${zone.id}_occupied`),
      payload: {
        ...common(context, `zone_${zone.id}_occupied`, `${zone.name} occupied`, defaultEntityId('binary_sensor', zone.id, 'occupied')),
        state_topic: state,
        value_template: "{{ 'ON' if value_json.occupied else 'OFF' }}",
        payload_on: 'ON',
        payload_off: 'OFF',
        device_class: 'occupancy',
      },
    },
  ];
}

export function systemConfigs(context: DiscoveryContext): DiscoveryMessage[] {
  const { topics } = context;
  return [
    {
      topic: topics.discovery('binary_sensor', 'fall'),
      payload: {
        ...common(context, 'fall', 'Fall detected', defaultEntityId('binary_sensor', 'fall_detected')),
        state_topic: topics.fall,
        value_template: '{{ value_json.state }}',
        payload_on: 'ON',
        payload_off: 'OFF',
        device_class: 'safety',
        json_attributes_topic: topics.fall,
      },
    },
    {
      topic: topics.discovery('sensor', 'node_count'),
      payload: {
        ...common(context, 'node_count', 'Online nodes', defaultEntityId('sensor', 'online_nodes')),
        state_topic: topics.health,
        value_template: '{{ value_json.node_count }}',
        state_class: 'measurement',
        entity_category: 'diagnostic',
        icon: 'mdi:access-point-network',
      },
    },
    {
      topic: topics.discovery('sensor', 'quality'),
      payload: {
        ...common(context, 'quality', 'Sensing quality', defaultEntityId('sensor', 'sensing_quality')),
        state_topic: topics.health,
        value_template: '{{ value_json.quality }}',
        unit_of_measurement: '%',
        state_class: 'measurement',
        entity_category: 'diagnostic',
        icon: 'mdi:signal',
      },
    },
    {
      topic: topics.discovery('select', 'mode'),
      payload: {
        ...common(context, 'mode', 'System mode', defaultEntityId('select', 'mode')),
        state_topic: topics.mode,
        command_topic: topics.modeCommand,
        options: [...MODES],
        icon: 'mdi:home-switch',
      },
    },
  ];
}

/** Every config of the installation, in a stable order. */
export function allConfigs(context: DiscoveryContext, persons: { id: string; name: string }[], zones: { id: string; name: string }[]): DiscoveryMessage[] {
  return [...eachConfig(context, persons, zones)];
}

/** allConfigs one entity at a time: a full sync never holds thousands of config objects at once. */
function* eachConfig(context: DiscoveryContext, persons: { id: string; name: string }[], zones: { id: string; name: string }[]): Generator<DiscoveryMessage> {
  yield* systemConfigs(context);
  for (const person of persons) yield* personConfigs(context, person);
  for (const zone of zones) yield* zoneConfigs(context, zone);
}

/**
 * The device-based form of `configs` (homeassistant/components/mqtt/discovery.py, device discovery):
 * one message at `{prefix}/device/{mid}/config` whose `cmps` hold each entity under its per-entity
 * object id, so each keeps its discovery id (`{mid} {object id}`) and unique_id across a switch of
 * form. `device`, `origin` and `availability` are shared at the top (HA copies them into every
 * component); `qos` is repeated in each component too, since HA does not copy it and a component
 * without one subscribes at QoS 0. A component in `removed` is sent as its platform alone, HA's
 * removal signal.
 */
export function deviceConfig(context: DiscoveryContext, configs: DiscoveryMessage[], removed: DiscoveryMessage[] = []): DiscoveryMessage {
  const { topics } = context;
  const components: Record<string, Record<string, unknown>> = {};
  for (const message of removed) {
    const entity = topics.entityOf(message.topic);
    if (entity) components[entity.objectId] = { p: entity.component };
  }
  const common = shared(context);
  for (const message of configs) {
    const entity = topics.entityOf(message.topic);
    if (!entity || !message.payload) continue;
    const own = Object.fromEntries(Object.entries(message.payload).filter(([key]) => !(key in common)));
    components[entity.objectId] = { p: entity.component, ...own, qos: common.qos };
  }
  return { topic: topics.deviceDiscovery, payload: { ...common, cmps: components } };
}

type Entities = [persons: { id: string; name: string }[], zones: { id: string; name: string }[], removed?: DiscoveryMessage[]];

/** Every discovery message in the configured form: a config per entity, or the one device config (`removed`: entities it drops). */
export function discoveryInForm(context: DiscoveryContext, mode: 'entity' | 'device', ...entities: Entities): DiscoveryMessage[] {
  return [...inForm(context, mode, ...entities)];
}

/** discoveryInForm as retained messages (topic, payload text), each built as it is taken. */
export function* eachDiscoveryInForm(context: DiscoveryContext, mode: 'entity' | 'device', ...entities: Entities): Generator<[topic: string, payload: string]> {
  for (const message of inForm(context, mode, ...entities)) yield [message.topic, payloadText(message)];
}

function inForm(
  context: DiscoveryContext,
  mode: 'entity' | 'device',
  persons: Entities[0],
  zones: Entities[1],
  removed: DiscoveryMessage[] = [],
): Iterable<DiscoveryMessage> {
  return mode === 'device' ? [deviceConfig(context, allConfigs(context, persons, zones), removed)] : eachConfig(context, persons, zones);
}

/** A discovery message's retained payload: its JSON, or empty to remove it. */
export const payloadText = (message: DiscoveryMessage): string => (message.payload === null ? '' : JSON.stringify(message.payload));

/** Empty payloads for a deleted person's or zone's discovery topics (removes the entities). */
export function removal(messages: DiscoveryMessage[]): DiscoveryMessage[] {
  return messages.map((message) => ({ topic: message.topic, payload: null }));
}
