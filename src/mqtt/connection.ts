import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import type { IntegrationSettings } from '../settings/store.js';
import { backoffDelay } from './backoff.js';

export interface MqttStatus {
  connected: boolean;
  last_error: string | null;
  last_connected_at: string | null;
  next_reconnect_at: string | null;
}

export type MqttSettings = IntegrationSettings['mqtt'];

const CLOSE_GRACE_MS = 2000;

/** mqtt.js options from the settings: TLS for mqtts://, wss:// or the TLS flag, with an optional CA. */
export function clientOptions(settings: MqttSettings, clientId: string, will?: IClientOptions['will']): { url: string; options: IClientOptions } {
  const url = new URL(settings.broker_url);
  const tls = settings.tls || url.protocol === 'mqtts:' || url.protocol === 'wss:';
  if (tls && url.protocol === 'mqtt:') url.protocol = 'mqtts:';
  if (tls && url.protocol === 'ws:') url.protocol = 'wss:';
  const options: IClientOptions = {
    clientId,
    clean: true,
    // We run the reconnect schedule ourselves (mqtt.js only has a fixed period).
    reconnectPeriod: 0,
    connectTimeout: 10_000,
    keepalive: 30,
    ...(settings.username ? { username: settings.username } : {}),
    ...(settings.password ? { password: settings.password } : {}),
    ...(tls ? { rejectUnauthorized: !settings.tls_insecure, ...(settings.ca_cert ? { ca: settings.ca_cert } : {}) } : {}),
    ...(will ? { will } : {}),
  };
  return { url: url.toString(), options };
}

/** A readable reason for a failed connection (shown next to the dashboard's Test button). */
export function describeMqttError(error: Error & { code?: string | number }): string {
  const code = error.code;
  if (code === 4 || code === 134) return 'bad username or password';
  if (code === 5 || code === 135) return 'not authorized: check the username and password';
  if (code === 'ECONNREFUSED') return 'connection refused: is the broker running on that host and port?';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host not found';
  if (code === 'ETIMEDOUT') return 'timed out';
  if (typeof code === 'string' && (code.startsWith('ERR_TLS') || code.includes('CERT') || code === 'EPROTO' || code === 'DEPTH_ZERO_SELF_SIGNED_CERT')) {
    return `TLS error: ${error.message}`;
  }
  if (/self[- ]signed|certificate|SSL|TLS/i.test(error.message)) return `TLS error: ${error.message}`;
  return error.message || String(error);
}

/**
 * One broker connection with the reconnect schedule of CONTRACT section 1 (5 s, 10 s, 20 s ... capped
 * at 2 min, reset after a successful connect), the Last Will, and a status for the settings API.
 */
export class MqttConnection {
  readonly client: MqttClient;
  private attempts = 0;
  private retryTimer: NodeJS.Timeout | null = null;
  private closing = false;
  readonly status: MqttStatus = { connected: false, last_error: null, last_connected_at: null, next_reconnect_at: null };

  constructor(
    settings: MqttSettings,
    clientId: string,
    will: NonNullable<IClientOptions['will']>,
    private readonly backoff: { initialMs: number; maxMs: number },
    private readonly hooks: { onConnect: () => void; onStatus: (status: MqttStatus) => void; onReconnectAttempt: () => void },
  ) {
    const { url, options } = clientOptions(settings, clientId, will);
    this.client = mqtt.connect(url, options);
    this.client.on('connect', () => {
      this.attempts = 0;
      Object.assign(this.status, { connected: true, last_error: null, last_connected_at: new Date().toISOString(), next_reconnect_at: null });
      hooks.onStatus(this.status);
      hooks.onConnect();
    });
    this.client.on('error', (error) => {
      this.status.last_error = describeMqttError(error as Error & { code?: string | number });
      hooks.onStatus(this.status);
    });
    this.client.on('close', () => {
      this.status.connected = false;
      if (!this.closing) this.scheduleReconnect();
      hooks.onStatus(this.status);
    });
  }

  private scheduleReconnect(): void {
    if (this.retryTimer) return;
    this.attempts++;
    const delay = backoffDelay(this.attempts, this.backoff.initialMs, this.backoff.maxMs);
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

/** Connects once with candidate settings and reports how it went; never keeps the connection. */
export async function testConnection(settings: MqttSettings, clientId: string, timeoutMs = 8000): Promise<{ ok: boolean; latency_ms: number | null; error: string | null }> {
  let target: ReturnType<typeof clientOptions>;
  try {
    target = clientOptions(settings, clientId);
  } catch {
    return { ok: false, latency_ms: null, error: 'invalid broker URL' };
  }
  const started = performance.now();
  const client = mqtt.connect(target.url, { ...target.options, connectTimeout: timeoutMs });
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(Object.assign(new Error(`timed out after ${timeoutMs} ms`), { code: 'ETIMEDOUT' })), timeoutMs);
      client.once('connect', () => {
        clearTimeout(timer);
        resolve();
      });
      client.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      client.once('close', () => {
        clearTimeout(timer);
        reject(new Error('connection closed by the broker'));
      });
    });
    return { ok: true, latency_ms: Math.round(performance.now() - started), error: null };
  } catch (error) {
    return { ok: false, latency_ms: null, error: describeMqttError(error as Error & { code?: string | number }) };
  } finally {
    await client.endAsync(true).catch(() => {});
  }
}
