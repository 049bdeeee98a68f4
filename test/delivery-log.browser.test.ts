// The webhook card and its delivery log in Chromium: a redelivery's outcome shows without another
// event to refresh the page, and the "switched off" time reads like the page's other times.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { signedInPage } from './helpers/browser.js';
import { ADMIN_TOKEN, eventually, startTestApp, type TestApp } from './helpers/app.js';
import { startReceiver } from './helpers/receiver.js';

const ARTIFACTS = new URL('../../test-artifacts/', import.meta.url).pathname;

describe('the webhook delivery log in Chromium', () => {
  let app: TestApp;
  let browser: Browser;
  let page: Page;
  let base: string;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  const pageErrors: string[] = [];

  /** The log's rows of one event type, newest first, once none is waiting or in flight. */
  const settled = (eventType: string) =>
    eventually(
      async () => {
        const rows = (await app.api('GET', `/api/webhook/deliveries?event_type=${eventType}`)).body as { state: string; attempt: number }[];
        return rows.length && rows.every((row) => row.state !== 'pending' && row.state !== 'sending') ? rows : null;
      },
      10_000,
      `settled ${eventType} deliveries`,
    );

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    receiver = await startReceiver(500);
    app = await startTestApp('sqlite', { WEBHOOK_RETRY_DELAY_MS: '300', WEBHOOK_TIMEOUT_MS: '5000' }, { start: true });
    base = await app.http.listen({ port: 0, host: '127.0.0.1' });
    await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: receiver.url, event_types: ['anomaly.detected', 'zone.created'] } });
    ({ browser, page } = await signedInPage(base, ADMIN_TOKEN, pageErrors));
  });
  after(async () => {
    await browser?.close();
    await app?.cleanup();
    await receiver?.close();
  });

  it('shows a redelivery delivered once it is, though no event follows it, and the badge with it', async () => {
    await page.goto(`${base}/#/integrations`);
    await page.waitForSelector('#deliveries tbody tr');
    await app.api('POST', '/api/events', { type: 'anomaly.detected', detail: { what: 'failed twice' } });
    assert.deepEqual(
      (await settled('anomaly.detected')).map((row) => [row.attempt, row.state]),
      [
        [2, 'failed'],
        [1, 'retried'],
      ],
    );
    // The receiver is back, and takes a moment to answer: the page reads the log while the redelivery is in flight.
    receiver.answerWith((response) => setTimeout(() => response.writeHead(200).end('ok'), 1000));
    // Read afresh, the page starts from the failure.
    await page.reload();
    await page.waitForSelector('#deliveries tbody tr:first-child[data-state="failed"]');
    await page.waitForSelector('#webhook-status.bad');
    await page.click('#redeliver-failed');
    await page.waitForSelector('#redeliver-failed:has-text("Redelivering 1")');
    await page.waitForSelector('#deliveries tbody tr:first-child:is([data-state="pending"], [data-state="sending"])');
    // From here no event is posted: only the page's own re-reading can show the outcome.
    const [redelivery] = await settled('anomaly.detected');
    assert.equal(redelivery!.state, 'delivered');
    await page.waitForSelector('#deliveries tbody tr:first-child[data-state="delivered"]:has-text("anomaly.detected")', { timeout: 10_000 });
    assert.doesNotMatch((await page.textContent('#deliveries tbody tr:first-child'))!, /sending/);
    await page.waitForSelector('#webhook-status.ok:has-text("last: 200")', { timeout: 10_000 });
    await page.screenshot({ path: `${ARTIFACTS}delivery-log-redelivered.png`, fullPage: true });
  });

  it('says when a 410 Gone switched the webhook off in local time, as the rest of the page does', async () => {
    await page.goto(`${base}/#/integrations`);
    receiver.answerWith(410);
    await app.api('POST', '/api/zones', { name: 'Attic' });
    const reason = await eventually(
      async () => (await app.api('GET', '/api/settings/integration')).body.webhook.status.disabled_reason,
      5000,
      'the switch-off',
    );
    const at = /at (\d{4}-\d\d-\d\dT[\d:.]+Z)/.exec(reason)![1]!;
    await page.reload();
    await page.waitForSelector('#webhook-disabled-reason:not([hidden])');
    const shown = (await page.textContent('#webhook-disabled-reason'))!;
    const local = (await page.evaluate(`new Date(${JSON.stringify(at)}).toLocaleString()`)) as string;
    assert.ok(shown.includes(local), `"${shown}" says ${local}`);
    assert.doesNotMatch(shown, /\d{4}-\d\d-\d\dT/);
    assert.match(shown, /410 Gone/);
  });

  it('raised no script error', () => {
    assert.deepEqual(pageErrors, []);
  });
});
