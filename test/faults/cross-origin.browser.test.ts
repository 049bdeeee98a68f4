import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, BrowserContext } from 'playwright-core';
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../helpers/app.js';
import { launchChromium, signInWithToken } from '../helpers/browser.js';

/**
 * An attacker's page in a real browser, signed in to the dashboard in another tab: a page on another
 * port of the same host (same site, so SameSite=Strict sends the cookie), and one framing the
 * dashboard. Neither may change anything.
 */
describe('cross-origin pages in Chromium', () => {
  let app: TestApp;
  let browser: Browser;
  let context: BrowserContext;
  let base: string;
  let attacker: http.Server;
  let attackerBase: string;

  const attackPage = (target: string) => `<!doctype html><html><body>
<form id="f" method="POST" action="${target}/api/settings/integration/webhook-secret"></form>
<iframe id="frame" src="${target}/"></iframe>
<script>
  window.results = [];
  const attempts = [
    ['POST', '/api/bots', '{"name":"csrf-bot"}', 'text/plain'],
    ['POST', '/api/bots', '{"name":"csrf-bot-2"}', 'application/json'],
    ['POST', '/api/settings/integration/webhook-secret', undefined, undefined],
    ['DELETE', '/api/persons/ada', undefined, undefined],
  ];
  Promise.all(attempts.map(([method, path, body, type]) =>
    fetch('${target}' + path, { method, mode: 'no-cors', credentials: 'include', body, headers: type ? { 'content-type': type } : {} })
      .then(() => window.results.push(path), (error) => window.results.push(path + ' ' + error.message))))
    .then(() => { window.done = true; });
</script></body></html>`;

  before(async () => {
    app = await startTestApp('sqlite');
    base = await app.http.listen({ port: 0, host: '127.0.0.1' });
    await app.api('POST', '/api/persons', { id: 'ada', name: 'Ada' });
    attacker = http.createServer((_request, response) => response.writeHead(200, { 'content-type': 'text/html' }).end(attackPage(base)));
    await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
    attackerBase = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}`;
    browser = await launchChromium();
    context = await browser.newContext();
  });
  after(async () => {
    await browser?.close();
    await app?.cleanup();
    attacker?.close();
  });

  it('a page on another port cannot use the signed-in session, and cannot frame the dashboard', async () => {
    const dashboard = await context.newPage();
    await signInWithToken(dashboard, base, ADMIN_TOKEN);
    const secretBefore = (await app.api('GET', '/api/settings/integration')).body.webhook.secret_set;

    const evil = await context.newPage();
    await evil.goto(attackerBase + '/');
    await evil.waitForFunction('window.done === true', undefined, { timeout: 10_000 });
    // The classic form POST navigates the tab: it must land on a refusal, not a secret.
    await Promise.all([evil.waitForNavigation(), evil.evaluate('document.getElementById("f").submit()')]);
    const formAnswer = await evil.textContent('body');
    assert.match(formAnswer ?? '', /forbidden/, 'the form POST was refused');
    assert.doesNotMatch(formAnswer ?? '', /whsec_/);

    const bots = await app.api('GET', '/api/bots');
    assert.equal(JSON.stringify(bots.body).includes('csrf-bot'), false, 'no bot was created');
    assert.equal((await app.api('GET', '/api/persons/ada')).status, 200, 'the person was not deleted');
    assert.equal((await app.api('GET', '/api/settings/integration')).body.webhook.secret_set, secretBefore, 'no webhook secret was generated');

    // The dashboard refuses to be framed (frame-ancestors 'none'): the iframe shows nothing of it.
    await evil.goto(attackerBase + '/');
    const frame = evil.frames().find((candidate) => candidate.url().startsWith(base));
    const framedText = frame ? await frame.evaluate<string>('document.body ? document.body.innerText : ""').catch(() => '') : '';
    assert.doesNotMatch(framedText, /Mothership|Sign in/i, 'the dashboard rendered inside a foreign page');

    // The signed-in tab itself still works: the refusals did not break the real session.
    assert.equal(await dashboard.evaluate<number>('fetch("/api/persons").then((response) => response.status)'), 200);
  });

  it('the API documentation page renders under its CSP', async () => {
    const page = await context.newPage();
    const violations: string[] = [];
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) violations.push(message.text());
    });
    await page.goto(base + '/docs/');
    // Swagger UI's bundle is a megabyte of script: on a busy 2-core machine it took over 10 s to draw.
    await page.waitForSelector('.swagger-ui .information-container', { timeout: 60_000 });
    assert.deepEqual(violations, []);
  });
});
