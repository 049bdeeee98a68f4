// What the dashboard says when the API refuses: an admin demoted while an admin page is open, a
// failed action, a failed load; and an admin asked before demoting or deleting herself.
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import type { Browser, BrowserContext, Dialog, Page } from 'playwright-core';
import { inEveryLook, launchChromium, lowContrast } from './helpers/browser.js';
import { eventually, startTestApp, type TestApp } from './helpers/app.js';

const ARTIFACTS = new URL('../../test-artifacts/', import.meta.url).pathname;
const PASSWORD = 'kitchen table 42';
const HOUSEHOLD_REFUSAL = /A household account may not call POST \/api\/tokens/;

describe('refusals in the dashboard in Chromium', () => {
  let app: TestApp;
  let browser: Browser;
  let base: string;
  const contexts: BrowserContext[] = [];
  const pageErrors: string[] = [];

  /** A page signed in as `username`, in a fresh browser, at `hash`. */
  const signedIn = async (username: string, hash: string, viewport = { width: 1440, height: 900 }): Promise<Page> => {
    const context = await browser.newContext({ viewport });
    contexts.push(context);
    const page = await context.newPage();
    page.setDefaultTimeout(10_000);
    page.on('pageerror', (error) => pageErrors.push(error.message));
    await page.goto(base + '/');
    await page.waitForSelector('#signin-form [name=username]:visible');
    await page.fill('#signin-form [name=username]', username);
    await page.fill('#signin-form [name=password]', PASSWORD);
    await page.click('#signin-form button[type=submit]');
    await page.waitForSelector('#app:not([hidden])');
    await page.goto(`${base}/${hash}`);
    return page;
  };
  /** Runs `act` and answers the dialog it opens with `answer`; resolves to the dialog's message. */
  const dialogOf = async (page: Page, answer: 'accept' | 'dismiss', act: () => Promise<void>): Promise<string> => {
    const dialog = page.waitForEvent('dialog', { timeout: 5000 }).then(async (opened: Dialog) => {
      await opened[answer]();
      return opened.message();
    });
    await act();
    return dialog;
  };

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    app = await startTestApp('sqlite', {}, { start: true });
    base = await app.http.listen({ port: 0, host: '127.0.0.1' });
    browser = await launchChromium();
  });
  // Each test starts from two admins, whatever the one before it left.
  beforeEach(async () => {
    for (const username of ['ann', 'bea']) {
      if ((await app.api('PATCH', `/api/users/${username}`, { role: 'admin' })).status === 404)
        await app.api('POST', '/api/users', { username, role: 'admin', password: PASSWORD });
    }
  });
  after(async () => {
    for (const context of contexts) await context.close();
    await browser?.close();
    await app?.cleanup();
  });

  it('an admin demoted while Tokens is open is told why Create did nothing, under the form', async () => {
    const page = await signedIn('ann', '#/tokens');
    await page.waitForSelector('#view-tokens:not([hidden]) #tokens tbody tr');
    await app.api('PATCH', '/api/users/ann', { role: 'household' });
    await page.fill('#token-form [name=name]', 'Grafana');
    await page.click('#token-form button[type=submit]');
    const said = page.locator('#view-tokens [role=alert]:visible');
    await said.waitFor();
    assert.match((await said.textContent())!, HOUSEHOLD_REFUSAL);
    // The menu follows the account's role: the admin pages are gone.
    await page.waitForSelector('#nav a[data-view="tokens"]', { state: 'hidden' });
    await page.screenshot({ path: `${ARTIFACTS}refusals-token-create.png`, fullPage: true });
  });

  it('an admin demoted while the menu still offers Integrations is told the account may not see it, not shown empty forms', async () => {
    const page = await signedIn('bea', '#/overview', { width: 390, height: 844 });
    await page.waitForSelector('#view-overview:not([hidden])');
    await app.api('PATCH', '/api/users/bea', { role: 'household' });
    await page.click('#menu');
    await page.click('#nav a[data-view="integrations"]');
    const said = page.locator('#view-integrations [role=alert]:visible');
    await said.waitFor();
    assert.match((await said.textContent())!, /may not see this page/);
    assert.match((await said.textContent())!, /A household account may not call GET \/api\/settings\/integration/);
    assert.equal(await page.isVisible('#webhook-form'), false, 'no empty settings form that looks unconfigured');
    assert.equal(await page.isVisible('#mqtt-form'), false);
    await inEveryLook(
      page,
      [
        ['phone', 390, 844],
        ['desktop', 1440, 900],
      ],
      async (device, scheme) => {
        assert.deepEqual(await lowContrast(page), [], `${device} ${scheme}`);
        await page.screenshot({ path: `${ARTIFACTS}refusals-integrations-${device}-${scheme}.png`, fullPage: true });
      },
    );
    await page.click('#view-integrations a[href="#/overview"]');
    await page.waitForSelector('#view-overview:not([hidden])');
  });

  it('a failed load says why at the top of the page, and a failed action where it was asked for', async () => {
    const page = await signedIn('ann', '#/overview');
    await page.waitForSelector('#view-overview:not([hidden]) #mode');
    const unavailable = JSON.stringify({ type: '/problems/unavailable', title: 'Service unavailable', status: 503, detail: 'The database is busy; try again' });
    await page.route('**/api/nodes*', (route) => route.fulfill({ status: 503, headers: { 'content-type': 'application/problem+json' }, body: unavailable }));
    await page.click('#nav a[data-view="nodes"]');
    const said = page.locator('#view-nodes [role=alert]:visible');
    await said.waitFor();
    assert.equal((await said.textContent())!, 'This page could not be loaded. The database is busy; try again');
    // The table no longer says it is loading.
    assert.equal((await page.textContent('#nodes tbody'))!.trim(), 'Not loaded.');
    assert.equal(await page.locator('#view-nodes .loading-text, #view-nodes tr.placeholder').count(), 0);
    await page.screenshot({ path: `${ARTIFACTS}refusals-nodes-not-loaded.png` });
    await page.unroute('**/api/nodes*');
    // Back and there again: loaded, the message is gone.
    await page.click('#nav a[data-view="overview"]');
    await page.click('#nav a[data-view="nodes"]');
    await page.waitForSelector('#nodes tr.empty');
    assert.equal(await said.count(), 0);
    // The mode is refused: the detail is said, and the select shows the mode in force.
    await page.click('#nav a[data-view="overview"]');
    await page.route('**/api/system/mode', (route) =>
      route.fulfill({ status: 503, headers: { 'content-type': 'application/problem+json' }, body: unavailable }),
    );
    const message = await dialogOf(page, 'accept', () => page.selectOption('#mode', 'away').then(() => {}));
    assert.match(message, /The database is busy; try again/);
    await eventually(async () => (await page.inputValue('#mode')) === 'home', 5000, 'the select back at home');
    await page.unroute('**/api/system/mode');
  });

  it("a person's page whose events could not be read says so, not that there are none", async () => {
    await app.api('POST', '/api/persons', { id: 'ada', name: 'Ada' });
    const page = await signedIn('ann', '#/overview');
    await page.waitForSelector('#view-overview:not([hidden]) #mode');
    const unavailable = JSON.stringify({ type: '/problems/unavailable', title: 'Service unavailable', status: 503, detail: 'The database is busy; try again' });
    // The record's own read (the types that name a person or zone, creations among them), not the timeline's.
    const recordRead = (url: URL) => url.pathname === '/api/events' && url.searchParams.getAll('type').includes('person.created');
    await page.route(recordRead, (route) => route.fulfill({ status: 503, headers: { 'content-type': 'application/problem+json' }, body: unavailable }));
    await page.goto(`${base}/#/people/ada`);
    const events = page.locator('#record ol.events');
    await page.waitForSelector('#record ol.events .not-loaded');
    assert.match((await events.textContent())!, /Earlier events could not be loaded: The database is busy; try again/);
    assert.doesNotMatch((await events.textContent())!, /No recent events/);
    assert.equal(await page.locator('#view-overview [role=alert]:visible').count(), 0, 'the rest of the page loaded');
    await page.screenshot({ path: `${ARTIFACTS}refusals-record-events.png`, fullPage: true });
    await page.unroute(recordRead);
    // Read again at the next record: the message goes.
    await page.goto(`${base}/#/overview`);
    await page.goto(`${base}/#/people/ada`);
    await page.waitForSelector('#record ol.events li[data-seq]');
    assert.equal(await events.locator('.not-loaded').count(), 0);
  });

  it('asks an admin before she demotes her own account, and says when no admin user would be left', async () => {
    await app.api('DELETE', '/api/users/bea');
    const page = await signedIn('ann', '#/users');
    const role = '#users tbody tr[data-user="ann"] select';
    await page.waitForSelector(role);
    const question = await dialogOf(page, 'dismiss', () => page.selectOption(role, 'household').then(() => {}));
    assert.match(question, /your own account/i);
    assert.match(question, /no admin user is left/);
    assert.equal(await page.inputValue(role), 'admin', 'cancelled: the select shows the role unchanged');
    assert.equal((await app.api('GET', '/api/users/ann')).body.role, 'admin');
    // Another admin's role changes with no question.
    await app.api('POST', '/api/users', { username: 'cy', role: 'admin', password: PASSWORD });
    await page.reload();
    await page.waitForSelector('#users tbody tr[data-user="cy"] select');
    let asked = false;
    const unexpected = (dialog: Dialog) => {
      asked = true;
      void dialog.dismiss();
    };
    page.on('dialog', unexpected);
    const patched = page.waitForResponse((response) => response.url().endsWith('/api/users/cy') && response.request().method() === 'PATCH');
    await page.selectOption('#users tbody tr[data-user="cy"] select', 'household');
    await patched;
    page.off('dialog', unexpected);
    assert.equal(asked, false);
    assert.equal((await app.api('GET', '/api/users/cy')).body.role, 'household');
    // With cy no longer an admin either, ann accepts: demoted, her page is a household's.
    const accepted = await dialogOf(page, 'accept', () => page.selectOption(role, 'household').then(() => {}));
    assert.match(accepted, /no admin user is left/);
    await page.waitForSelector('#nav a[data-view="tokens"]', { state: 'hidden' });
    assert.equal((await app.api('GET', '/api/users/ann')).body.role, 'household');
  });

  it('asks in its own words before an admin deletes her own account', async () => {
    const page = await signedIn('ann', '#/users');
    await page.waitForSelector('#users tbody tr[data-user="ann"]');
    const question = await dialogOf(page, 'dismiss', () => page.click('#users tbody tr[data-user="ann"] button.danger'));
    assert.match(question, /your own account/i);
    assert.equal((await app.api('GET', '/api/users/ann')).status, 200, 'cancelled: kept');
  });

  it('raised no script error', () => {
    assert.deepEqual(pageErrors, []);
  });
});
