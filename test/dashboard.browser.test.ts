import { REPLAY } from './helpers/fixtures.js';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { launchChromium, lowContrast, widerThanWindow } from './helpers/browser.js';
import { ADMIN_TOKEN, eventually, startTestApp, type TestApp } from './helpers/app.js';
import { startBroker } from './helpers/broker.js';
import { startReceiver } from './helpers/receiver.js';
import { botRequest } from './helpers/bot.js';

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
  /** Every API request the page makes (the event stream aside), in order. */
  const apiRequests: string[] = [];
  const requestsDuring = async (work: () => Promise<void>) => {
    const from = apiRequests.length;
    await work();
    return apiRequests.slice(from);
  };
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
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
    // A short node timeout, so a node can go offline within the test.
    app = await startTestApp('sqlite', { MOTHERSHIP_ID: `ms${id}`, NODE_TIMEOUT_MS: '1500' }, { start: true });
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
      ['e5f6071', 0.62, 1.6, 1.09, 2.4, 38],
    ] as const;
    for (const [sha, subject, alpha, beta, gamma, grep] of runs) {
      await app.api('POST', '/api/baselines', {
        commit_sha: sha,
        timestamp: new Date().toISOString(),
        subject_geomean: subject,
        alpha_geomean: alpha,
        beta_geomean: beta,
        gamma_geomean: gamma,
        grep_1000_mean_ms: grep,
      });
    }
    await app.api('POST', '/api/matches', { id: 'final-42', status: 'completed', replay: REPLAY });
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('request', (request) => {
      if (!request.url().startsWith(base) && !request.url().startsWith('data:')) foreignRequests.push(request.url());
      else if (request.url().startsWith(`${base}/api/`) && !request.url().includes('/api/events/stream'))
        apiRequests.push(`${request.method()} ${request.url().slice(base.length)}`);
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
    await page.click('#signin-mode');
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

  it('applies a burst of events to the page without asking the API again, and names people and zones', async () => {
    // The old page re-read persons, zones, health and falls 150 ms after each event: about 4 requests per event here.
    const moves: Array<[string, string, string]> = [];
    for (let round = 0; round < 4; round++)
      moves.push(['zone.entry', 'ada', 'living-room'], ['zone.entry', 'bob', 'kitchen'], ['zone.exit', 'bob', 'kitchen'], ['zone.entry', 'ada', 'kitchen']);
    const requests = await requestsDuring(async () => {
      for (const [type, person, zone] of moves) {
        await app.api('POST', '/api/events', { type, person, zone });
        await pause(200);
      }
      await app.api('PUT', '/api/system/mode', { mode: 'sleep' });
      await app.api('POST', '/api/persons', { id: 'dee', name: 'Dee' });
      await app.api('PATCH', '/api/zones/bedroom', { name: 'Main bedroom' });
      await page.waitForSelector('[data-zone="bedroom"] .name:has-text("Main bedroom")');
      await pause(500);
    });
    assert.deepEqual(requests, [], 'no API request for events that carry their change');
    // What the events carried is on the page: occupancy, presence, mode, names.
    assert.equal(await page.textContent('[data-zone="kitchen"] .who'), 'Ada');
    assert.equal(await page.textContent('[data-zone="kitchen"] .count'), '1');
    assert.equal(await page.textContent('[data-zone="living-room"] .count'), '0');
    assert.match((await page.textContent('#persons li[data-person="bob"] .badge'))!, /^home$/);
    assert.equal(await page.textContent('#persons li[data-person="ada"] .badge.ok'), 'Kitchen', 'at home in a room: the room');
    assert.equal(await page.getAttribute('#persons li[data-person="ada"] .badge', 'title'), 'Home, in Kitchen');
    assert.ok(await page.$('#persons li[data-person="dee"]'));
    assert.equal(await page.inputValue('#mode'), 'sleep');
    // Event rows in words, with names rather than ids: presence first, the rest behind the filter.
    await page.waitForSelector('#events li:has-text("Ada entered Kitchen")');
    await page.waitForSelector('#events li:has-text("Bob left Kitchen")');
    await page.selectOption('#event-filter', 'changes');
    await page.waitForSelector('#events li:first-child:has-text("Zone renamed to Main bedroom")');
    await page.selectOption('#event-filter', 'household');
    // The state matches the server's.
    const zones = (await app.api('GET', '/api/zones')).body as Array<{ id: string; count: number }>;
    for (const zone of zones) assert.equal(await page.textContent(`[data-zone="${zone.id}"] .count`), String(zone.count), zone.id);
    await app.api('PUT', '/api/system/mode', { mode: 'home' });
    await app.api('DELETE', '/api/persons/dee');
    await page.waitForSelector('#persons li[data-person="dee"]', { state: 'detached' });
  });

  it('lists nodes with their heartbeat, quality and state, live, with loading and empty states', async () => {
    // The list is slow to come: the page says it is loading, then that there are no nodes yet.
    await page.route('**/api/nodes', async (route) => {
      await pause(600);
      await route.continue();
    });
    await page.click('#nav a[data-view="nodes"]');
    await page.waitForSelector('#nodes tr.placeholder:has-text("Loading")');
    await page.waitForSelector('#nodes tr.empty:has-text("No nodes yet")');
    await page.unroute('**/api/nodes');
    assert.equal(new URL(page.url()).hash, '#/nodes');
    await shot('nodes-empty');
    const requests = await requestsDuring(async () => {
      await app.api('POST', '/api/nodes/hall-sensor/heartbeat', { quality: 87 });
      await page.waitForSelector('#nodes tr[data-node="hall-sensor"]:has-text("online")');
    });
    assert.deepEqual(requests, [], 'node.online carries the row');
    assert.match((await page.textContent('#nodes tr[data-node="hall-sensor"]'))!, /87%.*(just now|s ago)/);
    await app.api('POST', '/api/nodes/attic-sensor/heartbeat', { quality: 64 });
    await page.waitForSelector('#nodes tr[data-node="attic-sensor"]:has-text("online")');
    await shot('nodes');
    // Silent for NODE_TIMEOUT_MS (1.5 s here): offline, and the overview's count follows at once.
    await page.waitForSelector('#nodes tr[data-node="hall-sensor"]:has-text("offline")', { timeout: 6000 });
    await page.click('#nav a[data-view="overview"]');
    await page.waitForSelector('#node-count:has-text("0")');
  });

  it('lists every page of nodes, and renames, places and removes them', async () => {
    // Pages of one node: the list follows each page's Link to the next.
    await page.route('**/api/nodes', (route) => route.continue({ url: `${base}/api/nodes?limit=1` }));
    await page.click('#nav a[data-view="nodes"]');
    await page.waitForSelector('#nodes tr[data-node="attic-sensor"]');
    await page.waitForSelector('#nodes tr[data-node="hall-sensor"]');
    await page.unroute('**/api/nodes');

    page.once('dialog', (dialog) => void dialog.accept('Attic'));
    await page.click('#nodes tr[data-node="attic-sensor"] button:has-text("Rename")');
    await page.waitForSelector('#nodes tr[data-node="attic-sensor"] a:text-is("Attic")');
    assert.equal((await app.api('GET', '/api/nodes/attic-sensor')).body.name, 'Attic');

    await page.selectOption('#nodes tr[data-node="attic-sensor"] select.node-zone', 'kitchen');
    await eventually(async () => (await app.api('GET', '/api/nodes/attic-sensor')).body.zone === 'kitchen', 3000, 'placed in the kitchen');
    await page.selectOption('#nodes tr[data-node="attic-sensor"] select.node-zone', '');
    await eventually(async () => (await app.api('GET', '/api/nodes/attic-sensor')).body.zone === null, 3000, 'in no zone');

    let question = '';
    page.once('dialog', (dialog) => {
      question = dialog.message();
      void dialog.accept();
    });
    await page.click('#nodes tr[data-node="hall-sensor"] button:has-text("Remove")');
    await page.waitForSelector('#nodes tr[data-node="hall-sensor"]', { state: 'detached' });
    assert.match(question, /Remove hall-sensor\?/);
    assert.equal((await app.api('GET', '/api/nodes/hall-sensor')).status, 404);
  });

  it('links every page and record, and the back button returns', async () => {
    await page.goto(`${base}/#/people/ada`);
    await page.waitForSelector('#record:not([hidden]) h2:has-text("Ada")');
    assert.match((await page.textContent('#record'))!, /Zone\s*Kitchen/);
    await page.waitForSelector('#record .events li:has-text("Ada entered Kitchen")');
    await page.click('#record a[href="#/zones/kitchen"]');
    await page.waitForSelector('#record h2:has-text("Kitchen")');
    assert.match((await page.textContent('#record'))!, /Who\s*Ada/);
    await page.goBack();
    await page.waitForSelector('#record h2:has-text("Ada")');
    await page.click('#nav a[data-view="enrichment"]');
    await page.waitForSelector('#view-enrichment:not([hidden])');
    await page.goBack();
    await page.waitForSelector('#view-overview:not([hidden]) #record h2:has-text("Ada")');
    await page.click('#record a.close');
    await page.waitForSelector('#record', { state: 'hidden' });
    await page.goto(`${base}/#/enrichment/matches/final-42`);
    await page.waitForSelector('#matches tr.selected[data-match="final-42"]');
    await page.goto(`${base}/#/nodes/attic-sensor`);
    await page.waitForSelector('#nodes tr.selected[data-node="attic-sensor"]');
    await page.goto(`${base}/#/people/nobody`);
    await page.waitForSelector('#record:has-text("There is no person")');
    await page.goto(`${base}/#/overview`);
  });

  it('shows a validation error next to the broker URL field', async () => {
    await page.click('#nav a[data-view="integrations"]');
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
    await page.waitForSelector('#mqtt-status:text-is("connected")', { timeout: 8000 });
    assert.equal(await page.inputValue('#mqtt-form [name=password]'), '', 'the password is never prefilled');
    assert.match((await page.getAttribute('#mqtt-form [name=password]', 'placeholder'))!, /saved/);
    assert.equal((await app.api('GET', '/api/settings/integration')).body.mqtt.status.connected, true);
  });

  it('tests both connections and publishes discovery', async () => {
    await page.click('#mqtt-test');
    await page.waitForSelector('#mqtt-result:has-text("Connected to the broker in")');
    await page.click('#mqtt-discovery');
    await page.waitForSelector('#mqtt-result:has-text("Published 16 discovery configs")');

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
    // An event makes the page re-read the settings (this used to overwrite typed fields).
    const refreshed = page.waitForResponse((response) => response.url().endsWith('/api/settings/integration') && response.request().method() === 'GET');
    await app.api('PUT', '/api/system/mode', { mode: 'away' });
    await refreshed;
    await pause(100);
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

  it('refreshes the delivery log under a flow of events at most once a second', async () => {
    assert.equal((await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: receiver.url } })).status, 200);
    await page.click('#nav a[data-view="overview"]');
    await page.click('#nav a[data-view="integrations"]');
    await page.waitForSelector('#deliveries tbody tr[data-state]');
    const started = Date.now();
    const requests = await requestsDuring(async () => {
      for (let index = 0; index < 16; index++) {
        await app.api('POST', '/api/events', { type: 'anomaly.detected', zone: 'kitchen', detail: { burst: index } });
        await pause(200);
      }
      await pause(1500);
    });
    const seconds = (Date.now() - started) / 1000;
    const deliveries = requests.filter((request) => request.startsWith('GET /api/webhook/deliveries')).length;
    const settings = requests.filter((request) => request.startsWith('GET /api/settings/integration')).length;
    // The old page read the settings and the log after every event: 32 requests here.
    assert.ok(deliveries >= 1 && deliveries <= Math.ceil(seconds) + 1, `${deliveries} reads of the log in ${seconds} s`);
    assert.ok(settings <= Math.ceil(seconds / 5) + 1, `${settings} reads of the settings in ${seconds} s: ${requests.join(', ')}`);
    assert.equal(requests.length, deliveries + settings, requests.join(', '));
    await page.waitForSelector('#deliveries tbody tr:has-text("anomaly.detected")');
  });

  it('shows an active fall on every page until it is marked cleared, which emits fall.cleared', async () => {
    await app.api('POST', '/api/events', { type: 'fall.detected', person: 'ada', zone: 'kitchen' });
    const banner = await page.waitForSelector('#fall-banner:not([hidden])', { timeout: 5000 });
    assert.match((await banner.textContent())!, /Fall detected\s*Ada in Kitchen, since .+\(just now\)/);
    for (const view of ['overview', 'enrichment', 'integrations']) {
      await page.click(`#nav a[data-view="${view}"]`);
      assert.equal(await page.isVisible('#fall-banner'), true, view);
    }
    await shot('fall');
    page.once('dialog', (dialog) => void dialog.accept());
    await page.click('#fall-clear');
    await page.waitForSelector('#fall-banner', { state: 'hidden', timeout: 5000 });
    const { events } = (await app.api('GET', '/api/events?type=fall.cleared&order=desc&limit=1')).body;
    assert.deepEqual([events[0].event_type, events[0].person, events[0].zone], ['fall.cleared', 'ada', 'kitchen']);
    await page.click('#nav a[data-view="overview"]');
    await page.waitForSelector('#falls li:has-text("Fall cleared: Ada in Kitchen")');
    // Cleared for nobody in particular (api.md's example): no "Someone" (outside review).
    await app.api('POST', '/api/events', { type: 'fall.cleared' });
    await page.waitForSelector('#falls li .what:text-is("Fall cleared")');
    assert.doesNotMatch((await page.textContent('#falls'))!, /Someone/);
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
    page.once('dialog', (dialog) => {
      question = dialog.message();
      void dialog.accept();
    });
    await page.click('#persons li[data-person="cy"] button:has-text("Delete")');
    await page.waitForSelector('#persons li[data-person="cy"]', { state: 'detached' });
    assert.equal((await app.api('GET', '/api/persons/cy')).status, 404);
    assert.match(question, /loses device_tracker\.mothership_cy, binary_sensor\.mothership_cy_presence and sensor\.mothership_cy_room;/);
  });

  it('renders the baseline history, one chart per metric: the subject and the three comparison tools', async () => {
    await page.click('#nav a[data-view="baselines"]');
    const chart = (field: string) => `#baseline-charts [data-metric="${field}"]`;
    await page.waitForSelector(`${chart('subject_geomean')} svg[data-points="7"]`);
    for (const tool of ['subject', 'alpha', 'beta', 'gamma']) assert.ok(await page.$(`${chart(`${tool}_geomean`)} path[data-series="${tool}_geomean"]`), tool);
    assert.ok(await page.$(`${chart('subject_geomean')} polygon[data-band="subject_geomean"]`), 'the noise band of the subject');
    assert.match((await page.getAttribute(`${chart('subject_geomean')} [data-tip]`, 'data-tip'))!, /^9a8b7c6 · .+\nsubject_geomean: 0\.5 s\nno history yet$/);
    // Hovering a point shows its values next to it; a regression is ringed on the chart.
    await page.hover(`${chart('subject_geomean')} circle[data-point] >> nth=-1`);
    assert.match((await page.textContent(`${chart('subject_geomean')} .chart-tip:not([hidden])`))!, /^e5f6071 · .+\nsubject_geomean: 0\.62 s\nREGRESSION: /);
    assert.ok(await page.$(`${chart('subject_geomean')} circle[data-regression="subject_geomean"]`), 'the regression is marked');
    assert.ok(await page.$(`${chart('grep_1000_mean_ms')} path[data-series="grep_1000_mean_ms"]`));
    await page.waitForSelector('#comparison tbody tr');
    assert.match((await page.textContent('#comparison-verdict'))!, /Against the previous run: beyond 10% on subject_geomean/);
    assert.equal(await page.locator('#comparison tbody tr').count(), 8, 'each metric and speedup once');
    await shot('baselines');
    // Any two runs can be compared; the choice is an address of its own, and Back returns to the last two.
    await page.selectOption('#compare-base', { label: (await page.textContent('#compare-base option:nth-child(4)'))! });
    await page.waitForSelector('#comparison-verdict:has-text("b2c3d4e → e5f6071")');
    assert.match(new URL(page.url()).hash, /^#\/baselines\/\d+\.\.\d+$/);
    assert.equal(await page.textContent('#comparison tbody tr:first-child td:nth-child(2)'), '0.5', 'the base column is b2c3d4e');
    await page.goBack();
    await page.waitForSelector('#comparison-verdict:has-text("Against the previous run")');
    assert.equal(await page.inputValue('#compare-base'), await page.getAttribute('#compare-base option:nth-child(2)', 'value'));
  });

  it('lists bots and matches, and creates a bot showing its secret once', async () => {
    await page.click('#nav a[data-view="enrichment"]');
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
    // A bot's request shows at once, from its event alone: the match queued, the bot's quota counted.
    const secret = /(mss_[A-Za-z0-9_-]+)$/.exec((await page.textContent('#bot-secret'))!)![1]!;
    const requests = await requestsDuring(async () => {
      const requested = await botRequest(app.http, { id: 'replay-bot', shared_secret: secret }, 'POST', '/api/request-enrichment', { match_id: 'final-42' });
      assert.equal(requested.status, 202, JSON.stringify(requested.body));
      await page.waitForSelector('#matches tr[data-match="final-42"] .badge:has-text("queued")');
      await page.waitForSelector('#bots li[data-bot="replay-bot"]:has-text("1 of 5 requests in 24 h")');
      await pause(400);
    });
    assert.deepEqual(requests, []);
    await shot('enrichment');
    page.once('dialog', (dialog) => void dialog.accept());
    await page.click('#bots li[data-bot="replay-bot"] button:has-text("Delete")');
    await page.waitForSelector('#bots li[data-bot="replay-bot"]', { state: 'detached' });
    assert.equal(
      (await app.api('GET', '/api/bots')).body.some((bot: { id: string }) => bot.id === 'replay-bot'),
      false,
    );
  });

  it('creates an API token shown once with a Copy button, shows its last use, and revokes it after a confirmation', async () => {
    await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
    await page.click('#nav a[data-view="tokens"]');
    await page.waitForSelector('#tokens tbody tr.empty:has-text("No API tokens yet")');
    await page.fill('#token-form [name=name]', 'Kitchen node');
    await page.selectOption('#token-form [name=scope]', 'ingest');
    await page.click('#token-form button[type=submit]');
    const input = await page.waitForSelector('#token-new:not([hidden]) input');
    const token = await input.inputValue();
    assert.match(token, /^mst_[A-Za-z0-9_-]{43}$/);
    await page.click('#token-new button:has-text("Copy")');
    await page.waitForSelector('#token-new button:has-text("Copied")');
    assert.equal(await page.evaluate('navigator.clipboard.readText()'), token);
    await page.waitForSelector('#tokens tr[data-token="kitchen-node"]:has-text("never")');
    assert.equal(await page.textContent('#tokens tr[data-token="kitchen-node"] .badge'), 'ingest');
    // The node uses it; the list shows the use, and never the token.
    assert.equal((await app.api('POST', '/api/nodes/kitchen-node/heartbeat', { quality: 90 }, { authorization: `Bearer ${token}` })).status, 204);
    await app.api('POST', '/api/tokens', { name: 'Grafana', scope: 'read' });
    await page.click('#nav a[data-view="overview"]');
    await page.click('#nav a[data-view="tokens"]');
    await page.waitForSelector('#tokens tr[data-token="kitchen-node"]:has-text("just now")');
    await page.waitForSelector('#tokens tr[data-token="grafana"]');
    assert.equal(await page.isVisible('#token-new'), false, 'the token is not shown again');
    assert.ok(!(await page.content()).includes(token.slice(4)), 'no trace of the token in the page');
    await page.fill('#token-form [name=name]', 'Import script');
    await page.selectOption('#token-form [name=scope]', 'admin');
    await page.click('#token-form button[type=submit]');
    await page.waitForSelector('#tokens tr[data-token="import-script"]');
    await shot('tokens');
    await page.emulateMedia({ colorScheme: 'dark' });
    await shot('tokens-dark');
    await page.setViewportSize({ width: 390, height: 844 });
    assert.ok((await widerThanWindow(page)) <= 0, 'fits a phone');
    await shot('phone-tokens-dark');
    await page.emulateMedia({ colorScheme: 'light' });
    await shot('phone-tokens');
    await page.setViewportSize({ width: 1280, height: 900 });
    let question = '';
    page.once('dialog', (dialog) => {
      question = dialog.message();
      void dialog.accept();
    });
    await page.click('#tokens tr[data-token="kitchen-node"] button:has-text("Revoke")');
    await page.waitForSelector('#tokens tr[data-token="kitchen-node"]', { state: 'detached' });
    assert.match(question, /Revoke "Kitchen node"\? Whatever uses it \(posts events and heartbeats\) is refused from now on/);
    assert.equal((await app.api('POST', '/api/nodes/kitchen-node/heartbeat', { quality: 90 }, { authorization: `Bearer ${token}` })).status, 401);
    for (const id of ['grafana', 'import-script']) await app.api('DELETE', `/api/tokens/${id}`);
  });

  it('fits a phone screen: a menu instead of a wrapped header, tables as cards', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${base}/#/overview`);
    await page.waitForSelector('[data-zone="kitchen"]');
    const header = await page.locator('.topbar').boundingBox();
    assert.ok(header!.height <= 56, `the header is one row (${header!.height}px)`);
    assert.equal(await page.isVisible('#nav'), false, 'the pages are behind the menu');
    const overflow = await widerThanWindow(page);
    assert.ok(overflow <= 0, `page is ${overflow}px wider than the screen`);
    await shot('phone');
    await page.click('#menu');
    await page.waitForSelector('#nav a[data-view="integrations"]', { state: 'visible' });
    await shot('phone-menu');
    await page.click('#nav a[data-view="integrations"]');
    await page.waitForSelector('#nav', { state: 'hidden' });
    await page.waitForSelector('#deliveries tbody tr[data-state]');
    // Every column of the delivery log is on the screen, named (an empty cell, such as no error, is left out).
    const cells = await page.$$eval('#deliveries tbody tr:first-child td', (tds) =>
      tds.map((td) => ({
        label: td.dataset.label,
        right: td.getBoundingClientRect().right,
        visible: td.getBoundingClientRect().width > 0,
        empty: td.textContent === '',
      })),
    );
    assert.deepEqual(
      cells.map((cell) => cell.label),
      ['Time', 'Event', 'Attempt', 'State', 'Answer', 'Error', 'Sent and answered', ''],
    );
    assert.ok(
      cells.every((cell) => (cell.visible || cell.empty) && cell.right <= 390),
      JSON.stringify(cells),
    );
    assert.ok((await widerThanWindow(page)) <= 0);
    await shot('phone-integrations');
    // A match never enriched: its "not requested" was cut to "not requ" beside the status (new user's walkthrough).
    await app.api('POST', '/api/matches', { id: 'final-43', status: 'completed', replay: REPLAY });
    await page.goto(`${base}/#/enrichment`);
    await page.reload();
    await page.waitForSelector('#matches tr[data-match="final-43"] .badge:has-text("not requested")');
    const badges = await page.$$eval('#matches tbody .badge', (spans) =>
      spans.map((span) => ({ text: span.textContent, right: span.getBoundingClientRect().right, cell: span.closest('td')!.getBoundingClientRect().right })),
    );
    assert.ok(
      badges.every((badge) => badge.right <= badge.cell + 0.5),
      JSON.stringify(badges),
    );
    await shot('phone-enrichment');
    // Commentary keeps its paragraphs (new user's walkthrough: they ran into one).
    await app.database.write((db) =>
      db
        .updateTable('matches')
        .set({ enrichment_status: 'completed', commentary: 'First paragraph.\n\nSecond paragraph.', enrichment_completed_at: new Date().toISOString() })
        .where('id', '=', 'final-43')
        .execute(),
    );
    await page.reload();
    await page.click('#matches tr[data-match="final-43"] summary');
    assert.match(await page.locator('#matches tr[data-match="final-43"] .commentary').innerText(), /First paragraph\.\n+Second paragraph\./);
  });

  it('looks right in dark mode, on a desktop and a phone', async () => {
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.goto(`${base}/#/overview`);
    await page.waitForSelector('[data-zone="kitchen"]');
    const background = await page.evaluate('getComputedStyle(document.body).backgroundColor');
    assert.equal(background, 'rgb(16, 21, 28)');
    await shot('phone-dark');
    await page.setViewportSize({ width: 1280, height: 900 });
    await shot('overview-dark');
    await page.goto(`${base}/#/baselines`);
    await page.waitForSelector('#baseline-charts [data-metric="subject_geomean"] svg[data-points="7"]');
    await shot('baselines-dark');
    await page.emulateMedia({ colorScheme: 'light' });
  });

  it('every text of the main pages, placeholders included, keeps 4.5:1 against its background (3:1 when large), light and dark', async () => {
    const failures: string[] = [];
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      for (const [view, ready] of [
        ['overview', '[data-zone="kitchen"]'],
        ['people', '#people-list li[data-person]'],
        ['nodes', '#nodes tr[data-node]'],
        ['integrations', '#webhook-form'],
        ['tokens', '#view-tokens:not([hidden])'],
      ]) {
        await page.goto(`${base}/#/${view}`);
        await page.waitForSelector(ready!);
        // The placeholder that says a secret is saved is among the texts checked.
        if (view === 'integrations') await page.waitForSelector('#webhook-form [name=secret][placeholder*="saved; type to replace"]');
        failures.push(...(await lowContrast(page)).map((failure) => `${scheme} ${view}: ${failure}`));
      }
    }
    await page.emulateMedia({ colorScheme: 'light' });
    assert.deepEqual(failures, []);
  });

  it('made no request outside the service and raised no script error', () => {
    assert.deepEqual(foreignRequests, []);
    assert.deepEqual(pageErrors, []);
  });
});
