import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchChromium } from './helpers/browser.js';
import { ADMIN_TOKEN, startTestApp, type TestApp } from './helpers/app.js';

const ARTIFACTS = new URL('../../test-artifacts/', import.meta.url).pathname;
const DOCS_IMAGES = new URL('../../docs/images/', import.meta.url).pathname;
const PHONE = { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 };
const DESKTOP = { viewport: { width: 1280, height: 860 } };
const PASSWORD = 'kitchen table 42';

describe('dashboard users in Chromium', () => {
  let app: TestApp;
  let browser: Browser;
  let base: string;
  const contexts: BrowserContext[] = [];
  const pageErrors: string[] = [];

  /** A page in a fresh browser (no cookie, no stored sign-in mode), in the given size and colour scheme. */
  const open = async (size: typeof PHONE | typeof DESKTOP, colorScheme: 'light' | 'dark'): Promise<Page> => {
    const context = await browser.newContext({ ...size, colorScheme });
    contexts.push(context);
    const page = await context.newPage();
    page.on('pageerror', (error) => pageErrors.push(error.message));
    await page.goto(base + '/');
    await page.waitForSelector('#signin:not([hidden])');
    return page;
  };
  const shot = async (page: Page, name: string) => {
    await page.screenshot({ path: `${ARTIFACTS}users-${name}.png`, fullPage: true });
    if (process.env.UPDATE_DOCS_SCREENSHOTS) await page.screenshot({ path: `${DOCS_IMAGES}${name}.png`, fullPage: true });
  };
  const signInAs = async (page: Page, username: string, password: string, remember = false) => {
    await page.fill('#signin-form [name=username]', username);
    await page.fill('#signin-form [name=password]', password);
    if (remember) await page.check('#signin-form [name=remember]');
    await page.click('#signin-form button[type=submit]');
  };

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    if (process.env.UPDATE_DOCS_SCREENSHOTS) mkdirSync(DOCS_IMAGES, { recursive: true });
    app = await startTestApp('sqlite', {}, { start: true });
    base = await app.http.listen({ port: 0, host: '127.0.0.1' });
    await app.api('POST', '/api/users', { username: 'kim', name: 'Kim', role: 'household', password: PASSWORD });
    await app.api('POST', '/api/users', { username: 'sam', name: 'Sam Rivera', role: 'admin', password: PASSWORD });
    await app.api('POST', '/api/persons', { id: 'kim', name: 'Kim' });
    await app.api('POST', '/api/zones', { id: 'kitchen', name: 'Kitchen' });
    await app.api('POST', '/api/events', { type: 'zone.entry', person: 'kim', zone: 'kitchen' });
    await app.api('POST', '/api/nodes/node-1/heartbeat', { quality: 80 });
    await app.api('PATCH', '/api/nodes/node-1', { name: 'Hall sensor', zone: 'kitchen' });
    browser = await launchChromium();
  });
  after(async () => {
    for (const context of contexts) await context.close();
    await browser?.close();
    await app?.cleanup();
  });

  it('a household member signs in on a phone, is remembered, and is offered only Overview, People, Nodes and Devices', async () => {
    const page = await open(PHONE, 'light');
    await shot(page, 'phone-signin');
    await signInAs(page, 'kim', 'wrong password');
    await page.waitForSelector('[data-error-for="/password"]:has-text("do not match")');
    await signInAs(page, 'Kim ', PASSWORD, true);
    await page.waitForSelector('#app:not([hidden])');
    await page.waitForSelector('#live:has-text("live")');
    await page.waitForSelector('[data-zone="kitchen"] .count:has-text("1")');
    await page.click('#menu');
    const offered = await page.$$eval('#nav a', (links) =>
      links.filter((link) => (link as unknown as { offsetParent: unknown }).offsetParent !== null).map((link) => link.textContent),
    );
    assert.deepEqual(offered, ['Overview', 'People', 'Nodes', 'Devices']);
    // A bookmark to an admin page opens the overview instead.
    await page.goto(base + '/#/tokens');
    await page.waitForSelector('#view-overview:not([hidden])');
    assert.equal(await page.isHidden('#view-tokens'), true);
    // And the address says so (new user's walkthrough: it kept #/tokens).
    assert.match(new URL(page.url()).hash, /^#\/overview$/);
    await page.goto(base + '/#/users');
    await page.waitForSelector('#sessions tbody tr[data-session].selected:has-text("this device")');
    assert.equal(await page.isHidden('#users-card'), true, 'no user management for a household');
    assert.match((await page.textContent('#sessions tbody tr.selected'))!, /remembered/);
    await shot(page, 'phone-devices');
    const cookies = await page.context().cookies();
    const session = cookies.find((cookie) => cookie.name === 'mothership_session')!;
    assert.ok(session.expires * 1000 - Date.now() > 29 * 24 * 3600_000, 'the cookie lasts 30 days');
  });

  it('the admin token still signs in, pasted with spaces around it, and an admin manages users on the Users page', async () => {
    const page = await open(DESKTOP, 'light');
    await page.click('#signin-mode');
    await shot(page, 'signin-token');
    await page.fill('#signin-form [name=token]', `  ${ADMIN_TOKEN} `);
    await page.click('#signin-form button[type=submit]');
    await page.waitForSelector('#app:not([hidden])');
    await page.goto(base + '/#/users');
    await page.waitForSelector('#users tbody tr[data-user="kim"]');
    await page.fill('#user-form [name=username]', 'kim');
    await page.fill('#user-form [name=password]', PASSWORD);
    await page.click('#user-form button[type=submit]');
    await page.waitForSelector('#user-form [data-error-for="/username"]:has-text("taken")');
    await page.fill('#user-form [name=username]', 'Lee');
    await page.fill('#user-form [name=name]', 'Lee');
    await page.fill('#user-form [name=password]', 'short');
    await page.click('#user-form button[type=submit]');
    await page.waitForSelector('#user-form [data-error-for="/password"]:not(:empty)');
    await page.fill('#user-form [name=password]', PASSWORD);
    await page.click('#user-form button[type=submit]');
    await page.waitForSelector('#users tbody tr[data-user="lee"]');
    assert.equal((await app.api('GET', '/api/users/lee')).body.role, 'household');
    // A new password in a dialog: hidden as typed, typed twice, refused in words.
    await page.click('#users tbody tr[data-user="lee"] button:has-text("New password")');
    await page.waitForSelector('#password-dialog[open]');
    assert.equal(await page.getAttribute('#password-form [name=password]', 'type'), 'password');
    await page.fill('#password-form [name=password]', 'a new secret 7');
    await page.fill('#password-form [name=repeat]', 'a new secret 8');
    await page.click('#password-form button[type=submit]');
    await page.waitForSelector('#password-form [data-error-for="/repeat"]:text-is("is not the same as the new password")');
    await shot(page, 'password-dialog');
    await page.fill('#password-form [name=password]', 'short');
    await page.fill('#password-form [name=repeat]', 'short');
    await page.click('#password-form button[type=submit]');
    await page.waitForSelector('#password-form [data-error-for="/password"]:text-is("must be at least 8 characters")');
    await page.fill('#password-form [name=password]', 'a new secret 7');
    await page.fill('#password-form [name=repeat]', 'a new secret 7');
    await page.click('#password-form button[type=submit]');
    await page.waitForSelector('#password-dialog', { state: 'hidden' });
    const signedIn = await app.api('POST', '/api/session', { username: 'lee', password: 'a new secret 7' }, { authorization: '' });
    assert.equal(signedIn.status, 204, 'the new password signs in');
    await app.api('PATCH', '/api/users/lee', { password: PASSWORD });
    await page.waitForSelector('#sessions tbody tr:has-text("Kim")');
    await shot(page, 'users');
    await page.emulateMedia({ colorScheme: 'dark' });
    await shot(page, 'users-dark');
    await page.setViewportSize(PHONE.viewport);
    await shot(page, 'phone-users-dark');
    // The session ends while the dialog is open: the sign-in form that follows takes input (a modal left open made the page inert).
    await page.click('#users tbody tr[data-user="lee"] button:has-text("New password")');
    await page.waitForSelector('#password-dialog[open]');
    await app.api('DELETE', '/api/sessions');
    await page.waitForSelector('#signin-form [name=token]', { timeout: 30_000 });
    await page.click('#signin-form [name=token]', { timeout: 5000 });
    await page.keyboard.type('typed');
    assert.equal(await page.inputValue('#signin-form [name=token]'), 'typed');
  });

  it('a household member is not offered Remove on Nodes (the API refuses it), sees each node named on one line on a phone, and a read refused for the rate limit is read again', async () => {
    const page = await open(PHONE, 'light');
    await signInAs(page, 'kim', PASSWORD);
    await page.waitForSelector('#app:not([hidden])');
    // The first read of the nodes is refused as the rate limit refuses it: the page waits and asks again.
    let reads = 0;
    await page.route('**/api/nodes*', (route) =>
      reads++ === 0
        ? route.fulfill({
            status: 429,
            headers: { 'retry-after': '1', 'content-type': 'application/problem+json' },
            body: JSON.stringify({ type: '/problems/rate_limited', title: 'Too many requests', status: 429, detail: 'Too many requests; retry in 1 s' }),
          })
        : route.continue(),
    );
    await page.goto(base + '/#/nodes');
    const row = '#nodes tbody tr[data-node="node-1"]';
    // Well within the page's own 15 s re-read of the heartbeat times: the retry brings the list.
    await page.waitForSelector(`${row} button:has-text("Rename")`, { timeout: 8000 });
    assert.ok(reads >= 2, `the nodes were read ${reads} times`);
    assert.equal(await page.locator(`${row} button:has-text("Remove")`).count(), 0, 'no Remove for a household member');
    const name = (await page.locator(`${row} td[data-label="Node"] a`).boundingBox())!;
    const id = (await page.locator(`${row} td[data-label="Node"] .hint`).boundingBox())!;
    assert.ok(id.x - (name.x + name.width) < 12 && Math.abs(id.y - name.y) < 8, `the id ${JSON.stringify(id)} is not beside the name ${JSON.stringify(name)}`);
    const admin = await open(DESKTOP, 'light');
    await signInAs(admin, 'sam', PASSWORD);
    await admin.goto(base + '/#/nodes');
    await admin.waitForSelector(`${row} button:has-text("Remove")`);
  });

  it("an admin ends a household member's session from the Users page; the member is back at the sign-in form", async () => {
    const member = await open(PHONE, 'dark');
    await shot(member, 'phone-signin-dark');
    await signInAs(member, 'lee', PASSWORD);
    await member.waitForSelector('#app:not([hidden])');
    const admin = await open(DESKTOP, 'dark');
    await shot(admin, 'signin-dark');
    await signInAs(admin, 'sam', PASSWORD);
    await admin.waitForSelector('#app:not([hidden])');
    await admin.goto(base + '/#/users');
    admin.on('dialog', (dialog) => void dialog.accept());
    await admin.click('#sessions tbody tr:has-text("Lee") button:has-text("End")');
    await admin.waitForSelector('#sessions tbody:not(:has-text("Lee"))');
    await member.goto(base + '/#/nodes');
    await member.waitForSelector('#signin:not([hidden])');
  });

  it('no page errors', () => {
    assert.deepEqual(pageErrors, []);
  });
});
