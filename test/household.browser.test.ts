// #38 in Chromium: the household view first (filter in the address, unknown presence, duplicate
// names asked about, a day timeline), the webhook page, 5,000 people, and the phone layout, with
// screenshots (phone and desktop, light and dark) in test-artifacts/.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { dismissNextDialog, inEveryLook, launchChromium, signInWithToken, widerThanWindow } from './helpers/browser.js';
import { ADMIN_TOKEN, eventually, startTestApp, type TestApp } from './helpers/app.js';
import { startReceiver } from './helpers/receiver.js';

const ARTIFACTS = new URL('../../test-artifacts/', import.meta.url).pathname;
const DOCS_IMAGES = new URL('../../docs/images/', import.meta.url).pathname;
const PEOPLE = 5000;

describe('the household dashboard in Chromium (#38)', () => {
  let app: TestApp;
  let browser: Browser;
  let page: Page;
  let base: string;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  const pageErrors: string[] = [];
  const figures: string[] = [];
  const shot = async (name: string) => {
    await page.screenshot({ path: `${ARTIFACTS}household-${name}.png`, fullPage: true });
    if (process.env.UPDATE_DOCS_SCREENSHOTS) await page.screenshot({ path: `${DOCS_IMAGES}${name}.png`, fullPage: true });
  };
  /** Desktop and phone, light and dark, of the page showing now. */
  const shots = (name: string, ready: string) =>
    inEveryLook(
      page,
      [
        ['desktop', 1280, 900],
        ['phone', 390, 844],
      ],
      async (device, scheme) => {
        await page.waitForSelector(ready);
        const overflow = await widerThanWindow(page);
        assert.ok(overflow <= 0, `${name} on a ${device} (${scheme}) is ${overflow}px wider than the screen`);
        await shot(`${name}-${device}-${scheme}`);
      },
    );

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    receiver = await startReceiver();
    app = await startTestApp('sqlite', { WEBHOOK_RETRY_DELAY_MS: '300', WEBHOOK_TIMEOUT_MS: '400' }, { start: true });
    base = await app.http.listen({ port: 0, host: '127.0.0.1' });
    await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: receiver.url } });
    for (const name of ['Kitchen', 'Living room', 'Bedroom']) await app.api('POST', '/api/zones', { name });
    for (const name of ['Ada', 'Bob', 'Newbie']) await app.api('POST', '/api/persons', { name });
    await app.api('POST', '/api/events', { type: 'zone.entry', person: 'bob', zone: 'bedroom' });
    await app.api('POST', '/api/events', { type: 'zone.entry', person: 'bob', zone: 'kitchen' });
    await app.api('POST', '/api/events', { type: 'zone.entry', person: 'ada', zone: 'living-room' });
    // The noise that buried the household's events: health reports, a CI run, a bot.
    for (let index = 0; index < 40; index++) await app.presence.emitHealth();
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('pageerror', (error) => pageErrors.push(error.message));
    await signInWithToken(page, base, ADMIN_TOKEN);
    await page.waitForSelector('#live:has-text("live")');
  });
  after(async () => {
    await browser?.close();
    await app?.cleanup();
    await receiver?.close();
    if (figures.length) console.log(figures.join('\n'));
  });

  it('shows presence and safety first; the other events are behind a filter kept in the address', async () => {
    await page.waitForSelector('#events li:has-text("Bob entered Kitchen")');
    assert.equal(await page.locator('#events li:has-text("system.health")').count(), 0, 'no health report in the household view');
    await page.selectOption('#event-filter', 'system');
    await page.waitForSelector('#events li:has-text("system.health")');
    assert.match(page.url(), /\?events=system(#|$)/);
    await page.reload();
    await page.waitForSelector('#events li:has-text("system.health")');
    assert.equal(await page.inputValue('#event-filter'), 'system', 'the filter survives a reload');
    await page.selectOption('#event-filter', 'changes');
    await page.waitForSelector('#events li:first-child:has-text("Newbie added")');
    await page.selectOption('#event-filter', 'household');
    await page.waitForSelector('#events li:has-text("Bob entered Kitchen")');
    assert.doesNotMatch(page.url(), /events=/);
    // Live: a presence event appears at once in the household view, a health report does not.
    await app.presence.emitHealth();
    await app.api('POST', '/api/events', { type: 'zone.exit', person: 'ada', zone: 'living-room' });
    await page.waitForSelector('#events li:first-child:has-text("Ada left Living room")');
  });

  it('names a deleted zone and person in the events before their deletion, live and after a reload', async () => {
    await app.api('POST', '/api/zones', { id: 'porch', name: 'Front porch' });
    await app.api('POST', '/api/persons', { id: 'dora', name: 'Dora' });
    await app.api('POST', '/api/events', { type: 'zone.entry', person: 'dora', zone: 'porch' });
    await page.waitForSelector('#events li:has-text("Dora entered Front porch")');
    await app.api('DELETE', '/api/zones/porch');
    await app.api('DELETE', '/api/persons/dora');
    await page.waitForSelector('#events li:has-text("Dora left Front porch")');
    await page.reload();
    await page.waitForSelector('#events li:has-text("Dora left Front porch")');
    await page.waitForSelector('#events li:has-text("Dora entered Front porch")');
  });

  it('shows a new person as unknown until the first entry or exit', async () => {
    await page.waitForSelector('#persons li[data-person="newbie"] .badge.unknown:text-is("unknown")');
    await app.api('POST', '/api/persons', { name: 'Carol' });
    await page.waitForSelector('#persons li[data-person="carol"] .badge.unknown');
    await app.api('POST', '/api/events', { type: 'zone.entry', person: 'carol', zone: 'kitchen' });
    await page.waitForSelector('#persons li[data-person="carol"] .badge.ok:text-is("Kitchen")');
  });

  it('asks before adding a second person with a name already taken, and never adds one silently', async () => {
    const question = dismissNextDialog(page);
    await page.fill('#person-form [name=name]', ' bob ');
    await page.click('#person-form button');
    assert.match(await question, /already a person called "Bob"/, 'the name as the existing person spells it');
    assert.equal((await app.api('GET', '/api/persons/bob-2')).status, 404, 'dismissed: nothing stored');
    // Said for the person at the form, not for an API client.
    await page.waitForSelector('#person-form [data-error-for="/name"]:text-is(\'Not added: a person is already called "Bob"\')');
    // Announced to a screen reader, and the field marked invalid until the next try.
    await page.waitForSelector('#person-form [role=alert][data-error-for="/name"]');
    await page.waitForSelector('#person-form [name=name][aria-invalid=true]');
    page.once('dialog', (dialog) => void dialog.accept());
    await page.click('#person-form button');
    await page.waitForSelector('#persons li[data-person="bob-2"]');
    assert.equal(await page.locator('#person-form [aria-invalid]').count(), 0);
    // Two people of one name are told apart by their ids (outside review).
    await page.waitForSelector('#persons li[data-person="bob"] .seen:text-matches("^bob( · |$)")');
    await page.waitForSelector('#persons li[data-person="bob-2"] .seen:text-is("bob-2")');
    assert.equal(await page.locator('#persons li[data-person="ada"] .seen:text-matches("^ada")').count(), 0, 'a name of its own shows no id');
  });

  it('names the existing zone as spelled also when that name holds a line break', async () => {
    await app.api('POST', '/api/zones', { id: 'annex', name: 'East\nAnnex' });
    const question = dismissNextDialog(page);
    await page.fill('#zone-form [name=name]', 'east annex');
    await page.click('#zone-form button');
    assert.match(await question, /already a zone called "East\nAnnex"/);
  });

  it("draws a person's yesterday and today: which room when", async () => {
    await page.goto(`${base}/#/people/bob`);
    await page.waitForSelector('#record svg.timeline rect.seg');
    const titles = await page.$$eval('#record svg.timeline rect.seg title', (nodes) => nodes.map((node) => node.textContent));
    assert.ok(
      titles.some((title) => /^Kitchen: /.test(title!)),
      JSON.stringify(titles),
    );
    assert.match((await page.textContent('#record .legend'))!, /Bedroom.*Kitchen/);
    await shots('person', '#record svg.timeline');
    await page.goto(`${base}/#/overview`);
    await shots('overview', '#events li');
  });

  it("a person's and a zone's page list their own events, however many others came after (new user: health reports pushed them out)", async () => {
    await page.goto(`${base}/#/people/bob`);
    await page.waitForSelector('#record ol.events li:has-text("Bob entered Kitchen")');
    assert.equal(await page.locator('#record ol.events li:has-text("Bob entered Bedroom")').count(), 1);
    await page.goto(`${base}/#/zones/bedroom`);
    await page.waitForSelector('#record ol.events li:has-text("Bob entered Bedroom")');
    // Kept current by the stream.
    await app.api('POST', '/api/events', { type: 'zone.entry', person: 'ada', zone: 'bedroom' });
    await page.waitForSelector('#record ol.events li:has-text("Ada entered Bedroom")');
    // Someone added again under the id of someone deleted: their page starts at their creation.
    await app.api('POST', '/api/persons', { id: 'cyd', name: 'Cyd' });
    await app.api('POST', '/api/events', { type: 'zone.entry', person: 'cyd', zone: 'kitchen' });
    await app.api('DELETE', '/api/persons/cyd');
    await app.api('POST', '/api/persons', { id: 'cyd', name: 'Cyd' });
    await page.goto(`${base}/#/people/cyd`);
    await page.waitForSelector('#record ol.events li:has-text("Cyd")');
    assert.deepEqual(await page.locator('#record ol.events li .type').allTextContents(), ['person.created']);
    await page.goto(`${base}/#/overview`);
  });

  it("draws a person's page when the log refuses its events (429): the timeline, and the recent events the page has (second review)", async () => {
    const refused = /\/api\/events\?.*type=person\.created/;
    await page.route(refused, (route) =>
      route.fulfill({
        status: 429,
        headers: { 'retry-after': '0', 'content-type': 'application/problem+json' },
        body: JSON.stringify({ status: 429, code: 'rate_limited' }),
      }),
    );
    try {
      await page.goto(`${base}/#/people/bob`);
      await page.reload();
      await page.waitForSelector('#record svg.timeline rect.seg');
    } finally {
      await page.unroute(refused);
    }
    await page.goto(`${base}/#/overview`);
  });

  it('subscribes the webhook per event type, shows payload and answer, redelivers every failure, copies a new secret after asking', async () => {
    await page.goto(`${base}/#/integrations`);
    await page.click('#webhook-events summary');
    assert.equal(await page.isChecked('#webhook-event-types input[value="system.health"]'), false, 'health is off by default');
    assert.equal(await page.isChecked('#webhook-event-types input[value="zone.entry"]'), true);
    await page.uncheck('#webhook-event-types input[value="node.online"]');
    await page.waitForSelector('#webhook-form .unsaved:not([hidden])');
    await page.click('#webhook-form button[type=submit]');
    await page.waitForSelector('#webhook-form .unsaved', { state: 'hidden' });
    const saved = (await app.api('GET', '/api/settings/integration')).body.webhook;
    assert.equal(saved.event_types.includes('node.online'), false);
    assert.equal(saved.event_types_default, false);
    await page.click('#webhook-events-default');
    await page.click('#webhook-form button[type=submit]');
    await page.waitForSelector('#webhook-form .unsaved', { state: 'hidden' });
    assert.equal((await app.api('GET', '/api/settings/integration')).body.webhook.event_types_default, true);

    // A failure, and its payload and answer in the log.
    receiver.answerNext(404);
    await app.api('POST', '/api/zones', { name: 'Cellar' });
    await page.waitForSelector('#deliveries tr[data-state="failed"]:has-text("zone.created")');
    await page.click('#deliveries tr[data-state="failed"] details summary');
    assert.match((await page.textContent('#deliveries tr[data-state="failed"] details pre'))!, /"event_type": "zone.created"/);
    await page.click('#redeliver-failed');
    await page.waitForSelector('#redeliver-failed:has-text("Redelivering 1")');
    await page.waitForSelector('#deliveries tr[data-state="delivered"]:has-text("zone.created")');

    // No secret yet: Generate asks nothing. With one: it asks, and Cancel keeps the secret.
    await page.click('#webhook-generate');
    await page.waitForSelector('#webhook-new-secret .copy-row input');
    const first = await page.inputValue('#webhook-new-secret input');
    assert.match(first, /^whsec_/);
    let question = '';
    page.once('dialog', (dialog) => {
      question = dialog.message();
      void dialog.dismiss();
    });
    await page.click('#webhook-generate');
    await eventually(() => question, 3000, 'the confirmation');
    assert.match(question, /replaces the current one; for 24 hours every delivery is signed with both/);
    assert.equal(await page.inputValue('#webhook-new-secret input'), first, 'cancelled: not rotated');
    page.once('dialog', (dialog) => void dialog.accept());
    await page.click('#webhook-generate');
    // Polled from here: the page's CSP forbids the string evaluation waitForFunction would use.
    await eventually(async () => (await page.inputValue('#webhook-new-secret input')) !== first, 5000, 'the rotated secret');
    await page.click('#webhook-new-secret button:has-text("Copy")');
    await page.waitForSelector('#webhook-new-secret button:is(:text("Copied"), :text("Press Ctrl+C"))');
    await page.waitForSelector('#webhook-grace:not([hidden])');
    await shots('integrations', '#deliveries tr[data-state]');
    // The parts a phone scrolls to, at their real size.
    await page.setViewportSize({ width: 390, height: 844 });
    for (const [name, selector] of [
      ['webhook', '#webhook-form'],
      ['delivery-log', '#deliveries'],
    ] as const) {
      const box = (await page.locator(selector).boundingBox())!;
      await page.screenshot({
        path: `${ARTIFACTS}household-phone-${name}.png`,
        fullPage: true,
        clip: { x: 0, y: box.y - 10, width: 390, height: Math.min(box.height + 20, 900) },
      });
    }
    // Every value of a delivery card sits at the right edge of the card, level with its label.
    const cells = await page.$$eval('#deliveries tbody tr:first-child td', (tds) => tds.map((td) => Math.round(td.getBoundingClientRect().right)));
    assert.equal(new Set(cells.filter((right) => right > 0)).size <= 2, true, `card columns end at ${cells}`);
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('lists the nodes on a phone without wrapping the time since the last heartbeat', async () => {
    const ingest = (await app.api('POST', '/api/tokens', { name: 'node', scope: 'ingest' })).body.token;
    for (const node of ['hall-sensor', 'kitchen-sensor'])
      await app.api('POST', `/api/nodes/${node}/heartbeat`, { quality: 88 }, { authorization: `Bearer ${ingest}` });
    await page.goto(`${base}/#/nodes`);
    await page.waitForSelector('#nodes tr[data-node="hall-sensor"]');
    await shots('nodes', '#nodes tr[data-node]');
  });

  it("on a phone, the People page keeps a person's presence and buttons in view beside a long room name; a room's page shows no stray text", async () => {
    const zone = (await app.api('POST', '/api/zones', { name: 'Große Küche im Erdgeschoss' })).body.id as string;
    await app.api('POST', '/api/events', { type: 'zone.entry', person: 'ada', zone });
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await page.goto(`${base}/#/people`);
      const row = page.locator('#people-list li[data-person="ada"]');
      await row.locator('.badge.ok').waitFor();
      const box = (await row.boundingBox())!;
      for (const part of [row.locator('.badge.ok'), row.getByRole('button', { name: 'Delete Ada', exact: true })]) {
        const inner = (await part.boundingBox())!;
        assert.ok(inner.y >= box.y && inner.y + inner.height <= box.y + box.height + 0.5, `${await part.textContent()} lies outside its row`);
      }
      // The id under a shared name is cut short, not drawn under the presence (review).
      // Shown alike (a zero-width space), so the same name for the page as for the service.
      await app.api('POST', '/api/persons', { id: 'ada-from-the-second-floor', name: 'Ada\u200b', duplicate_name: true });
      await app.api('POST', '/api/events', { type: 'zone.entry', person: 'ada-from-the-second-floor', zone });
      const twin = page.locator('#people-list li[data-person="ada-from-the-second-floor"]');
      await twin.locator('.badge.ok').waitFor();
      assert.match((await twin.locator('.seen').textContent())!, /ada-from-the-second-floor/);
      const seen = (await twin.locator('.seen').boundingBox())!;
      const badge = (await twin.locator('.badge.ok').boundingBox())!;
      assert.ok(seen.x + seen.width <= badge.x, `the id line's box ends at ${seen.x + seen.width}, the badge starts at ${badge.x}`);
      const clipped = await page.evaluate(
        `(() => { const line = document.querySelector('#people-list li[data-person="ada-from-the-second-floor"] .seen'); return line.scrollWidth <= line.clientWidth || getComputedStyle(line).overflowX !== 'visible'; })()`,
      );
      assert.equal(clipped, true, 'a text wider than its line is clipped, not drawn on');
      // Deleting one of the two asks about it by its id too (new user's walkthrough: "Delete Ada?" said not which).
      let question = '';
      page.once('dialog', (dialog) => {
        question = dialog.message();
        void dialog.dismiss();
      });
      await twin.locator('button.danger').click();
      await eventually(() => question, 3000, 'the confirmation');
      assert.match(question, /^Delete Ada\u200b \(ada-from-the-second-floor\)\? /);
      // A short list is as tall as its rows: the form to add a person follows it, not half a screen later (outside review).
      const rows = await page.locator('#people-list li[data-person]').count();
      const list = (await page.locator('#people-list').boundingBox())!;
      assert.ok(list.height <= rows * 48 + 2, `${rows} rows in a list ${list.height} px tall`);
      await page.goto(`${base}/#/zones/${zone}`);
      await page.waitForSelector('#record h2:has-text("Große Küche")');
      assert.doesNotMatch((await page.textContent('#record'))!, /null/);
    } finally {
      await page.setViewportSize({ width: 1280, height: 900 });
    }
  });

  it(`searches and draws ${PEOPLE.toLocaleString('en')} people, drawing only the rows on screen`, async () => {
    const household = (await app.api('GET', '/api/persons')).body.length as number;
    const rows = Array.from({ length: PEOPLE }, (_, index) => ({
      id: `person-${String(index).padStart(4, '0')}`,
      name: `Person ${String(index).padStart(4, '0')}`,
      presence: 'not_home' as const,
      zone_id: null,
      last_seen: null,
      left_at: null,
      created_at: new Date().toISOString(),
    }));
    for (let start = 0; start < rows.length; start += 500)
      await app.database.write((db) =>
        db
          .insertInto('persons')
          .values(rows.slice(start, start + 500))
          .execute(),
      );
    const total = (PEOPLE + household).toLocaleString('en');
    await page.goto(`${base}/#/people`);
    // A fresh load: the page reads the whole household (the rows above were written behind its back).
    const started = Date.now();
    await page.reload();
    await page.waitForSelector(`#people-count:text-is("${total}")`);
    await page.waitForSelector('#people-list li[data-person]');
    const opened = Date.now() - started;
    // The page's own work: from the last page of the list arriving to the rows on screen.
    const rendered = (await page.evaluate(
      "Math.round(performance.now() - Math.max(...performance.getEntriesByType('resource').filter((entry) => entry.name.includes('/api/persons')).map((entry) => entry.responseEnd)))",
    )) as number;
    const drawn = await page.locator('#people-list li[data-person]').count();
    assert.ok(drawn < 60, `${drawn} rows drawn for ${total} people: only those on screen`);
    const listBox = (await page.locator('#people-list').boundingBox())!;
    const lastDrawn = (await page.locator('#people-list li[data-person]').last().boundingBox())!;
    assert.ok(lastDrawn.y + lastDrawn.height >= listBox.y + listBox.height, 'the rows drawn fill the list: no blank below them');
    const typed = Date.now();
    await page.fill('#people-search', 'person 4321');
    await page.waitForSelector('#people-count:text-is("1 of ' + total + '")');
    await page.waitForSelector('#people-list li[data-person="person-4321"]');
    const searched = Date.now() - typed;
    const scrolled = Date.now();
    await page.fill('#people-search', '');
    await page.evaluate("document.querySelector('#people-list').scrollTop = document.querySelector('#people-list').scrollHeight");
    await page.waitForSelector('#people-list li[data-person="person-4999"]');
    const bottom = Date.now() - scrolled;
    const load = (await import('node:os')).loadavg()[0]!.toFixed(1);
    figures.push(
      `${total} people (load average ${load}): People page opened and drawn in ${opened} ms (page load, sign-in check, 6 pages of the list; drawn ${rendered} ms after the last page arrived), search in ${searched} ms, cleared and scrolled to the end in ${bottom} ms`,
    );
    // Under 1 s on a quiet machine (bench/README.md has the figures); a test may run on a busy one
    // (a search took 1,033 ms at load 13), so the bounds are loose and still catch the 10 to 27 s of
    // drawing every person.
    assert.ok(opened < 5000, `opened in ${opened} ms`);
    assert.ok(rendered < 3000, `drawn ${rendered} ms after the data arrived`);
    assert.ok(searched < 3000, `searched in ${searched} ms`);
    assert.ok(bottom < 3000, `scrolled in ${bottom} ms`);
    await page.fill('#people-search', '');
    await shots('people', '#people-list li[data-person]');
    await page.goto(`${base}/#/overview`);
    const overviewStarted = Date.now();
    await page.reload();
    await page.waitForSelector(`#persons li.more:has-text("All ${total} people")`);
    figures.push(
      `Overview with ${total} people drawn in ${Date.now() - overviewStarted} ms (${await page.locator('#persons li[data-person]').count()} listed)`,
    );
  });

  it('signing out leaves a fresh page, and a session ended elsewhere shows the sign-in form within seconds', async () => {
    await page.goto(`${base}/#/integrations`);
    await page.fill('#webhook-form [name=url]', 'http://typed-and-not-saved.example/hook');
    // Asked first: who stays to keep their edits stays signed in.
    const sessionsBefore = ((await app.api('GET', '/api/sessions')).body as unknown[]).length;
    page.once('dialog', (dialog) => void dialog.dismiss());
    await page.click('#signout');
    assert.equal(((await app.api('GET', '/api/sessions')).body as unknown[]).length, sessionsBefore, 'still signed in');
    assert.equal(await page.inputValue('#webhook-form [name=url]'), 'http://typed-and-not-saved.example/hook');
    page.once('dialog', (dialog) => void dialog.accept()); // "sign out and drop the changes not saved?"
    await page.click('#signout');
    await page.waitForSelector('#signin-form:visible');
    // The next person signs in on the same page, without loading it again.
    if (!(await page.isVisible('#signin-form [name=token]'))) await page.click('#signin-mode');
    await page.fill('#signin-form [name=token]', ADMIN_TOKEN);
    await page.click('#signin-form button[type=submit]');
    await page.waitForSelector('#app:not([hidden])');
    await page.evaluate("location.hash = '#/integrations'");
    await page.waitForSelector('#webhook-form [name=url]');
    assert.notEqual(
      await page.inputValue('#webhook-form [name=url]'),
      'http://typed-and-not-saved.example/hook',
      'the next person sees what the last one typed',
    );
    await page.goto(`${base}/#/overview`);
    await page.waitForSelector('#live:has-text("live")');
    const sessions = (await app.api('GET', '/api/sessions')).body as { id: string }[];
    for (const session of sessions) await app.api('DELETE', `/api/sessions/${session.id}`);
    await page.waitForSelector('#signin-form:visible', { timeout: 30_000 });
  });

  it('raised no script error', () => {
    assert.deepEqual(pageErrors, []);
  });
});
