import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { launchChromium, signInWithToken, widerThanWindow } from './helpers/browser.js';
import { ADMIN_TOKEN, startTestApp, type TestApp } from './helpers/app.js';

/** Where the screenshots go: looked at by whoever changes the page (SCREENSHOTS=dir overrides). */
const SHOTS = process.env.SCREENSHOTS ?? '/tmp/h38-ci-';
const METRICS = [
  'subject_geomean',
  'grep_1000_mean_ms',
  'throughput_mb_per_sec',
  'files_per_sec',
  'total_runtime_sec',
  'alpha_geomean',
  'beta_geomean',
  'gamma_geomean',
];
const RUNS = 14;

describe('Baselines page in Chromium: one chart per metric', () => {
  let app: TestApp;
  let browser: Browser;
  let page: Page;
  let base: string;
  const pageErrors: string[] = [];
  const chart = (field: string) => `#baseline-charts [data-metric="${field}"]`;

  before(async () => {
    app = await startTestApp('sqlite');
    base = await app.http.listen({ port: 0, host: '127.0.0.1' });
    // Fourteen runs, enough to crowd a phone's x axis; the subject steps up 20% at the end, the tools stay near 1.6-2.4 s.
    for (let run = 0; run < RUNS; run++) {
      // Full shas, as `baseline push` sends them in GitHub Actions: the longest word a tooltip shows.
      const sha = (0xa00000 + run * 0x1111).toString(16).padStart(7, '0').padEnd(40, '0');
      const wobble = (run % 3) * 0.005;
      await app.api('POST', '/api/baselines', {
        commit_sha: sha,
        // Every other run carries its commit page; the rest have none and link nowhere.
        ...(run % 2 === 0 ? { commit_url: `https://git.example/org/bench/commit/${sha}` } : {}),
        timestamp: new Date(Date.UTC(2026, 10, 1 + run)).toISOString(),
        subject_geomean: run === RUNS - 1 ? 0.6 : 0.5 + wobble,
        alpha_geomean: 1.6 + wobble,
        beta_geomean: 1.1 - wobble,
        gamma_geomean: 2.4 + wobble,
        grep_1000_mean_ms: 40 - run * 0.2,
        throughput_mb_per_sec: 400 + run,
        files_per_sec: 2500 + run * 10,
        // Near zero and noisy: its noise band reaches below zero.
        total_runtime_sec: run % 2 ? 0.2 : 3,
      });
    }
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 390, height: 844 } });
    page.on('pageerror', (error) => pageErrors.push(error.message));
    await signInWithToken(page, base, ADMIN_TOKEN);
  });
  after(async () => {
    await browser?.close();
    await app?.cleanup();
  });

  const open = async () => {
    await page.goto(`${base}/#/baselines`);
    await page.reload();
    await page.waitForSelector(`${chart('gamma_geomean')} svg[data-points="${RUNS}"]`);
  };

  it('draws every metric on its own y axis, so a 20% step of the subject is not flattened by the tools', async () => {
    await open();
    assert.deepEqual(await page.$$eval('#baseline-charts [data-metric]', (figures) => figures.map((figure) => figure.getAttribute('data-metric'))), METRICS);
    const range = async (field: string) =>
      page.$eval(`${chart(field)} svg`, (svg) => [Number(svg.getAttribute('data-y-min')), Number(svg.getAttribute('data-y-max'))]);
    const [subjectMin, subjectMax] = await range('subject_geomean');
    const [gammaMin] = await range('gamma_geomean');
    assert.ok(subjectMax < 1 && gammaMin > 1, `subject ${subjectMin}-${subjectMax}, gamma from ${gammaMin}`);
    // The step from 0.5 to 0.6 s spans at least a third of the subject's axis.
    assert.ok((0.6 - 0.5) / (subjectMax - subjectMin) >= 1 / 3, `${subjectMin}-${subjectMax}`);
    assert.ok(await page.$(`${chart('subject_geomean')} circle[data-regression]`), 'the step is a regression against the history');
    // A band reaching below zero does not take the axis of a figure that cannot be negative there (outside review).
    const [runtimeMin] = await range('total_runtime_sec');
    assert.equal(runtimeMin, 0);
  });

  it('gives every point of every series a tooltip, by pointer and by keyboard, and links it to its commit when the run has one', async () => {
    for (const field of METRICS) {
      const points = await page.$$eval(`${chart(field)} circle[data-point]`, (dots) =>
        dots.map((dot) => {
          const target = dot.closest('[data-tip]');
          return {
            tip: target?.getAttribute('data-tip') ?? '',
            href: target?.getAttribute('href') ?? null,
            focusable: target?.tagName === 'a' || target?.getAttribute('tabindex') === '0',
          };
        }),
      );
      assert.equal(points.length, RUNS, field);
      for (const [index, point] of points.entries()) {
        assert.match(point.tip, new RegExp(`\\n${field}: [\\d.]+ `), `${field} point ${index}`);
        assert.ok(point.focusable, `${field} point ${index} is reachable by keyboard`);
        assert.equal(point.href !== null, index % 2 === 0, `${field} point ${index}: a link exactly when the run has a commit_url`);
        if (point.href) assert.match(point.href, /^https:\/\/git\.example\/org\/bench\/commit\/[0-9a-f]{40}$/);
      }
    }
    // A comparison tool's point, focused from the keyboard, shows its tip.
    await page.focus(`${chart('beta_geomean')} a[data-tip] >> nth=0`);
    assert.match((await page.textContent(`${chart('beta_geomean')} .chart-tip:not([hidden])`))!, /\nbeta_geomean: 1\.1 s\nOpen: the commit$/);
    await page.hover(`${chart('gamma_geomean')} circle[data-point] >> nth=1`);
    assert.match((await page.textContent(`${chart('gamma_geomean')} .chart-tip:not([hidden])`))!, /\ngamma_geomean: 2\.405 s$/);
    // On a phone, every point's tip stays inside its chart (outside review: the right half's were cut off at the left edge).
    for (let index = 0; index < RUNS; index++) {
      await page.hover(`${chart('subject_geomean')} circle[data-point] >> nth=${index}`);
      const [tip, box] = await page.$eval(`${chart('subject_geomean')}`, (figure) =>
        [figure.querySelector('.chart-tip:not([hidden])')!, figure].map((element) => {
          const rect = element.getBoundingClientRect();
          return { left: rect.left, right: rect.right, overflow: element.scrollWidth - element.clientWidth };
        }),
      );
      assert.ok(tip!.left >= box!.left && tip!.right <= box!.right, `point ${index}: tip ${JSON.stringify(tip)} in ${JSON.stringify(box)}`);
      assert.ok(tip!.overflow <= 0, `point ${index}: the tip's text (a full sha) stays in its box: ${tip!.overflow}px over`);
    }
  });

  for (const [name, width, height] of [
    ['phone', 390, 844],
    ['desktop', 1280, 800],
  ] as const) {
    it(`keeps the x labels apart and the charts inside a ${name}'s width (${width}x${height}), light and dark`, async () => {
      await page.setViewportSize({ width, height });
      for (const scheme of ['light', 'dark'] as const) {
        await page.emulateMedia({ colorScheme: scheme });
        await open();
        for (const field of METRICS) {
          const boxes = await page.$$eval(`${chart(field)} .x-tick`, (labels) =>
            labels.map((label) => {
              const box = label.getBoundingClientRect();
              return { left: box.left, right: box.right, text: label.textContent };
            }),
          );
          assert.ok(boxes.length >= 2, `${field}: at least the first and the last run are labelled`);
          for (let index = 1; index < boxes.length; index++)
            assert.ok(boxes[index]!.left >= boxes[index - 1]!.right + 4, `${field} at ${width}px: ${JSON.stringify(boxes)}`);
          assert.ok(boxes.at(-1)!.right <= width, `${field}: the last label is on the screen`);
        }
        assert.ok((await widerThanWindow(page)) <= 0, 'no sideways scrolling');
        await page.screenshot({ path: `${SHOTS}${name}-${scheme}.png`, fullPage: true });
        await page.screenshot({ path: `${SHOTS}${name}-${scheme}-top.png` });
      }
      await page.emulateMedia({ colorScheme: 'light' });
    });
  }

  it('raised no script error', () => {
    assert.deepEqual(pageErrors, []);
  });
});
