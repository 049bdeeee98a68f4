import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { FastifyBaseLogger } from 'fastify';
import { ThrottledLog } from '../src/http/index.js';
import { Metrics } from '../src/ops/metrics.js';
import { InboundGuard } from '../src/mqtt/inbound.js';
import { logConnectionChange, NOTHING_LOGGED } from '../src/mqtt/status-log.js';
import { attemptFailed, connectionClosed, contestedReason, reconnectDelay, UNCONTESTED } from '../src/mqtt/takeover.js';
import { describeMqttError, NO_CONNECTION } from '../src/mqtt/connection.js';
import { loadMqtt } from '../src/mqtt/library.js';
import { refusal, refusalCode, RefusalLog } from '../src/mqtt/refusals.js';

const policy = { sessionMs: 60_000, backoffMs: 300_000 };

/** A logger that keeps its lines. */
function recorder() {
  const lines: { level: string; msg: string; fields: Record<string, unknown> }[] = [];
  const at = (level: string) => (fields: Record<string, unknown> | string, msg?: string) =>
    lines.push(typeof fields === 'string' ? { level, msg: fields, fields: {} } : { level, msg: msg!, fields });
  return { lines, log: { info: at('info'), warn: at('warn') } as unknown as FastifyBaseLogger };
}

describe('a client id taken by another client', () => {
  it('is contested after three connections in a row cut short, and free again after one that held', () => {
    let state = UNCONTESTED;
    state = connectionClosed(state, 5000, policy);
    state = connectionClosed(state, 5000, policy);
    assert.equal(state.contested, false);
    state = connectionClosed(state, 5000, policy);
    assert.equal(state.contested, true);
    assert.equal(connectionClosed(state, 1000, policy).contested, true, 'a probe cut short again');
    assert.deepEqual(connectionClosed(state, 60_000, policy), UNCONTESTED);
  });

  it('a connection that held in between starts the count again', () => {
    let state = UNCONTESTED;
    for (const lasted of [5000, 5000, 3_600_000, 5000, 5000]) state = connectionClosed(state, lasted, policy);
    assert.equal(state.contested, false);
  });

  it('a failed attempt in between (the broker away, not taken) starts the count again; a contested id stays so', () => {
    let state = UNCONTESTED;
    state = attemptFailed(connectionClosed(connectionClosed(state, 5000, policy), 5000, policy));
    assert.equal(connectionClosed(state, 5000, policy).contested, false);
    const contested = { cutShort: 3, contested: true };
    assert.deepEqual(attemptFailed(contested), contested);
  });

  it('backs off for the takeover delay while contested, never shorter than the usual one', () => {
    assert.equal(reconnectDelay(UNCONTESTED, 5000, policy), 5000);
    assert.equal(reconnectDelay({ cutShort: 3, contested: true }, 5000, policy), 300_000);
    assert.equal(reconnectDelay({ cutShort: 3, contested: true }, 5000, { sessionMs: 1000, backoffMs: 100 }), 5000);
  });

  it('says what happens and what to check', () => {
    assert.equal(
      contestedReason('mothership-ms-1', policy),
      "another client keeps connecting with this installation's client id (mothership-ms-1): the broker closed 3 connections in a row within 60 s of accepting them. Is an older release still running (see Upgrading in docs/operations.md)? Trying again every 300 s instead of taking the client id back",
    );
  });

  it('is logged once when it starts and once when it ends, not at each attempt; a loss names its reason', () => {
    const { lines, log } = recorder();
    let logged = NOTHING_LOGGED;
    const at = (status: Partial<typeof NO_CONNECTION>) => (logged = logConnectionChange(log, logged, { ...NO_CONNECTION, ...status }));
    at({ connected: true });
    at({ next_reconnect_at: '2026-01-01T00:00:01Z' });
    const contested = { client_id_conflict: true, last_error: contestedReason('mothership-ms-1', policy) };
    at({ ...contested, next_reconnect_at: '2026-01-01T00:05:00Z' });
    for (let probe = 2; probe < 5; probe++) {
      at({ ...contested, connected: true });
      at({ ...contested, next_reconnect_at: `2026-01-01T00:${probe}5:00Z` });
    }
    at({ ...contested, connected: true });
    at({ connected: true });
    assert.deepEqual(
      lines.map((line) => `${line.level} ${line.msg.slice(0, 50)}`),
      [
        'info MQTT connected',
        'warn MQTT connection lost: closed by the broker',
        'warn MQTT: another client keeps connecting with this in',
        'info MQTT: the client id is ours again (the connection ',
      ],
    );
    assert.equal(lines[1]!.fields.reason, 'closed by the broker');
  });

  it('names a socket the broker closed under a write or reset as closed by the broker, not by its errno', () => {
    // A takeover closes the socket; a publish under way at that moment fails with EPIPE first.
    for (const [message, code] of [
      ['write EPIPE', 'EPIPE'],
      ['read ECONNRESET', 'ECONNRESET'],
    ])
      assert.equal(describeMqttError(Object.assign(new Error(message), { code })), 'connection closed by the broker', code);
  });
});

describe('inbound MQTT commands', () => {
  const topic = 'mothership/ms-1/system/mode/set';
  const setup = () => {
    const { lines, log } = recorder();
    const metrics = new Metrics();
    return { lines, metrics, guard: new InboundGuard({ log, throttledLog: new ThrottledLog(log), metrics }) };
  };
  const count = async (metrics: Metrics, outcome: string) =>
    (await metrics.mqttCommands.get()).values.find((value) => value.labels.outcome === outcome)?.value ?? 0;

  it('follows a burst of 5 mode commands per topic, then refuses, with one log line per reason', async () => {
    const { lines, metrics, guard } = setup();
    const admitted = Array.from({ length: 100 }, () => guard.admit(topic, 'away', { kind: 'set-mode', mode: 'away' })).filter(Boolean).length;
    for (let index = 0; index < 100; index++) guard.admit(topic, 'party', { kind: 'ignore', reason: 'unknown mode' });
    assert.equal(admitted, 5);
    assert.equal(guard.admit('other/topic', 'online', { kind: 'full-sync' }), true, 'each topic has its own bucket');
    assert.deepEqual(
      lines.map((line) => line.msg),
      ['MQTT command refused: over the rate limit', 'ignored MQTT message: unknown mode'],
    );
    assert.deepEqual([await count(metrics, 'accepted'), await count(metrics, 'rate_limited'), await count(metrics, 'invalid')], [6, 95, 100]);
  });

  it('never limits the watch of the own discovery topics, nor logs what it ignores silently', () => {
    const { lines, guard } = setup();
    for (let index = 0; index < 100; index++) {
      assert.equal(guard.admit('homeassistant/sensor/ms-1/x/config', '{}', { kind: 'check-config' }), true);
      assert.equal(guard.admit(topic, 'away', { kind: 'ignore' }), false);
    }
    assert.equal(lines.length, 0);
  });
});

describe('what the broker refuses', () => {
  // A refusal names its reason code with mqtt.js's table, loaded by the connection that was refused.
  before(() => loadMqtt());

  it('is a reason code of 0x80 or more; success codes and connection failures are not refusals', () => {
    assert.equal(refusalCode(Object.assign(new Error('Publish error: Not authorized'), { code: 0x87 })), 0x87);
    assert.equal(refusalCode(Object.assign(new Error('x'), { code: 0x10 })), null);
    assert.equal(refusalCode(new Error('connection closed before the broker acknowledged')), null);
    assert.equal(refusalCode(Object.assign(new Error('x'), { code: 'ECONNRESET' })), null);
    assert.deepEqual(
      { ...refusal('subscribe', 'homeassistant/status', 0x87), at: '' },
      {
        kind: 'subscribe',
        topic: 'homeassistant/status',
        reason: 'not authorized',
        reason_code: 0x87,
        at: '',
      },
    );
  });

  it('is logged at most once a minute per kind and reason, and every refusal is counted', async () => {
    const { lines, log } = recorder();
    const metrics = new Metrics();
    const refusals = new RefusalLog({ log, throttledLog: new ThrottledLog(log), metrics });
    for (let index = 0; index < 100; index++) refusals.report(refusal('publish', `ha/binary_sensor/ms-1/x${index}/config`, 0x87));
    refusals.report(refusal('publish', 'ha/sensor/ms-1/quality/config', 0x97));
    refusals.report(refusal('subscribe', 'homeassistant/status', 0x87));
    refusals.report(refusal('subscribe', 'homeassistant/status', 0x87));
    assert.deepEqual(
      lines.map((line) => `${line.level} ${line.msg} ${line.fields.reason}`),
      [
        'warn MQTT: the broker refused a publish (check its ACL) not authorized',
        'warn MQTT: the broker refused a publish (check its ACL) quota exceeded',
        'warn MQTT: the broker refused a subscription (check its ACL) not authorized',
      ],
    );
    assert.equal(lines[0]!.fields.topic, 'ha/binary_sensor/ms-1/x0/config');
    const counted = (await metrics.mqttRefusals.get()).values.map((value) => `${value.labels.kind} ${value.labels.reason} ${value.value}`);
    assert.deepEqual(counted.sort(), ['publish not authorized 100', 'publish quota exceeded 1', 'subscribe not authorized 2']);
  });
});
