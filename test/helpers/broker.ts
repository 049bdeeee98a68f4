import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import mqtt, { type MqttClient } from 'mqtt';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
    probe.on('error', reject);
  });
}

/** Waits until something listens on the port (or, with `open` false, until nothing does). */
export async function waitForPort(port: number, open = true, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const isOpen = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.end();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (isOpen === open) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`port ${port} did not ${open ? 'open' : 'close'}`);
}

/** Whether process `pid` holds a socket listening on 127.0.0.1:`port` (/proc/net/tcp, its fds). */
function listensOn(pid: number, port: number): boolean {
  const address = `0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  const inodes = readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields[1] === address && fields[3] === '0A') // 0A: LISTEN
    .map((fields) => `socket:[${fields[9]}]`);
  if (!inodes.length) return false;
  const fds = (() => {
    try {
      return readdirSync(`/proc/${pid}/fd`);
    } catch {
      return []; // it exited
    }
  })();
  return fds.some((fd) => {
    try {
      return inodes.includes(readlinkSync(`/proc/${pid}/fd/${fd}`));
    } catch {
      return false; // closed meanwhile
    }
  });
}

/**
 * Waits until `child` itself listens on `port`. Something else answering there is not enough: a
 * port freePort found can be taken before the child binds it (or between a stop and a start), the
 * child then exits, and a test would talk to another session's server (retained messages on its
 * broker).
 */
export async function waitForOwnListener(child: ChildProcess, port: number, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${child.spawnfile} exited before listening on port ${port} (taken?)`);
    if (listensOn(child.pid!, port)) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${child.spawnfile} did not listen on port ${port} within ${timeoutMs} ms`);
}

export interface TlsMaterial {
  caCert: string;
  dir: string;
}

/** A CA and a server certificate for localhost/127.0.0.1, made with openssl. */
export function makeTlsMaterial(dir: string): TlsMaterial {
  const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=Mothership Test CA');
  run('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost');
  writeFileSync(path.join(dir, 'san.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  run('x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.crt', '-days', '2', '-extfile', 'san.ext');
  return { caCert: readFileSync(path.join(dir, 'ca.crt'), 'utf8'), dir };
}

/**
 * A client certificate (EC P-256) for `name`, signed by the CA of `makeTlsMaterial(dir)` or, with
 * `selfSigned`, by itself (a CA the broker does not know); valid for `days` (negative: expired).
 */
export function makeClientCertificate(dir: string, name: string, { days = 2, selfSigned = false } = {}): { cert: string; key: string } {
  const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${name}.key`, '-subj', `/CN=${name}`];
  if (selfSigned) run('req', '-x509', ...newKey, '-out', `${name}.crt`, '-days', String(days));
  else {
    run('req', ...newKey, '-out', `${name}.csr`);
    run('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.crt`, '-days', String(days));
  }
  return { cert: readFileSync(path.join(dir, `${name}.crt`), 'utf8'), key: readFileSync(path.join(dir, `${name}.key`), 'utf8') };
}

const DYNAMIC_SECURITY_PLUGIN = '/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so';

/** Mosquitto's dynamic security configuration (its JSON file): who may publish and subscribe where. */
export interface DynamicSecurity {
  defaultACLAccess: { publishClientSend: boolean; publishClientReceive: boolean; subscribe: boolean; unsubscribe: boolean };
  clients: unknown[];
  groups: { groupname: string; roles: { rolename: string }[]; clients: unknown[] }[];
  roles: { rolename: string; acls: { acltype: string; topic: string; priority?: number; allow: boolean }[] }[];
  anonymousGroup?: string;
}

/**
 * An ACL for anonymous clients: they may publish under `publish` and subscribe under `subscribe`
 * (MQTT filters), and nowhere else; everyone receives what they subscribed to.
 */
export function anonymousAcl(publish: string[], subscribe: string[]): DynamicSecurity {
  return {
    defaultACLAccess: { publishClientSend: false, publishClientReceive: true, subscribe: false, unsubscribe: true },
    clients: [],
    groups: [{ groupname: 'anonymous', roles: [{ rolename: 'limited' }], clients: [] }],
    roles: [
      {
        rolename: 'limited',
        acls: [
          ...publish.map((topic) => ({ acltype: 'publishClientSend', topic, allow: true })),
          ...subscribe.map((topic) => ({ acltype: 'subscribePattern', topic, allow: true })),
        ],
      },
    ],
    anonymousGroup: 'anonymous',
  };
}

/**
 * A private Mosquitto the test starts, stops and restarts on a fixed port. `requireCertificate`
 * (with `tls`): clients must present a certificate signed by its CA (`broker.clientCertificate`).
 * `keepLog: false` (a benchmark measuring this process's memory): Mosquitto's default logging, not
 * kept; `output()` stays empty. `persistence`: its retained messages are saved to its own directory
 * when it stops cleanly (SIGTERM) and restored when it starts again; a SIGKILL loses what changed
 * since, as a crash between Mosquitto's autosaves does.
 */
export async function startBroker(
  options: {
    tls?: boolean;
    requireCertificate?: boolean;
    users?: Record<string, string>;
    config?: string[];
    dynamicSecurity?: DynamicSecurity;
    keepLog?: boolean;
    persistence?: boolean;
  } = {},
) {
  const dir = mkdtempSync(path.join(tmpdir(), 'mothership-broker-'));
  const port = await freePort();
  const keepLog = options.keepLog ?? true;
  // The broker's log goes to the test (`output()`): it names every client that connects, and logs
  // every packet, which at a benchmark's scale is megabytes a minute.
  const lines = [
    `listener ${port} 127.0.0.1`,
    `persistence ${options.persistence ? 'true' : 'false'}`,
    ...(keepLog ? ['log_dest stderr', 'log_type all', 'connection_messages true'] : []),
  ];
  let tls: TlsMaterial | null = null;
  if (options.tls) {
    tls = makeTlsMaterial(dir);
    lines.push(`cafile ${dir}/ca.crt`, `certfile ${dir}/server.crt`, `keyfile ${dir}/server.key`);
    if (options.requireCertificate) lines.push('require_certificate true');
  }
  if (options.users) {
    const file = path.join(dir, 'passwords');
    writeFileSync(file, '');
    for (const [user, password] of Object.entries(options.users)) execFileSync('mosquitto_passwd', ['-b', file, user, password], { stdio: 'pipe' });
    lines.push('allow_anonymous false', `password_file ${file}`);
  } else {
    lines.push('allow_anonymous true');
  }
  if (options.dynamicSecurity) {
    // Mosquitto's ACL plugin: unlike `acl_file` (Mosquitto 2.0 grants any subscription), it refuses subscriptions too.
    writeFileSync(path.join(dir, 'dynamic-security.json'), JSON.stringify(options.dynamicSecurity));
    lines.push(`plugin ${DYNAMIC_SECURITY_PLUGIN}`, `plugin_opt_config_file ${dir}/dynamic-security.json`);
  }
  if (options.persistence) {
    mkdirSync(path.join(dir, 'data'));
    lines.push(`persistence_location ${dir}/data/`);
  }
  lines.push(...(options.config ?? []));
  const config = path.join(dir, 'mosquitto.conf');
  writeFileSync(config, lines.join('\n') + '\n');
  // Started as root, mosquitto drops to its own user: it must be able to read the (test-only) files.
  chmodSync(dir, 0o755);
  for (const file of readdirSync(dir)) chmodSync(path.join(dir, file), 0o644);
  // ... and write its database where it persists.
  if (options.persistence) chmodSync(path.join(dir, 'data'), 0o777);
  let process: ChildProcess | null = null;
  let output = '';

  const broker = {
    port,
    url: `${options.tls ? 'mqtts' : 'mqtt'}://${options.tls ? 'localhost' : '127.0.0.1'}:${port}`,
    caCert: tls?.caCert ?? '',
    /** A client certificate and key for `name` (see makeClientCertificate); needs `tls`. */
    clientCertificate: (name: string, options: { days?: number; selfSigned?: boolean } = {}) => makeClientCertificate(dir, name, options),
    /** Everything the broker logged since it was first started. */
    output: () => output,
    async start() {
      process = spawn('mosquitto', ['-c', config], { stdio: ['ignore', 'ignore', keepLog ? 'pipe' : 'ignore'] });
      process.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
      await waitForOwnListener(process, port);
    },
    /** Stops the broker; SIGKILL drops every connection mid-packet, as a crash or power cut does. */
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (!process || process.exitCode !== null || process.signalCode !== null) return;
      const exited = new Promise((resolve) => process!.once('exit', resolve));
      process.kill(signal);
      await exited;
    },
    async destroy() {
      await broker.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await broker.start();
  return broker;
}

/** A plain MQTT client standing in for Home Assistant: it reads what the service publishes. */
export async function observer(url: string, filters: string[], options: mqtt.IClientOptions = {}) {
  const client: MqttClient = await mqtt.connectAsync(url, { reconnectPeriod: 200, ...options });
  const messages: { topic: string; payload: string; retain: boolean }[] = [];
  client.on('message', (topic, payload, packet) => messages.push({ topic, payload: payload.toString(), retain: packet.retain }));
  if (filters.length) await client.subscribeAsync(filters, { qos: 1 });
  return {
    client,
    messages,
    /** The last payload seen on a topic. */
    last: (topic: string) => messages.filter((message) => message.topic === topic).at(-1)?.payload,
    close: () => client.endAsync(true),
  };
}

/** What a fresh subscriber sees: the retained message of every topic under `filters`. */
export async function retainedSet(url: string, filters: string[], settleMs = 300, options: mqtt.IClientOptions = {}): Promise<Map<string, string>> {
  const view = await observer(url, filters, options);
  await new Promise((resolve) => setTimeout(resolve, settleMs));
  await view.close();
  const retained = new Map<string, string>();
  for (const message of view.messages) if (message.retain) retained.set(message.topic, message.payload);
  return retained;
}

/**
 * Every retained message under `filters`, however many: subscribed at QoS 0 (a broker cuts a QoS 1
 * read-back short at its queue limit, 1000 by default), and complete once a probe published after
 * subscribing comes back (the broker queues the retained messages to us before it).
 */
export async function retainedAll(url: string, filters: string[]): Promise<Map<string, string>> {
  const client = await mqtt.connectAsync(url, { reconnectPeriod: 0 });
  const probe = `mothership-test-probe/${Math.random().toString(36).slice(2)}`;
  const retained = new Map<string, string>();
  try {
    const done = new Promise<void>((resolve) =>
      client.on('message', (topic, payload, packet) => {
        if (topic === probe) resolve();
        else if (packet.retain) retained.set(topic, payload.toString());
      }),
    );
    await client.subscribeAsync([...filters, probe], { qos: 0 });
    await client.publishAsync(probe, 'done', { qos: 1 });
    await done;
    return retained;
  } finally {
    await client.endAsync(true);
  }
}

/**
 * A TCP proxy in front of a broker that can hold back the broker's acknowledgements (PUBACK), as a
 * broker too busy to acknowledge does; everything else passes both ways.
 */
export async function stallingProxy(brokerPort: number) {
  const sockets = new Set<import('node:net').Socket>();
  const held: (() => void)[] = [];
  /** Acknowledgements still let through before holding them back; null: none held. */
  let passing: number | null = null;
  const server = createServer((client) => {
    const upstream = connect(brokerPort, '127.0.0.1');
    sockets.add(client).add(upstream);
    client.pipe(upstream);
    let pending = Buffer.alloc(0);
    upstream.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      // One MQTT packet at a time: a type byte, the remaining length (variable-length integer), the rest.
      for (;;) {
        let length = 0;
        let offset = 1;
        let complete = false;
        for (let shift = 0; offset < pending.length && !complete; shift += 7) {
          const byte = pending[offset++]!;
          length += (byte & 0x7f) << shift;
          complete = (byte & 0x80) === 0;
        }
        if (!complete || pending.length < offset + length) return;
        const packet = pending.subarray(0, offset + length);
        pending = pending.subarray(offset + length);
        const isPuback = packet[0]! >> 4 === 4;
        if (isPuback && passing !== null && passing-- <= 0) held.push(() => client.write(packet));
        else client.write(packet);
      }
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `mqtt://127.0.0.1:${port}`,
    /** Holds back every acknowledgement after the next `after`. */
    holdAcknowledgements: (after = 0) => (passing = after),
    release: () => {
      passing = null;
      for (const write of held.splice(0)) write();
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * A TCP proxy in front of a broker that holds each new connection until the broker accepts its own
 * (trying again while the broker is down), and drops it when the broker's drops. Behind it a broker
 * that restarts accepts every connection attempt, as one that restarts faster than the client
 * reconnects does, whatever the timing.
 */
export async function patientProxy(brokerPort: number) {
  const sockets = new Set<import('node:net').Socket>();
  const server = createServer((client) => {
    sockets.add(client);
    // What the client sends before the broker is there waits in the paused socket.
    client.pause();
    const attach = () => {
      if (client.destroyed) return;
      const upstream = connect(brokerPort, '127.0.0.1');
      upstream.once('error', () => {
        if (upstream.readyState !== 'open') setTimeout(attach, 20);
      });
      upstream.once('connect', () => {
        sockets.add(upstream);
        const end = () => {
          client.destroy();
          upstream.destroy();
        };
        client.on('close', end).on('error', end);
        upstream.on('close', end).on('error', end);
        client.pipe(upstream);
        upstream.pipe(client);
      });
    };
    attach();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `mqtt://127.0.0.1:${port}`,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
