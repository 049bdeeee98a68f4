import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createPrivateKey, randomBytes } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { launchChromium, signInWithToken } from './helpers/browser.js';
import { ADMIN_TOKEN, startTestApp, type TestApp } from './helpers/app.js';
import { startBroker } from './helpers/broker.js';

describe('dashboard: MQTT client certificate', () => {
  const id = randomBytes(4).toString('hex');
  const passphrase = `unlock-${id}`;
  let app: TestApp;
  let broker: Awaited<ReturnType<typeof startBroker>>;
  let browser: Browser;
  let page: Page;
  let client: { cert: string; key: string };
  const pageErrors: string[] = [];

  before(async () => {
    broker = await startBroker({ tls: true, requireCertificate: true });
    client = broker.clientCertificate('dashboard-client');
    app = await startTestApp('sqlite', { MOTHERSHIP_ID: `ms${id}`, MQTT_BACKOFF_INITIAL_MS: '100', MQTT_BACKOFF_MAX_MS: '400' }, { start: true });
    const base = await app.http.listen({ port: 0, host: '127.0.0.1' });
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('pageerror', (error) => pageErrors.push(error.message));
    await signInWithToken(page, base, ADMIN_TOKEN);
    await page.click('#nav a[data-view="integrations"]');
    await page.waitForSelector('#view-integrations:not([hidden])');
  });
  after(async () => {
    await browser?.close();
    await app?.cleanup();
    await broker?.destroy();
  });

  it('says the broker requires a client certificate when none is set', async () => {
    await page.check('#mqtt-form [name=enabled]');
    await page.fill('#mqtt-form [name=broker_url]', broker.url);
    await page.fill('#mqtt-form [name=ca_cert]', broker.caCert);
    await page.fill('#mqtt-form [name=topic_root]', `root${id}`);
    await page.fill('#mqtt-form [name=discovery_prefix]', `ha${id}`);
    await page.click('#mqtt-form button[type=submit]');
    await page.waitForSelector('#mqtt-last-error:has-text("requires a client certificate")', { timeout: 8000 });
  });

  it('shows a key that does not match next to its field', async () => {
    const other = broker.clientCertificate('other');
    await page.fill('#mqtt-form [name=client_cert]', client.cert);
    await page.fill('#mqtt-form [name=client_key]', other.key);
    await page.click('#mqtt-form button[type=submit]');
    await page.waitForSelector('[data-error-for="/mqtt/client_key"]:has-text("does not match the client certificate")');
  });

  it('sets the certificate and an encrypted key with its passphrase, and connects', async () => {
    const encrypted = createPrivateKey(client.key).export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase }) as string;
    await page.fill('#mqtt-form [name=client_key]', encrypted);
    await page.click('#mqtt-form button[type=submit]');
    await page.waitForSelector('[data-error-for="/mqtt/client_key_passphrase"]:has-text("encrypted")');
    await page.fill('#mqtt-form [name=client_key]', encrypted);
    await page.fill('#mqtt-form [name=client_key_passphrase]', passphrase);
    await page.click('#mqtt-form button[type=submit]');
    await page.waitForSelector('#mqtt-status:text-is("connected")', { timeout: 8000 });
    await page.waitForSelector('#mqtt-client-cert:has-text("CN=dashboard-client")');
    for (const field of ['client_cert', 'client_key', 'client_key_passphrase'])
      assert.equal(await page.inputValue(`#mqtt-form [name=${field}]`), '', `${field} is emptied after the save and never prefilled`);
    assert.match((await page.getAttribute('#mqtt-form [name=client_key]', 'placeholder'))!, /saved/);
    const { mqtt } = (await app.api('GET', '/api/settings/integration')).body;
    assert.equal(mqtt.client_key_set, true);
    assert.equal(mqtt.status.connected, true);
    assert.equal((await page.content()).includes(passphrase), false);
  });

  it('forgets the certificate and key when asked', async () => {
    await page.check('#mqtt-form [name=clear_client_cert]');
    await page.click('#mqtt-form button[type=submit]');
    await page.waitForSelector('#mqtt-client-cert', { state: 'hidden' });
    assert.equal((await app.api('GET', '/api/settings/integration')).body.mqtt.client_key_set, false);
    assert.equal(await page.isChecked('#mqtt-form [name=clear_client_cert]'), false);
    assert.deepEqual(pageErrors, []);
  });
});
