import { spawn, type ChildProcess } from 'node:child_process';
import { ADMIN_TOKEN } from './app.js';

/** The `mothership` command as installed: the bundle `npm run build` makes (build/bundle.ts). */
export const MAIN = new URL('../../mothership.js', import.meta.url).pathname;

/** Starts `mothership <args>` as a real child process with the given environment. */
/** `nodeOptions`: flags for Node itself (`--cpu-prof`, which NODE_OPTIONS may not carry). */
export function spawnMothership(args: string[], env: Record<string, string>, nodeOptions: string[] = []): ChildProcess & { output: () => string } {
  const child = spawn(process.execPath, [...nodeOptions, MAIN, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  return Object.assign(child, { output: () => output });
}

export async function stopProcess(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill(signal);
  await exited;
}

/**
 * How long a spawned service may take to start: 2-3 s of CPU, which took over 15 s of wall time on a
 * busy 2-core machine (load 13). A bound for a hang, not a measurement.
 */
export const START_TIMEOUT_MS = 60_000;

/** Starts `mothership serve` on a free port and waits until it answers. */
export async function startService(env: Record<string, string>, port: number) {
  const child = spawnMothership(['serve'], { ...env, PORT: String(port) });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    const ok = await fetch(`${base}/healthz`).then(
      (response) => response.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline || child.exitCode !== null) {
      // An orphan would stay listening against a database the test drops.
      await stopProcess(child, 'SIGKILL');
      throw new Error(`service did not start: ${child.output()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { child, base };
}

/** Headers of an admin's JSON request to a running service. */
export const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };
export const post = (base: string, path: string, body: unknown) => fetch(base + path, { method: 'POST', headers: admin, body: JSON.stringify(body) });

export type LoggedEvent = { seq: number; event_type: string; person: string | null; detail: Record<string, unknown>; timestamp: string };

/** Every event in the service's log, in order (`type`: only those). */
export async function allEvents(base: string, type?: string): Promise<LoggedEvent[]> {
  const events = [];
  for (let after = 0; ;) {
    const page = (await (await fetch(`${base}/api/events?after=${after}&limit=1000${type ? `&type=${type}` : ''}`, { headers: admin })).json()) as {
      events: LoggedEvent[];
      last_seq: number;
    };
    events.push(...page.events);
    if (page.events.length < 1000) return events;
    after = page.last_seq;
  }
}
