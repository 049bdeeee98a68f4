/**
 * Home Assistant's own logic, ported to read what Mothership publishes the way Home Assistant does.
 * Ported faithfully, not redesigned: a test that disagrees with Home Assistant is the one to fix.
 */

/** A device tracker's state as Home Assistant's `person` sees it. */
export interface TrackerState {
  entity_id: string;
  state: string;
  source_type: 'gps' | 'router' | 'bluetooth' | 'bluetooth_le';
  /** When the state last changed (HA's `State.last_updated`). */
  last_updated: number;
}

/**
 * homeassistant/components/mqtt/device_tracker.py, `MqttDeviceTracker`'s state message handler: a
 * payload equal to `payload_home` is `home`, to `payload_not_home` is `not_home`, and any other
 * payload is taken as a location name, shown as the state as it is.
 */
export function mqttTrackerState(config: { payload_home: string; payload_not_home: string }, payload: string): string {
  if (payload === config.payload_home) return 'home';
  if (payload === config.payload_not_home) return 'not_home';
  return payload;
}

/**
 * homeassistant/components/person/__init__.py, `Person._update_state` (current form, quoted below;
 * the index of public sources here holds it without a commit id; commit 2d456c4e2f01811465a9c2bcfed01e022cbfb418
 * has the older form, whose last branch was `elif state.state == STATE_NOT_HOME`, which ignores a
 * non-GPS tracker showing a zone name instead of reading it like `not_home`: either way a room name
 * never wins over GPS):
 *
 *     if not state or state.state in IGNORE_STATES:          # unknown, unavailable
 *         continue
 *     if state.attributes.get(ATTR_SOURCE_TYPE) == SourceType.GPS:
 *         latest_gps = _get_latest(latest_gps, state)
 *     elif state.state == STATE_HOME:
 *         latest_non_gps_home = _get_latest(latest_non_gps_home, state)
 *     else:
 *         latest_not_home = _get_latest(latest_not_home, state)
 *
 *     if latest_non_gps_home:   latest = latest_non_gps_home
 *     elif latest_gps:          latest = latest_gps
 *     else:                     latest = latest_not_home
 *
 * `_get_latest` keeps the state with the later `last_updated`. The person's state is `latest.state`,
 * or None (unknown) without one.
 */
export function personStateFromTrackers(trackers: TrackerState[]): string | null {
  const latestOf = (previous: TrackerState | null, current: TrackerState) =>
    previous === null || current.last_updated > previous.last_updated ? current : previous;
  let latestNonGpsHome: TrackerState | null = null;
  let latestNotHome: TrackerState | null = null;
  let latestGps: TrackerState | null = null;
  for (const state of trackers) {
    if (state.state === 'unknown' || state.state === 'unavailable') continue;
    if (state.source_type === 'gps') latestGps = latestOf(latestGps, state);
    else if (state.state === 'home') latestNonGpsHome = latestOf(latestNonGpsHome, state);
    else latestNotHome = latestOf(latestNotHome, state);
  }
  const latest = latestNonGpsHome ?? latestGps ?? latestNotHome;
  return latest?.state ?? null;
}

/** homeassistant/components/mqtt/sensor.py: a rendered value of `None` (PAYLOAD_NONE) makes the state unknown (null). */
export function mqttSensorState(rendered: string): string | null {
  return rendered === 'None' ? null : rendered;
}
