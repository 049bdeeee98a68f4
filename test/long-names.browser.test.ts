// A household's long room and person names on a phone and a desktop, light and
// dark: nothing runs out of its card or widens the page, and a name cut short is whole in its title.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { inEveryLook, signedInPage, widerThanWindow, type ScreenSize } from './helpers/browser.js';
import { ADMIN_TOKEN, startTestApp, type TestApp } from './helpers/app.js';

const ARTIFACTS = new URL('../../test-artifacts/', import.meta.url).pathname;
const ROOM = 'Upstairs bathroom next to the kids bedroom with the long name';
const SIZES: ScreenSize[] = [
  ['desktop', 1440, 900],
  ['phone', 390, 844],
];

/**
 * What of the page lies outside the card it is drawn in (more than half a pixel), as `tag.class
 * "text" (left..right of left..right)`. Content of a box that clips or scrolls (an ellipsis, the
 * events list) is judged by that box. (A script in the page's own language: the test project has no DOM types.)
 */
const OUTSIDE_ITS_CARD = `(() => {
  const outside = [];
  for (const card of document.querySelectorAll('.view:not([hidden]) .card')) {
    const box = card.getBoundingClientRect();
    if (box.width === 0) continue;
    for (const element of card.querySelectorAll('*')) {
      let clipped = false;
      for (let parent = element.parentElement; parent && parent !== card; parent = parent.parentElement)
        if (getComputedStyle(parent).overflowX !== 'visible') clipped = true;
      const own = element.getBoundingClientRect();
      if (clipped || own.width === 0) continue;
      if (own.left < box.left - 0.5 || own.right > box.right + 0.5)
        outside.push(element.tagName.toLowerCase() + '.' + element.className + ' "' + element.textContent.trim().slice(0, 30) + '" (' + Math.round(own.left) + '..' + Math.round(own.right) + ' of ' + Math.round(box.left) + '..' + Math.round(box.right) + ')');
    }
  }
  return outside;
})()`;

describe('long names in Chromium', () => {
  let app: TestApp;
  let browser: Browser;
  let page: Page;
  let base: string;
  let zone: string;
  const pageErrors: string[] = [];

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    app = await startTestApp('sqlite', {}, { start: true });
    base = await app.http.listen({ port: 0, host: '127.0.0.1' });
    zone = (await app.api('POST', '/api/zones', { name: ROOM })).body.id;
    for (const name of ['Ada', 'Bob', 'Cleo', 'Maria Magdalena Konstantina von Hohenzollern-Sigmaringen']) {
      const person = (await app.api('POST', '/api/persons', { name })).body.id;
      await app.api('POST', '/api/events', { type: 'zone.entry', person, zone });
    }
    ({ browser, page } = await signedInPage(base, ADMIN_TOKEN, pageErrors));
  });
  after(async () => {
    await browser?.close();
    await app?.cleanup();
  });

  for (const [name, hash, ready] of [
    ['overview', () => '#/overview', '#persons li[data-person="ada"] .badge.ok'],
    ['zone', () => `#/zones/${zone}`, '#record h2'],
    ['person', () => '#/people/ada', '#record .facts .badge.ok'],
    ['people', () => '#/people', '#people-list li[data-person="ada"] .badge.ok'],
  ] as const) {
    it(`the ${name} page with a room of ${ROOM.length} characters fits a phone and a desktop, light and dark`, async () => {
      await page.goto(`${base}/${hash()}`);
      await inEveryLook(page, SIZES, async (device, scheme) => {
        await page.waitForSelector(ready);
        const wider = await widerThanWindow(page);
        assert.ok(wider <= 0, `${name} on a ${device} (${scheme}) is ${wider}px wider than the screen`);
        assert.deepEqual(await page.evaluate(OUTSIDE_ITS_CARD), [], `${name} on a ${device} (${scheme})`);
        await page.screenshot({ path: `${ARTIFACTS}long-names-${name}-${device}-${scheme}.png`, fullPage: true });
      });
      // Cut short or not, the room's whole name is there to read.
      for (const badge of await page.locator('.view:not([hidden]) .badge.ok').all()) assert.equal(await badge.getAttribute('title'), `Home, in ${ROOM}`);
    });
  }

  it('raised no script error', () => {
    assert.deepEqual(pageErrors, []);
  });
});
