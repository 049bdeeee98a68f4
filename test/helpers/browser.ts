import { chromium, type Browser, type Page } from 'playwright-core';

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Debian's Chromium, headless: the browser every dashboard test drives. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
}

/** Opens the dashboard at `base` and signs in with the admin token; resolves once the app shows. */
export async function signInWithToken(page: Page, base: string, token: string): Promise<void> {
  await page.goto(base + '/');
  // The form opens in the mode last signed in with (kept in localStorage).
  await page.waitForSelector('#signin-form:visible');
  if (!(await page.isVisible('#signin-form [name=token]'))) await page.click('#signin-mode');
  await page.fill('#signin-form [name=token]', token);
  await page.click('#signin-form button[type=submit]');
  await page.waitForSelector('#app:not([hidden])');
}
