import type * as Mqtt from 'mqtt';

let library: typeof Mqtt | null = null;
let loading: Promise<typeof Mqtt> | null = null;

/**
 * mqtt.js, imported by the first connection rather than at start: MQTT is off by default, and a
 * start without it does not pay for importing mqtt.js and its dependencies.
 */
export function loadMqtt(): Promise<typeof Mqtt> {
  return (loading ??= import('mqtt').then((loaded) => (library = loaded)));
}

/** mqtt.js for what only runs on a connection it made (loadMqtt has resolved by then). */
export function loadedMqtt(): typeof Mqtt {
  if (!library) throw new Error('mqtt.js is used before loadMqtt() resolved');
  return library;
}
