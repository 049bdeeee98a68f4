import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createPrivateKey, randomBytes } from 'node:crypto';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { createTestEnv, eventually, type TestEnv } from './helpers/app.js';
import { freePort, retainedSet, startBroker } from './helpers/broker.js';
import { admin, startService, stopProcess } from './helpers/process.js';

/** The base64 body of a PEM block: what would show if the key leaked in any form of its PEM text. */
const pemBody = (pem: string) => pem.split('\n').filter((line) => line && !line.startsWith('-----'))[0]!;

describe('MQTT with a broker that requires client certificates', () => {
  const id = randomBytes(4).toString('hex');
  const names = { mid: `ms${id}`, root: `root${id}`, prefix: `ha${id}` };
  const passphrase = `unlock-${randomBytes(6).toString('hex')}`;
  let env: TestEnv;
  let broker: Awaited<ReturnType<typeof startBroker>>;
  let service: Awaited<ReturnType<typeof startService>>;
  let client: { cert: string; key: string };
  let encryptedKey: string;

  const call = async (method: string, route: string, body?: unknown) => {
    const response = await fetch(service.base + route, { method, headers: admin, ...(body ? { body: JSON.stringify(body) } : {}) });
    const text = await response.text();
    return { status: response.status, type: response.headers.get('content-type'), text, body: text ? JSON.parse(text) : null };
  };
  const mqttView = async () => (await call('GET', '/api/settings/integration')).body.mqtt;
  const errorPaths = (body: { errors?: { path: string }[] }) => (body.errors ?? []).map((error) => error.path);

  before(async () => {
    broker = await startBroker({ tls: true, requireCertificate: true });
    client = broker.clientCertificate('mothership');
    encryptedKey = createPrivateKey(client.key).export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase }) as string;
    env = await createTestEnv('sqlite');
    service = await startService(
      { ...env.env, LOG_LEVEL: 'trace', MOTHERSHIP_ID: names.mid, MQTT_BACKOFF_INITIAL_MS: '100', MQTT_BACKOFF_MAX_MS: '400' },
      await freePort(),
    );
  });
  after(async () => {
    if (service) await stopProcess(service.child);
    await broker?.destroy();
    await env?.cleanup();
  });

  it('without a client certificate, the status says the broker requires one', async () => {
    const saved = await call('POST', '/api/settings/integration', {
      mqtt: { enabled: true, broker_url: broker.url, ca_cert: broker.caCert, topic_root: names.root, discovery_prefix: names.prefix },
    });
    assert.equal(saved.status, 200, saved.text);
    const status = await eventually(async () => (await mqttView()).status.last_error && (await mqttView()).status, 5000, 'a connection error');
    assert.equal(status.connected, false);
    assert.match(status.last_error, /^TLS error: the broker requires a client certificate/);
    const test = await call('POST', '/api/settings/integration/test', { target: 'mqtt' });
    assert.equal(test.body.mqtt.ok, false);
    assert.match(test.body.mqtt.error, /requires a client certificate/);
  });

  it('tells a certificate the broker does not trust from a missing one', async () => {
    const stranger = broker.clientCertificate('stranger', { selfSigned: true });
    const test = await call('POST', '/api/settings/integration/test', { target: 'mqtt', mqtt: { client_cert: stranger.cert, client_key: stranger.key } });
    assert.equal(test.status, 200, test.text);
    assert.equal(test.body.mqtt.ok, false);
    assert.match(test.body.mqtt.error, /^TLS error: the broker does not trust the client certificate/);
  });

  it('refuses a malformed PEM, a key of another certificate, an expired certificate and a wrong passphrase, naming the field', async () => {
    const other = broker.clientCertificate('other');
    const expired = broker.clientCertificate('expired', { days: -1 });
    const cases: [Record<string, unknown>, string][] = [
      [{ client_cert: 'not a certificate', client_key: client.key }, '/mqtt/client_cert'],
      [{ client_cert: client.cert, client_key: '-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----' }, '/mqtt/client_key'],
      [{ client_cert: client.cert, client_key: other.key }, '/mqtt/client_key'],
      [{ client_cert: `${client.cert}${client.key}`, client_key: client.key }, '/mqtt/client_cert'],
      [{ client_cert: expired.cert, client_key: expired.key }, '/mqtt/client_cert'],
      [{ client_cert: client.cert }, '/mqtt/client_key'],
      [{ client_key: client.key }, '/mqtt/client_cert'],
      [{ client_cert: client.cert, client_key: encryptedKey }, '/mqtt/client_key_passphrase'],
      [{ client_cert: client.cert, client_key: encryptedKey, client_key_passphrase: 'wrong' }, '/mqtt/client_key_passphrase'],
      [{ client_cert: client.cert, client_key: client.key, broker_url: broker.url.replace('mqtts:', 'mqtt:') }, '/mqtt/client_cert'],
      [{ client_cert: 'x'.repeat(70_000) }, '/mqtt/client_cert'],
    ];
    for (const [mqtt, field] of cases) {
      for (const route of ['/api/settings/integration', '/api/settings/integration/test']) {
        const response = await call('POST', route, { mqtt });
        assert.equal(response.status, 400, `${route} ${JSON.stringify(mqtt).slice(0, 120)}: ${response.text}`);
        assert.match(response.type ?? '', /^application\/problem\+json/);
        assert.ok(errorPaths(response.body).includes(field), `${JSON.stringify(mqtt).slice(0, 120)}: ${response.text}`);
        assert.equal(response.text.includes(pemBody(client.key)), false, 'the key is not echoed');
      }
    }
    const view = await mqttView();
    assert.equal(view.client_key_set, false, 'nothing saved');
    assert.equal(view.client_cert_set, false);
  });

  it('with the certificate and its key (encrypted, with the passphrase) it connects and publishes discovery', async () => {
    const saved = await call('POST', '/api/settings/integration', {
      mqtt: { client_cert: client.cert, client_key: encryptedKey, client_key_passphrase: passphrase },
    });
    assert.equal(saved.status, 200, saved.text);
    assert.equal(saved.body.mqtt.client_cert_set, true);
    assert.equal(saved.body.mqtt.client_key_set, true);
    assert.equal(saved.body.mqtt.client_cert_subject, 'CN=mothership');
    assert.ok(Date.parse(saved.body.mqtt.client_cert_expires_at) > Date.now());
    await eventually(async () => (await mqttView()).status.connected, 8000, 'connected with the client certificate');
    const published = await call('POST', '/api/settings/integration/discovery');
    assert.equal(published.status, 200, published.text);
    assert.ok(published.body.published > 0);
    const tls = { ca: broker.caCert, cert: client.cert, key: client.key };
    const retained = await eventually(
      async () => {
        const set = await retainedSet(broker.url, [`${names.prefix}/#`, `${names.root}/#`], 300, tls);
        return set.get(`${names.root}/${names.mid}/availability`) === 'online' && set.size > 5 ? set : null;
      },
      5000,
      'discovery and state on the broker',
    );
    assert.ok([...retained.keys()].some((topic) => topic.startsWith(`${names.prefix}/`) && topic.endsWith('/config')));
    const view = await call('GET', '/api/settings/integration');
    for (const secret of [pemBody(client.key), pemBody(encryptedKey), passphrase, 'PRIVATE KEY'])
      assert.equal(view.text.includes(secret), false, `GET shows ${secret.slice(0, 12)}...`);
    assert.equal(view.body.mqtt.status.last_error, null);
  });

  it('keeps the key encrypted at rest', () => {
    const db = new BetterSqlite3(path.join(env.dataDir, 'mothership.db'), { readonly: true });
    try {
      const rows = db.prepare('SELECT value FROM settings').all() as { value: string }[];
      const text = rows.map((row) => row.value).join('\n');
      assert.ok(text.includes(names.root), 'the settings row is there');
      for (const secret of [pemBody(client.key), pemBody(encryptedKey), passphrase, 'PRIVATE KEY'])
        assert.equal(text.includes(secret), false, `stored in clear: ${secret.slice(0, 12)}...`);
      // The previous release adopts every `*_sealed` key and writes back in clear what it does not
      // know: the new secrets must stay out of its sight.
      const row = db.prepare("SELECT value FROM settings WHERE key = 'integration'").get() as { value: string };
      const mqtt = JSON.parse(row.value).mqtt;
      assert.deepEqual(
        Object.keys(mqtt)
          .filter((key) => key.endsWith('_sealed'))
          .sort(),
        ['ca_cert_sealed', 'password_sealed'],
      );
      assert.match(mqtt.sealed.client_key, /^v1\./);
    } finally {
      db.close();
    }
  });

  it('binds the stored key to its broker: another host needs it again, and clearing it drops it', async () => {
    const elsewhere = `mqtts://localhost:${await freePort()}`;
    for (const route of ['/api/settings/integration', '/api/settings/integration/test']) {
      const target = route.endsWith('/test') ? { target: 'mqtt' } : {};
      const moved = await call('POST', route, { ...target, mqtt: { broker_url: elsewhere } });
      assert.equal(moved.status, 400, `${route}: ${moved.text}`);
      assert.deepEqual(errorPaths(moved.body), ['/mqtt/client_key']);
      const weaker = await call('POST', route, { ...target, mqtt: { tls_insecure: true } });
      assert.deepEqual(errorPaths(weaker.body), ['/mqtt/client_key'], `${route}: verification off`);
    }
    assert.equal((await mqttView()).broker_url, broker.url, 'nothing saved');
    const dropped = await call('POST', '/api/settings/integration', { mqtt: { broker_url: elsewhere, client_cert: null, client_key: null } });
    assert.equal(dropped.status, 200, dropped.text);
    assert.equal(dropped.body.mqtt.client_key_set, false);
    assert.equal(dropped.body.mqtt.client_cert_set, false);
    assert.equal(dropped.body.mqtt.client_cert_subject, null);
    // Back at the broker, the key is gone: it must be given again.
    await call('POST', '/api/settings/integration', { mqtt: { broker_url: broker.url } });
    await eventually(async () => /requires a client certificate/.test((await mqttView()).status.last_error ?? ''), 5000, 'refused without the key');
  });

  it('never writes the key or the passphrase to the log', async () => {
    await stopProcess(service.child);
    const log = service.child.output();
    assert.ok(log.includes('"msg":"incoming request"'), 'requests were logged at trace level');
    assert.match(log, /MQTT connection failed: TLS error: the broker requires a client certificate/);
    for (const secret of [pemBody(client.key), pemBody(encryptedKey), passphrase, 'PRIVATE KEY'])
      assert.equal(log.includes(secret), false, `the log shows ${secret.slice(0, 12)}...`);
  });
});
