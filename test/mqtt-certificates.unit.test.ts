import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createPrivateKey } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { clientOptions, describeMqttError } from '../src/mqtt/connection.js';
import { describeClientCertificateAlert } from '../src/mqtt/client-certificate.js';
import { MAX_KEY_ROUNDS } from '../src/settings/certificates.js';
import { candidateSettings, certificateSummary, DEFAULT_SETTINGS, storedSecretError, type IntegrationSettings } from '../src/settings/index.js';
import { makeClientCertificate, makeTlsMaterial } from './helpers/broker.js';

/** An OpenSSL error as Node raises it when the broker's alert arrives (message as observed against Mosquitto 2.0). */
const alert = (text: string, code = 'EPROTO') =>
  Object.assign(new Error(`80EC27F0897F0000:error:0A00045C:SSL routines:ssl3_read_bytes:${text}:../deps/openssl/ssl/record/rec_layer_s3.c:1601:`), { code });

describe('the MQTT client certificate', () => {
  let dir: string;
  let client: { cert: string; key: string };
  let other: { cert: string; key: string };
  let expired: { cert: string; key: string };
  const settings = (mqtt: Partial<IntegrationSettings['mqtt']> = {}): IntegrationSettings => ({
    mqtt: { ...DEFAULT_SETTINGS.mqtt, broker_url: 'mqtts://broker.lan:8883', ...mqtt },
    webhook: { ...DEFAULT_SETTINGS.webhook },
  });
  const paths = (result: { errors: { path: string }[] }) => result.errors.map((error) => error.path);

  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'mothership-certs-'));
    makeTlsMaterial(dir);
    client = makeClientCertificate(dir, 'mothership');
    other = makeClientCertificate(dir, 'other');
    expired = makeClientCertificate(dir, 'expired', { days: -1 });
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps a matching pair, its key as unencrypted PKCS #8 whatever form it came in', () => {
    const passphrase = 'correct horse';
    const encrypted = createPrivateKey(client.key).export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase }) as string;
    const traditional = createPrivateKey(client.key).export({ type: 'sec1', format: 'pem' }) as string;
    for (const key of [client.key, traditional]) {
      const result = candidateSettings(settings(), { mqtt: { client_cert: client.cert, client_key: key } }, Date.now());
      assert.deepEqual(result.errors, []);
      assert.match(result.settings.mqtt.client_key, /^-----BEGIN PRIVATE KEY-----/);
    }
    const unlocked = candidateSettings(
      settings(),
      { mqtt: { client_cert: client.cert, client_key: encrypted, client_key_passphrase: passphrase } },
      Date.now(),
    );
    assert.deepEqual(unlocked.errors, []);
    assert.match(unlocked.settings.mqtt.client_key, /^-----BEGIN PRIVATE KEY-----/);
    assert.equal(JSON.stringify(unlocked.settings).includes(passphrase), false, 'the passphrase is no setting');
    // A chain after the client's own certificate is kept; the subject is the client's.
    const chained = candidateSettings(settings(), { mqtt: { client_cert: client.cert + other.cert, client_key: client.key } }, Date.now());
    assert.deepEqual(chained.errors, []);
    assert.equal(certificateSummary(chained.settings.mqtt.client_cert)?.subject, 'CN=mothership');
  });

  it('names the field of every broken rule', () => {
    const check = (mqtt: Record<string, unknown>, stored: Partial<IntegrationSettings['mqtt']> = {}) =>
      paths(candidateSettings(settings(stored), { mqtt }, Date.now()));
    assert.deepEqual(check({ client_cert: 'nope', client_key: client.key }), ['/mqtt/client_cert']);
    assert.deepEqual(check({ client_cert: client.cert + client.key, client_key: client.key }), ['/mqtt/client_cert'], 'a key in the certificate field');
    const unterminated = client.key.replace('-----END PRIVATE KEY-----', '-----END RSA PRIVATE KEY-----');
    assert.deepEqual(check({ client_cert: client.cert + unterminated, client_key: client.key }), ['/mqtt/client_cert'], 'a key block of mismatched labels');
    assert.deepEqual(check({ client_cert: `${client.cert}-----BEGIN CERTIFICATE-----\nMIIB\n`, client_key: client.key }), ['/mqtt/client_cert'], 'a cut chain');
    assert.deepEqual(check({ client_cert: client.cert.replace(/^MI.*$/m, 'MIIBbroken'), client_key: client.key }), ['/mqtt/client_cert'], 'bad base64');
    assert.deepEqual(check({ client_cert: client.cert, client_key: other.key }), ['/mqtt/client_key']);
    assert.deepEqual(check({ client_cert: client.cert, client_key: 'nope' }), ['/mqtt/client_key']);
    assert.deepEqual(check({ client_cert: client.cert }), ['/mqtt/client_key']);
    assert.deepEqual(check({ client_key: client.key }), ['/mqtt/client_cert']);
    assert.deepEqual(check({ client_cert: expired.cert, client_key: expired.key }), ['/mqtt/client_cert']);
    assert.deepEqual(check({ client_key_passphrase: 'alone' }), ['/mqtt/client_key_passphrase']);
    assert.deepEqual(check({ client_cert: client.cert, client_key: client.key, broker_url: 'mqtt://broker.lan:1883' }), ['/mqtt/client_cert'], 'no TLS');
    assert.deepEqual(check({ client_cert: client.cert, client_key: client.key, broker_url: 'mqtt://broker.lan:8883', tls: true }), [], 'TLS by the flag');
    // A stored certificate that has expired since does not block other changes.
    assert.deepEqual(
      check(
        { topic_root: 'elsewhere' },
        { client_cert: expired.cert, client_key: createPrivateKey(expired.key).export({ type: 'pkcs8', format: 'pem' }) as string },
      ),
      [],
    );
  });

  it('refuses, without unlocking it, a key that asks for more key derivation rounds than the service spends', () => {
    const passphrase = 'slow';
    for (const scheme of [[], ['-v1', 'PBE-SHA1-3DES']]) {
      const file = path.join(dir, 'slow.key');
      execFileSync('openssl', [
        'pkcs8',
        '-topk8',
        '-in',
        path.join(dir, 'mothership.key'),
        '-out',
        file,
        '-passout',
        `pass:${passphrase}`,
        '-iter',
        String(MAX_KEY_ROUNDS * 3),
        ...scheme,
      ]);
      const started = performance.now();
      const result = candidateSettings(
        settings(),
        { mqtt: { client_cert: client.cert, client_key: readFileSync(file, 'utf8'), client_key_passphrase: passphrase } },
        Date.now(),
      );
      assert.deepEqual(paths(result), ['/mqtt/client_key'], scheme.join(' ') || 'PBES2');
      assert.match(result.errors[0]!.message, /key derivation rounds/);
      assert.ok(performance.now() - started < 500, `answered in ${Math.round(performance.now() - started)} ms`);
    }
  });

  it('binds the stored key to its broker, as the password', () => {
    const stored = settings({ client_cert: client.cert, client_key: client.key }).mqtt;
    const bound = (change: Partial<IntegrationSettings['mqtt']>, patch: Record<string, unknown> = change) =>
      storedSecretError('client_key', stored, { ...stored, ...change }, patch)?.path ?? null;
    assert.equal(bound({ broker_url: 'mqtts://elsewhere.lan:8883' }), '/mqtt/client_key');
    assert.equal(bound({ tls_insecure: true }), '/mqtt/client_key');
    assert.equal(bound({ ca_cert: '-----BEGIN CERTIFICATE-----x-----END CERTIFICATE-----' }), '/mqtt/client_key');
    assert.equal(bound({ topic_root: 'x' }), null);
    assert.equal(bound({ broker_url: 'mqtts://elsewhere.lan:8883', client_key: other.key }, { client_key: other.key }), null, 'given again');
  });

  it('goes into the TLS options, only with TLS and only as a pair', () => {
    const tls = clientOptions(settings({ client_cert: client.cert, client_key: client.key }).mqtt, 'c').options;
    assert.equal(tls.cert, client.cert);
    assert.equal(tls.key, client.key);
    const plain = clientOptions(settings({ broker_url: 'mqtt://broker.lan:1883', client_cert: client.cert, client_key: client.key }).mqtt, 'c').options;
    assert.equal(plain.cert, undefined);
    assert.equal(plain.key, undefined);
  });

  it("explains the broker's alerts about the client certificate, and leaves other TLS errors alone", () => {
    assert.match(
      describeMqttError(alert('tlsv13 alert certificate required', 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED')),
      /broker requires a client certificate/,
    );
    assert.match(describeMqttError(alert('tlsv1 alert unknown ca', 'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA')), /does not trust the client certificate \(unknown CA\)/);
    assert.match(describeMqttError(alert('sslv3 alert certificate expired')), /refused the client certificate: it has expired/);
    assert.match(describeMqttError(alert('sslv3 alert bad certificate')), /refused the client certificate \(bad certificate\)/);
    assert.match(describeMqttError(alert('sslv3 alert handshake failure')), /refused the handshake: if it requires client certificates/);
    // The broker's own certificate, refused here, is no alert: the usual reasons.
    assert.equal(describeClientCertificateAlert(Object.assign(new Error('certificate has expired'), { code: 'CERT_HAS_EXPIRED' })), null);
    assert.equal(
      describeMqttError(Object.assign(new Error('certificate has expired'), { code: 'CERT_HAS_EXPIRED' })),
      'TLS error: the certificate has expired',
    );
  });
});
