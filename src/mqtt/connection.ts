import { connect as netConnect, isIP } from 'node:net';
import { PassThrough, type Duplex } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import type { IClientOptions, MqttClient } from 'mqtt';
import { describeTlsError, ForbiddenTargetError, guardedLookup, isForbiddenAddress, normalizedHost } from '../outbound.js';
import { effectiveBrokerUrl, type IntegrationSettings } from '../settings/index.js';
import { backoffDelay } from './backoff.js';
import { describeClientCertificateAlert } from './client-certificate.js';
import { loadMqtt } from './library.js';
import { countRefusal, NO_REFUSALS, refusal, type Refusal, type RefusalCounts, type RefusalKind } from './refusals.js';
import { attemptFailed, connectionClosed, contestedReason, reconnectDelay, UNCONTESTED, type TakeoverPolicy, type TakeoverState } from './takeover.js';

export interface MqttStatus extends RefusalCounts {
  connected: boolean;
  last_error: string | null;
  last_connected_at: string | null;
  next_reconnect_at: string | null;
  /** Another client keeps connecting with the installation's client id (takeover.ts); `last_error` says so. */
  client_id_conflict: boolean;
}

export const NO_CONNECTION: MqttStatus = {
  connected: false,
  last_error: null,
  last_connected_at: null,
  next_reconnect_at: null,
  client_id_conflict: false,
  ...NO_REFUSALS,
};

export type MqttSettings = IntegrationSettings['mqtt'];

const CLOSE_GRACE_MS = 2000;
/**
 * mqtt.js's debug log, off unless DEBUG asks for logs: disabled, its calls still allocate their
 * arguments, several per packet, and a full sync sends tens of thousands of packets.
 */
const MQTT_JS_LOG: Pick<IClientOptions, 'log'> = process.env.DEBUG ? {} : { log: () => {} };

/**
 * The largest packet the broker may send us (MQTT 5's Maximum Packet Size; the broker drops larger
 * ones): far above a building's device discovery config, far below what any client of the broker
 * could otherwise make this process hold (the measurement: CHANGELOG.md). MQTT 3.1.1
 * has no such field: there the broker's own limit (Mosquitto's `message_size_limit`) is the bound.
 */
export const MAX_INBOUND_PACKET_BYTES = 16 * 1024 * 1024;

/** mqtt.js options from the settings: MQTT 5 unless set to 3.1.1; TLS for mqtts://, wss:// or the TLS flag, with an optional CA and client certificate. */
export function clientOptions(settings: MqttSettings, clientId: string, will?: IClientOptions['will']): { url: string; options: IClientOptions } {
  const url = effectiveBrokerUrl(settings);
  const tls = url.protocol === 'mqtts:' || url.protocol === 'wss:';
  const options: IClientOptions = {
    clientId,
    protocolVersion: settings.protocol_version === '3.1.1' ? 4 : 5,
    ...(settings.protocol_version === '3.1.1' ? {} : { properties: { maximumPacketSize: MAX_INBOUND_PACKET_BYTES } }),
    clean: true,
    // We run the reconnect schedule ourselves (mqtt.js only has a fixed period).
    reconnectPeriod: 0,
    connectTimeout: 10_000,
    keepalive: 30,
    ...MQTT_JS_LOG,
    ...(settings.username ? { username: settings.username } : {}),
    ...(settings.password ? { password: settings.password } : {}),
    ...(tls
      ? {
          rejectUnauthorized: !settings.tls_insecure,
          ...(settings.ca_cert ? { ca: settings.ca_cert } : {}),
          ...(settings.client_cert && settings.client_key ? { cert: settings.client_cert, key: settings.client_key } : {}),
        }
      : {}),
    ...(will ? { will } : {}),
  };
  return { url: url.toString(), options };
}

/**
 * A client whose every connection attempt (first and each reconnect) goes through the outbound
 * address policy on the address actually connected: our own stream for each transport instead of
 * mqtt.js's, whose TCP transport takes no `lookup`. mqtt.js, and ws for a WebSocket broker, are
 * imported here, by the first connection.
 */
export async function connectBroker(target: { url: string; options: IClientOptions }): Promise<MqttClient> {
  const url = new URL(target.url);
  const { MqttClient } = await loadMqtt();
  const ws = url.protocol === 'ws:' || url.protocol === 'wss:' ? await import('ws') : null;
  // No valid host (refused when saved): the guarded lookup still decides on what it resolves to.
  const host = normalizedHost(url) ?? url.hostname;
  const port = Number(url.port);
  const { ca, cert, key, rejectUnauthorized } = target.options;
  const tls = { ca, cert, key, rejectUnauthorized };
  const open = (): Duplex => {
    if (isForbiddenAddress(host)) {
      const refused = new PassThrough();
      process.nextTick(() => refused.destroy(new ForbiddenTargetError(host)));
      return refused;
    }
    if (url.protocol === 'mqtt:') return netConnect({ host, port, lookup: guardedLookup });
    if (url.protocol === 'mqtts:') return tlsConnect({ host, port, lookup: guardedLookup, ...(isIP(host) ? {} : { servername: host }), ...tls });
    const socket = new ws!.WebSocket(url, ['mqtt'], { lookup: guardedLookup, ...tls });
    const stream = ws!.createWebSocketStream(socket);
    socket.on('close', () => stream.destroy());
    return stream;
  };
  const client = new MqttClient(open, target.options);
  client.on('error', () => {}); // as mqtt.connect does: errors are also reported through 'close'; callers add their own listeners
  return client;
}

/** The errors mqtt-packet's parser raises when the bytes that came back are not MQTT. */
const MQTT_PARSER_ERROR = /^(Invalid|Malformed|Cannot parse|Packet|Not supported|Unknown property|Connect flag|Will )/;

/** A connection the broker ended, with or without an errno on the way. */
const CLOSED_BY_BROKER = 'connection closed by the broker';

/**
 * A readable reason for a failed connection (shown next to the dashboard's Test button). For a host
 * that is not the saved broker (`detailed` false) socket-level reasons are folded into one, so the
 * test cannot tell a closed port from a filtered one or a non-MQTT service.
 */
export function describeMqttError(error: Error & { code?: string | number }, detailed = true): string {
  const code = error.code;
  if (code === 4 || code === 134) return 'bad username or password';
  if (code === 5 || code === 135) return 'not authorized: check the username and password';
  if (error instanceof ForbiddenTargetError) return error.message;
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host not found';
  const tls = describeClientCertificateAlert(error) ?? describeTlsError(error);
  if (tls) return tls;
  if (!detailed) return 'no MQTT broker answered at that host and port';
  if (code === 'ECONNREFUSED') return 'connection refused: is the broker running on that host and port?';
  if (code === 'ETIMEDOUT') return 'timed out';
  // The broker closed the socket (another client took the client id, the broker stopped) while a
  // packet was on its way out or in: the close itself says the same with no errno.
  if (code === 'EPIPE' || code === 'ECONNRESET') return CLOSED_BY_BROKER;
  if (error.message === 'connack timeout')
    return "no MQTT answer: something accepted the connection but never answered as a broker (is this the broker's MQTT port?)";
  if (code === undefined && MQTT_PARSER_ERROR.test(error.message))
    return 'that port does not speak MQTT (an HTTP server?): brokers usually listen on 1883, or 8883 with TLS';
  return error.message || String(error);
}

/** Mosquitto's uptime in whole seconds, published every `sys_interval` (10 s by default). */
const BROKER_UPTIME_TOPIC = '$SYS/broker/uptime';
/** One `sys_interval` of Mosquitto's default, and a second for the message to come. */
const BROKER_UPTIME_WAIT_MS = 11_000;

/**
 * How long the broker says it has been up, in ms (`$SYS/broker/uptime`, `N seconds`), from the next
 * time it publishes it: the retained figure can be a `sys_interval` old. Null when it does not say
 * within the wait (another broker, `$SYS` off or refused) or the connection closes first. Read apart
 * from the integration's subscriptions: a refusal here is no refusal of ours to report.
 */
function brokerUptimeMs(client: MqttClient): Promise<number | null> {
  return new Promise((resolve) => {
    const done = (uptime: number | null) => {
      clearTimeout(timer);
      client.off('message', onMessage).off('close', onClose);
      if (client.connected) client.unsubscribe(BROKER_UPTIME_TOPIC, () => {});
      resolve(uptime);
    };
    const onMessage = (topic: string, payload: Buffer, packet: { retain: boolean }) => {
      if (topic !== BROKER_UPTIME_TOPIC || packet.retain) return;
      const seconds = /^(\d+) seconds$/.exec(payload.toString('utf8'));
      done(seconds ? Number(seconds[1]) * 1000 : null);
    };
    const onClose = () => done(null);
    const timer = setTimeout(onClose, BROKER_UPTIME_WAIT_MS);
    timer.unref();
    client.on('message', onMessage).once('close', onClose);
    client.subscribe(BROKER_UPTIME_TOPIC, { qos: 0 }, (error, granted) => {
      if (error || (granted?.[0]?.qos ?? 0x80) >= 0x80) done(null);
    });
  });
}

type ConnectionBackoff = { initialMs: number; maxMs: number; takeover: TakeoverPolicy };
interface ConnectionHooks {
  onConnect: () => void;
  onStatus: (status: MqttStatus) => void;
  onReconnectAttempt: () => void;
  onCutShort: () => void;
  onRefusal: (refused: Refusal) => void;
}

/**
 * One broker connection with its reconnect schedule (MQTT_BACKOFF_*: doubling up to a cap, reset
 * after a successful connect; MQTT_TAKEOVER_BACKOFF_MS while another client keeps
 * taking the client id), the Last Will, and a status for the settings API.
 */
export class MqttConnection {
  private attempts = 0;
  private retryTimer: NodeJS.Timeout | null = null;
  private closing = false;
  private takeover = UNCONTESTED;
  /** When the current connection was accepted (0: not connected), and the timer that says it held. */
  private connectedAt = 0;
  /** When the last connection the broker cut short had been accepted (0: none since one held). */
  private cutShortAt = 0;
  private heldTimer: NodeJS.Timeout | null = null;
  readonly status: MqttStatus = { ...NO_CONNECTION };

  /** Opens the connection with its Last Will (the client starts connecting at once). */
  static async open(
    settings: MqttSettings,
    clientId: string,
    will: NonNullable<IClientOptions['will']>,
    backoff: ConnectionBackoff,
    hooks: ConnectionHooks,
  ): Promise<MqttConnection> {
    return new MqttConnection(await connectBroker(clientOptions(settings, clientId, will)), clientId, backoff, hooks);
  }

  private constructor(
    readonly client: MqttClient,
    clientId: string,
    private readonly backoff: ConnectionBackoff,
    private readonly hooks: ConnectionHooks,
  ) {
    this.client.on('connect', () => {
      this.attempts = 0;
      this.connectedAt = Date.now();
      // A connection that outlives a takeover's shortest is the client id's again.
      this.heldTimer = setTimeout(() => this.settle(UNCONTESTED, clientId) && hooks.onStatus(this.status), backoff.takeover.sessionMs);
      this.heldTimer.unref();
      // While contested, the reason stays until the connection holds.
      const last_error = this.status.client_id_conflict ? this.status.last_error : null;
      Object.assign(this.status, { connected: true, last_error, last_connected_at: new Date().toISOString(), next_reconnect_at: null });
      hooks.onStatus(this.status);
      hooks.onConnect();
      if (this.cutShortAt) void this.restartedSince(this.cutShortAt);
    });
    this.client.on('error', (error) => {
      if (!this.status.client_id_conflict) this.status.last_error = describeMqttError(error as Error & { code?: string | number });
      hooks.onStatus(this.status);
    });
    this.client.on('close', () => {
      this.failInFlight();
      this.status.connected = false;
      if (this.heldTimer) clearTimeout(this.heldTimer);
      if (this.connectedAt && !this.closing) {
        const lasted = Date.now() - this.connectedAt;
        if (lasted < backoff.takeover.sessionMs) hooks.onCutShort();
        this.cutShortAt = lasted < backoff.takeover.sessionMs ? this.connectedAt : 0;
        this.settle(connectionClosed(this.takeover, lasted, backoff.takeover), clientId);
      } else if (!this.closing) {
        this.takeover = attemptFailed(this.takeover);
      }
      this.connectedAt = 0;
      // A broker that crashed closes without an error: say so until an attempt says more.
      if (!this.closing && this.status.last_error === null) this.status.last_error = CLOSED_BY_BROKER;
      if (!this.closing) this.scheduleReconnect();
      hooks.onStatus(this.status);
    });
  }

  /**
   * The broker lost the retained messages it held (sync.ts reads the generation marker): it restarted,
   * so the connection it cut short before was its crash, not another client taking the client id.
   */
  brokerRestarted(): void {
    this.takeover = attemptFailed(this.takeover);
  }

  /**
   * A broker that restarts faster than our reconnect refuses no attempt, and one that keeps its
   * retained messages on disk keeps the generation marker too: only its uptime tells. One that says
   * it started after the connection it cut short was accepted (its figure is in whole seconds)
   * restarted then.
   */
  private async restartedSince(acceptedAt: number): Promise<void> {
    const uptime = await brokerUptimeMs(this.client);
    if (uptime !== null && uptime + 1000 < Date.now() - acceptedAt) this.brokerRestarted();
  }

  /** Counts a publish or subscription the broker refused, in the status too. */
  refused(kind: RefusalKind, topic: string, code: number): void {
    const refused = refusal(kind, topic, code);
    countRefusal(this.status, refused);
    this.hooks.onRefusal(refused);
    this.hooks.onStatus(this.status);
  }

  /**
   * Subscribes at QoS 1 and resolves with the filters the broker refused (counted as refusals), where
   * mqtt.js fails the whole subscription; rejects when the subscription fails otherwise.
   */
  subscribe(filters: string[]): Promise<string[]> {
    return new Promise((resolve, reject) =>
      this.client.subscribe(filters, { qos: 1 }, (error, _granted, packet) => {
        const codes = packet && 'granted' in packet ? (packet.granted as number[]) : null;
        if (error && codes?.length !== filters.length) return reject(error);
        const refused = filters.filter((_filter, index) => (codes?.[index] ?? 0) >= 0x80);
        for (const filter of refused) this.refused('subscribe', filter, codes![filters.indexOf(filter)]!);
        resolve(refused);
      }),
    );
  }

  /** Records whether the client id is contested, in the status too; true when that changed. */
  private settle(takeover: TakeoverState, clientId: string): boolean {
    const changed = this.takeover.contested !== takeover.contested;
    this.takeover = takeover;
    if (changed) {
      this.status.client_id_conflict = takeover.contested;
      this.status.last_error = takeover.contested ? contestedReason(clientId, this.backoff.takeover) : null;
    }
    return changed;
  }

  /**
   * mqtt.js fails only QoS 0 callbacks when the connection closes; a QoS 1 publish waits for its
   * PUBACK, and `reconnect()` replaces the outgoing store, so it is never resent and its promise never
   * settles. With a clean session nothing of the old connection survives: fail them all, so every
   * publish ends (the integration republishes the whole state after the reconnect).
   */
  private failInFlight(): void {
    for (const [messageId, pending] of Object.entries(this.client.outgoing)) {
      delete this.client.outgoing[Number(messageId)];
      pending.cb?.(new Error('connection closed before the broker acknowledged'));
    }
  }

  private scheduleReconnect(): void {
    if (this.retryTimer) return;
    this.attempts++;
    const delay = reconnectDelay(this.takeover, backoffDelay(this.attempts, this.backoff.initialMs, this.backoff.maxMs), this.backoff.takeover);
    this.status.next_reconnect_at = new Date(Date.now() + delay).toISOString();
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      if (this.closing) return;
      this.hooks.onReconnectAttempt();
      this.client.reconnect();
    }, delay);
    this.retryTimer.unref();
  }

  /** Closes cleanly: `beforeClose` publishes while still connected (e.g. a retained `offline`). */
  async close(beforeClose?: () => Promise<void>): Promise<void> {
    this.closing = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.heldTimer) clearTimeout(this.heldTimer);
    const capped = (work: Promise<unknown>) => Promise.race([work.catch(() => {}), new Promise((resolve) => setTimeout(resolve, CLOSE_GRACE_MS).unref())]);
    if (this.client.connected && beforeClose) await capped(beforeClose());
    // A graceful end waits for every in-flight QoS 1 acknowledgement, which a broker that restarted
    // may never send: give it a moment, then force the close.
    if (this.client.connected) await capped(this.client.endAsync(false));
    await this.client.endAsync(true).catch(() => {});
    this.status.connected = false;
    this.status.next_reconnect_at = null;
    this.hooks.onStatus(this.status);
  }
}

/** How long a short-lived client (discovery, cleanup, a read-back) waits for the broker's CONNACK. */
export const ONE_OFF_CONNECT_TIMEOUT_MS = 10_000;

/** Resolves on the first CONNACK; rejects on an error, a close before it, or after `timeoutMs`. */
export function connected(client: MqttClient, timeoutMs: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const settle = (error?: Error) => {
      clearTimeout(timer);
      client.off('connect', onConnect).off('error', settle).off('close', onClose);
      if (error) reject(error);
      else resolve();
    };
    const onConnect = () => settle();
    const onClose = () => settle(new Error(CLOSED_BY_BROKER));
    const timer = setTimeout(() => settle(Object.assign(new Error(`timed out after ${timeoutMs} ms`), { code: 'ETIMEDOUT' })), timeoutMs);
    client.once('connect', onConnect).once('error', settle).once('close', onClose);
  });
}

/** Connects once with candidate settings and reports how it went; never keeps the connection. */
export async function testConnection(
  settings: MqttSettings,
  clientId: string,
  { detailed = true, timeoutMs = 8000 } = {},
): Promise<{ ok: boolean; latency_ms: number | null; error: string | null }> {
  let target: ReturnType<typeof clientOptions>;
  try {
    target = clientOptions(settings, clientId);
  } catch {
    return { ok: false, latency_ms: null, error: 'invalid broker URL' };
  }
  const client = await connectBroker({ url: target.url, options: { ...target.options, connectTimeout: timeoutMs } });
  // After the import of mqtt.js (the first connection's): the client has only just started connecting.
  const started = performance.now();
  try {
    await connected(client, timeoutMs);
    return { ok: true, latency_ms: Math.round(performance.now() - started), error: null };
  } catch (error) {
    return { ok: false, latency_ms: null, error: describeMqttError(error as Error & { code?: string | number }, detailed) };
  } finally {
    await client.endAsync(true).catch(() => {});
  }
}
