import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { launchChromium } from './helpers/browser.js';
import { ADMIN_TOKEN, startTestApp, type TestApp } from './helpers/app.js';
import { startBroker } from './helpers/broker.js';
import { startReceiver } from './helpers/receiver.js';

const ARTIFACTS = new URL('../../test-artifacts/', import.meta.url).pathname;
const DOCS_IMAGES = new URL('../../docs/images/', import.meta.url).pathname;

describe('dashboard in Chromium', () => {
  let app: TestApp;
  let browser: Browser;
  let page: Page;
  let base: string;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  // A private broker: retained configs on a shared one would appear as devices in a real Home Assistant.
  let broker: Awaited<ReturnType<typeof startBroker>>;
  const foreignRequests: string[] = [];
  const pageErrors: string[] = [];
  const id = randomBytes(4).toString('hex');
  const shot = async (name: string) => {
    await page.screenshot({ path: `${ARTIFACTS}dashboard-${name}.png`, fullPage: true });
    // UPDATE_DOCS_SCREENSHOTS=1 npm test refreshes the pictures in docs/dashboard.md.
    if (process.env.UPDATE_DOCS_SCREENSHOTS) await page.screenshot({ path: `${DOCS_IMAGES}${name}.png`, fullPage: true });
  };

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    if (process.env.UPDATE_DOCS_SCREENSHOTS) mkdirSync(DOCS_IMAGES, { recursive: true });
    receiver = await startReceiver();
    broker = await startBroker();
    app = await startTestApp('sqlite', { MOTHERSHIP_ID: `ms${id}` }, { start: true });
    base = await app.http.listen({ port: 0, host: '127.0.0.1' });
    await app.api('POST', '/api/persons', { id: 'ada', name: 'Ada' });
    await app.api('POST', '/api/persons', { id: 'bob', name: 'Bob' });
    for (const name of ['Kitchen', 'Living room', 'Bedroom']) await app.api('POST', '/api/zones', { name });
    await app.api('POST', '/api/events', { type: 'zone.entry', person: 'bob', zone: 'bedroom' });
    // Seven runs: the last two have five earlier commits each, enough for a noise band.
    const runs = [
      ['9a8b7c6', 0.5, 1.6, 1.1, 2.4, 40],
      ['8a7b6c5', 0.51, 1.59, 1.1, 2.41, 39],
      ['a1b2c3d', 0.52, 1.6, 1.1, 2.4, 41],
      ['b2c3d4e', 0.5, 1.58, 1.08, 2.45, 40],
      ['c3d4e5f', 0.47, 1.61, 1.12, 2.39, 37],
      ['d4e5f60', 0.45, 1.59, 1.1, 2.41, 36],
      ['e5f6071', 0.51, 1.6, 1.09, 2.4, 38],
    ] as const;
    for (const [sha, subject, alpha, beta, gamma, grep] of runs) {
      await app.api('POST', '/api/baselines', { commit_sha: sha, timestamp: new Date().toISOString(), subject_geomean: subject, alpha_geomean: alpha, beta_geomean: beta, gamma_geomean: gamma, grep_1000_mean_ms: grep });
    }
    await app.api('POST', '/api/matches', { id: 'final-42', status: 'completed' });
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('request', (request) => {
      if (!request.url().startsWith(base) && !request.url().startsWith('data:')) foreignRequests.push(request.url());
    });
    page.on('pageerror', (error) => pageErrors.push(error.message));
  });
  after(async () => {
    await browser?.close();
    await app?.cleanup();
    await receiver?.close();
    await broker?.destroy();
  });

  it('signs in with the admin token (and refuses a wrong one)', async () => {
    await page.goto(base + '/');
    await page.waitForSelector('#signin:not([hidden])');
    await shot('signin');
    await page.fill('#signin-form [name=token]', 'not-the-token');
    await page.click('#signin-form button[type=submit]');
    await page.waitForSelector('[data-error-for="/token"]:has-text("not right")');
    await page.fill('#signin-form [name=token]', ADMIN_TOKEN);
    await page.click('#signin-form button[type=submit]');
    await page.waitForSelector('#app:not([hidden])');
    await page.waitForSelector('#live:has-text("live")');
  });

  it('shows occupancy and changes it live when an event is posted', async () => {
    await page.waitForSelector('[data-zone="bedroom"] .count:has-text("1")');
    assert.equal(await page.textContent('[data-zone="kitchen"] .count'), '0');
    await app.api('POST', '/api/events', { type: 'zone.entry', person: 'ada', zone: 'kitchen' });
    await page.waitForSelector('[data-zone="kitchen"].occupied .count:has-text("1")', { timeout: 5000 });
    assert.equal(await page.textContent('[data-zone="kitchen"] .who'), 'Ada');
    await page.waitForSelector('#events li:has-text("zone.entry")');
    await shot('overview');
  });

  it('shows a validation error next to the broker URL field', async () => {
    await page.click('nav button[data-view="integrations"]');
    await page.waitForSelector('#view-integrations:not([hidden])');
    await page.fill('#mqtt-form [name=broker_url]', 'mqtt://broker-without-port');
    await page.check('#mqtt-form [name=enabled]');
    await page.click('#mqtt-form button[type=submit]');
    const error = await page.waitForSelector('[data-error-for="/mqtt/broker_url"]:has-text("port")');
    assert.match((await error.textContent())!, /must name a port/);
    assert.ok(await page.$('.field.invalid [name=broker_url]'));
    await shot('validation');
  });

  it('saves MQTT settings against a real broker and turns connected', async () => {
    await page.fill('#mqtt-form [name=broker_url]', broker.url);
    await page.fill('#mqtt-form [name=topic_root]', `root${id}`);
    await page.fill('#mqtt-form [name=discovery_prefix]', `ha${id}`);
    await page.fill('#mqtt-form [name=password]', 'broker-pass');
    await page.click('#mqtt-form button[type=submit]');
    await page.waitForSelector('[data-error-for="/mqtt/username"]:has-text("required when a password is set")');
    await page.fill('#mqtt-form [name=username]', 'hub');
    await page.fill('#mqtt-form [name=password]', 'broker-pass');
    await page.click('#mqtt-form button[type=submit]');
    await page.waitForSelector('#mqtt-status:has-text("connected")', { timeout: 8000 });
    assert.equal(await page.inputValue('#mqtt-form [name=password]'), '', 'the password is never prefilled');
    assert.match((await page.getAttribute('#mqtt-form [name=password]', 'placeholder'))!, /saved/);
    assert.equal((await app.api('GET', '/api/settings/integration')).body.mqtt.status.connected, true);
  });

  it('tests both connections and publishes discovery', async () => {
    await page.click('#mqtt-test');
    await page.waitForSelector('#mqtt-result:has-text("Connected to the broker in")');
    await page.click('#mqtt-discovery');
    await page.waitForSelector('#mqtt-result:has-text("Published 14 discovery configs")');

    await page.fill('#webhook-form [name=url]', 'ftp://nope');
    await page.click('#webhook-test');
    await page.waitForSelector('[data-error-for="/webhook/url"]:has-text("http")');
    await page.fill('#webhook-form [name=url]', receiver.url);
    await page.click('#webhook-test');
    await page.waitForSelector('#webhook-result:has-text("Test delivery answered 200")');
    assert.equal(receiver.received.at(-1)?.headers['x-service-event'], 'webhook.test');
    await page.waitForSelector('#deliveries tbody tr:has-text("webhook.test")');
    // Filters: by state, then by event type (the API filters; the table follows).
    await page.selectOption('#delivery-state', 'failed');
    await page.waitForSelector('#deliveries tbody tr:has-text("webhook.test")', { state: 'detached' });
    await page.selectOption('#delivery-state', 'delivered');
    await page.selectOption('#delivery-type', 'webhook.test');
    await page.waitForSelector('#deliveries tbody tr[data-state="delivered"]:has-text("webhook.test")');
    assert.equal(await page.locator('#deliveries tbody tr:not([data-state="delivered"])').count(), 0);
    await page.selectOption('#delivery-state', '');
    await page.selectOption('#delivery-type', '');
    await shot('integrations');
  });

  it('keeps unsaved edits when events refresh the page and when a secret is generated, and says they are unsaved', async () => {
    await page.fill('#webhook-form [name=url]', 'http://typed-not-saved.example/hook');
    await page.waitForSelector('#webhook-form .unsaved:not([hidden])');
    // An event refreshes the Integrations view from the server (this used to overwrite typed fields).
    await app.api('PUT', '/api/system/mode', { mode: 'away' });
    await page.waitForSelector('#events li:has-text("system.mode_changed")', { state: 'attached' });
    await page.waitForTimeout(400);
    assert.equal(await page.inputValue('#webhook-form [name=url]'), 'http://typed-not-saved.example/hook');
    await page.click('#webhook-generate');
    await page.waitForSelector('#webhook-new-secret:not([hidden])');
    assert.equal(await page.inputValue('#webhook-form [name=url]'), 'http://typed-not-saved.example/hook', 'Generate secret keeps the typed URL');
    assert.equal(await page.isHidden('#mqtt-form .unsaved'), true, 'the saved MQTT form has nothing unsaved');
    await page.fill('#webhook-form [name=url]', receiver.url);
    await page.click('#webhook-form button[type=submit]');
    await page.waitForSelector('#webhook-form .unsaved', { state: 'hidden' });
    assert.equal((await app.api('GET', '/api/settings/integration')).body.webhook.url, receiver.url);
  });

  it('shows an active fall on every page until it is marked cleared, which emits fall.cleared', async () => {
    await app.api('POST', '/api/events', { type: 'fall.detected', person: 'ada', zone: 'kitchen' });
    const banner = await page.waitForSelector('#fall-banner:not([hidden])', { timeout: 5000 });
    assert.match((await banner.textContent())!, /Fall detected\s*Ada in Kitchen, since .+\(just now\)/);
    for (const view of ['overview', 'enrichment', 'integrations']) {
      await page.click(`nav button[data-view="${view}"]`);
      assert.equal(await page.isVisible('#fall-banner'), true, view);
    }
    await shot('fall');
    page.once('dialog', (dialog) => void dialog.accept());
    await page.click('#fall-clear');
    await page.waitForSelector('#fall-banner', { state: 'hidden', timeout: 5000 });
    const { events } = (await app.api('GET', '/api/events?type=fall.cleared&order=desc&limit=1')).body;
    assert.deepEqual([events[0].event_type, events[0].person, events[0].zone], ['fall.cleared', 'ada', 'kitchen']);
    await page.click('nav button[data-view="overview"]');
    await page.waitForSelector('#falls li:has-text("Cleared: ada @ kitchen")');
  });

  it('adds, renames and deletes zones and people without curl', async () => {
    assert.doesNotMatch((await page.textContent('body'))!, /curl|POST \/api/);
    await page.fill('#zone-form [name=name]', 'Garage');
    await page.click('#zone-form button[type=submit]');
    await page.waitForSelector('[data-zone="garage"]');
    await page.fill('#person-form [name=name]', 'Cy');
    await page.click('#person-form button[type=submit]');
    await page.waitForSelector('#persons li[data-person="cy"]');
    page.once('dialog', (dialog) => void dialog.accept('Cyd'));
    await page.click('#persons li[data-person="cy"] button:has-text("Rename")');
    await page.waitForSelector('#persons li[data-person="cy"]:has-text("Cyd")');
    let question = '';
    page.once('dialog', (dialog) => {
      question = dialog.message();
      void dialog.accept();
    });
    await page.click('[data-zone="garage"] button:has-text("Delete")');
    await page.waitForSelector('[data-zone="garage"]', { state: 'detached' });
    assert.match(question, /Home Assistant loses sensor\.mothership_garage_occupancy_count/);
    page.once('dialog', (dialog) => void dialog.accept());
    await page.click('#persons li[data-person="cy"] button:has-text("Delete")');
    await page.waitForSelector('#persons li[data-person="cy"]', { state: 'detached' });
    assert.equal((await app.api('GET', '/api/persons/cy')).status, 404);
  });

  it('renders the baseline history chart with the subject and the three comparison tools', async () => {
    await page.click('nav button[data-view="baselines"]');
    await page.waitForSelector('#chart-geomean svg[data-points="7"]');
    for (const series of ['subject', 'alpha', 'beta', 'gamma']) assert.ok(await page.$(`#chart-geomean path[data-series="${series}"]`), series);
    assert.ok(await page.$('#chart-geomean polygon[data-band="subject"]'), 'the noise band of the subject');
    assert.match((await page.textContent('#chart-geomean circle title'))!, /^9a8b7c6 · .+\nsubject_geomean: 0\.5 s\nno history yet$/);
    assert.ok(await page.$('#chart-grep path[data-series="grep 1000"]'));
    await page.waitForSelector('#comparison tbody tr');
    assert.match((await page.textContent('#comparison-verdict'))!, /Against the previous run: beyond 10% on subject_geomean/);
    assert.equal(await page.locator('#comparison tbody tr').count(), 8, 'each metric and speedup once');
    await shot('baselines');
  });

  it('lists bots and matches, and creates a bot showing its secret once', async () => {
    await page.click('nav button[data-view="enrichment"]');
    await page.waitForSelector('#matches tr[data-match="final-42"]');
    await page.fill('#bot-form [name=name]', 'Replay Bot');
    await page.click('#bot-form button[type=submit]');
    await page.waitForSelector('#bot-secret:has-text("mss_")');
    await page.waitForSelector('#bots li[data-bot="replay-bot"]:has-text("0 of 5 requests in 24 h")');
    page.once('dialog', (dialog) => void dialog.accept());
    await page.click('#bots li[data-bot="replay-bot"] button:has-text("Rotate secret")');
    await page.waitForSelector(`#bot-secret:has-text("New secret for")`);
    assert.match((await page.textContent('#bot-secret'))!, /the old one works until .+\): mss_/);
    await page.waitForSelector('#bots li[data-bot="replay-bot"]:has-text("old secret valid until")');
    await shot('enrichment');
    page.once('dialog', (dialog) => void dialog.accept());
    await page.click('#bots li[data-bot="replay-bot"] button:has-text("Delete")');
    await page.waitForSelector('#bots li[data-bot="replay-bot"]', { state: 'detached' });
    assert.equal((await app.api('GET', '/api/bots')).body.some((bot: { id: string }) => bot.id === 'replay-bot'), false);
  });

  it('fits a phone screen', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.click('nav button[data-view="overview"]');
    await page.waitForSelector('[data-zone="kitchen"]');
    const overflow = (await page.evaluate('document.documentElement.scrollWidth - window.innerWidth')) as number;
    assert.ok(overflow <= 0, `page is ${overflow}px wider than the screen`);
    await shot('phone');
  });

  it('made no request outside the service and raised no script error', () => {
    assert.deepEqual(foreignRequests, []);
    assert.deepEqual(pageErrors, []);
  });
});
