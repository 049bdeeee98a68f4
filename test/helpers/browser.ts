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

/** The message of the page's next dialog (confirm, prompt), which is then dismissed; fails after 5 s without one. */
export async function dismissNextDialog(page: Page): Promise<string> {
  const dialog = await page.waitForEvent('dialog', { timeout: 5000 });
  await dialog.dismiss();
  return dialog.message();
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

/** A desktop-sized page of a new Chromium, signed in at `base` with `token`; the page's uncaught errors go into `errors`. */
export async function signedInPage(base: string, token: string, errors: string[]): Promise<{ browser: Browser; page: Page }> {
  const browser = await launchChromium();
  const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  page.on('pageerror', (error) => errors.push(error.message));
  await signInWithToken(page, base, token);
  return { browser, page };
}

/** A screen size a dashboard test looks at the page in: its name, width and height. */
export type ScreenSize = readonly [device: string, width: number, height: number];

/**
 * Runs `look` on the page as it shows now, light and dark, at each of `sizes`; leaves it light, at
 * the first size.
 */
export async function inEveryLook(page: Page, sizes: readonly ScreenSize[], look: (device: string, scheme: 'light' | 'dark') => Promise<void>): Promise<void> {
  for (const scheme of ['light', 'dark'] as const) {
    await page.emulateMedia({ colorScheme: scheme });
    for (const [device, width, height] of sizes) {
      await page.setViewportSize({ width, height });
      await look(device, scheme);
    }
  }
  await page.emulateMedia({ colorScheme: 'light' });
  await page.setViewportSize({ width: sizes[0]![1], height: sizes[0]![2] });
}

/** How many pixels the page is wider than the window (0 or less: no sideways scrolling). */
export const widerThanWindow = (page: Page): Promise<number> => page.evaluate('document.documentElement.scrollWidth - window.innerWidth') as Promise<number>;

/**
 * The visible texts of the page whose colour has less contrast with what is behind it than WCAG AA
 * asks (4.5:1; 3:1 for large text), as `text (ratio)`; an empty field's placeholder counts as text
 * (it can say something the page states nowhere else, such as that a secret is saved). The background
 * is the nearest one painted, translucent ones blended over what is under them; disabled controls are
 * exempt, as in WCAG.
 * (A script in the page's own language: the test project has no DOM types.)
 */
export async function lowContrast(page: Page): Promise<string[]> {
  return page.evaluate(`(() => {
    const parse = (color) => {
      const [r = 0, g = 0, b = 0, a = 1] = (color.match(/[\\d.]+/g) ?? []).map(Number);
      return [r, g, b, color.startsWith('rgba') ? a : 1];
    };
    const over = (top, bottom) => [0, 1, 2].map((i) => top[i] * top[3] + bottom[i] * (1 - top[3])).concat(1);
    const background = (element) => {
      if (!element) return [255, 255, 255, 1];
      const own = parse(getComputedStyle(element).backgroundColor);
      return own[3] === 1 ? own : over(own, background(element.parentElement));
    };
    const channel = (c) => (c / 255 <= 0.03928 ? c / 255 / 12.92 : ((c / 255 + 0.055) / 1.055) ** 2.4);
    const luminance = ([r, g, b]) => 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
    const failures = [];
    for (const element of document.querySelectorAll('body *')) {
      const placeholder = element.matches('input:placeholder-shown, textarea:placeholder-shown') && element.placeholder.trim() !== '';
      const text = placeholder
        ? 'placeholder "' + element.placeholder.trim() + '"'
        : [...element.childNodes].filter((node) => node.nodeType === Node.TEXT_NODE).map((node) => node.textContent.trim()).join(' ').trim();
      if (!text || element.closest(':disabled, [hidden], svg')) continue;
      const style = placeholder ? getComputedStyle(element, '::placeholder') : getComputedStyle(element);
      const box = element.getBoundingClientRect();
      if (style.visibility !== 'visible' || box.width === 0 || box.height === 0) continue;
      const back = background(element);
      const fore = over(parse(style.color), back);
      const [light, dark] = [luminance(fore), luminance(back)].sort((a, b) => b - a);
      const ratio = (light + 0.05) / (dark + 0.05);
      const size = parseFloat(style.fontSize);
      const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
      if (ratio < (large ? 3 : 4.5)) failures.push(text.slice(0, 40) + ' (' + ratio.toFixed(2) + ')');
    }
    return failures;
  })()`);
}
