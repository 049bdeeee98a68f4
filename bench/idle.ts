import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { QUICK, fmt, header } from './lib.js';

/** `mothership` as installed: the bundle of build/bundle.ts. */
const MAIN = fileURLToPath(new URL('../mothership.js', import.meta.url));
/** Linux counts a process's CPU in clock ticks of 1/100 s (`getconf CLK_TCK`). */
const TICKS_PER_SECOND = 100;

/** The process's CPU so far (user + system) in seconds, and its resident memory in MB, from /proc. */
function usage(pid: number): { cpuSeconds: number; rssMb: number } & ReturnType<typeof threads> {
  // Fields after the command name, which may hold spaces, start after its closing parenthesis.
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
  return { cpuSeconds: ticks / TICKS_PER_SECOND, rssMb: rssKb / 1024, ...threads(pid) };
}

/**
 * Over the process's threads so far, from schedstat: how many times they were put on a CPU, and
 * their time on it in seconds (nanoseconds counted, where /proc/<pid>/stat counts 10 ms ticks).
 */
function threads(pid: number): { wakeUps: number; onCpuSeconds: number } {
  let wakeUps = 0;
  let onCpuNs = 0;
  for (const thread of readdirSync(`/proc/${pid}/task`)) {
    try {
      const [onCpu, , slices] = readFileSync(`/proc/${pid}/task/${thread}/schedstat`, 'utf8').split(' ');
      onCpuNs += Number(onCpu);
      wakeUps += Number(slices);
    } catch {
      // A thread that ended meanwhile.
    }
  }
  return { wakeUps, onCpuSeconds: onCpuNs / 1e9 };
}

/** Starts `args` under this Node (added to `started` at once) and resolves once its stdout has printed `ready`. */
async function spawnUntil(args: string[], env: NodeJS.ProcessEnv, ready: string, started: ChildProcess[]): Promise<ChildProcess> {
  const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'inherit'] });
  started.push(child);
  await new Promise<void>((resolve, reject) => {
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes(ready)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited (${code}) before ${ready}: ${output}`)));
  });
  return child;
}

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

/** Signals that end this process (Ctrl-C, a terminal closing, a `kill`); a SIGKILL cannot be caught. */
const ENDING_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * The same-run reference: a bare Node process that wakes once a second and does nothing, the least
 * any process with a once-a-second poll costs. What a wake-up costs depends on the machine (on one VM
 * it varied tenfold within a session: bench/README.md, 2026-11-27), so the service's figure is read beside it.
 */
const REFERENCE = ['-e', "setInterval(() => {}, 1000); console.log('ready');"];

/**
 * `mothership serve` as a user starts it (SQLite, the default log level, nothing configured), in a
 * process of its own: the wall and CPU time from the spawn to the line saying it listens, then its
 * CPU and RSS over a stretch with no traffic at all.
 */
export async function benchIdle(): Promise<boolean> {
  const seconds = QUICK ? 2 : 120;
  header(`Idle: mothership serve, SQLite, no traffic for ${seconds} s`);
  const dataDir = mkdtempSync(path.join(tmpdir(), 'mothership-bench-idle-'));
  const children: ChildProcess[] = [];
  // The processes started here end with this one, which then ends as the signal would have ended it.
  const endNow = (signal: NodeJS.Signals) => {
    for (const each of children) each.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
    process.kill(process.pid, signal);
  };
  for (const signal of ENDING_SIGNALS) process.once(signal, endNow);
  try {
    const started = performance.now();
    const child = await spawnUntil(
      [MAIN, 'serve'],
      { PATH: process.env.PATH ?? '', DATA_DIR: dataDir, PORT: '0', ADMIN_TOKEN: 'bench-admin-token-0123456789' },
      ' listening on ',
      children,
    );
    const readyWall = (performance.now() - started) / 1000;
    const reference = await spawnUntil(REFERENCE, { PATH: process.env.PATH ?? '' }, 'ready', children);
    const ready = usage(child.pid!);
    const referenceReady = usage(reference.pid!);
    const idleStarted = performance.now();
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    await sleep((seconds * 1000) / 2);
    const halfway = usage(child.pid!);
    const secondHalfStarted = performance.now();
    await sleep((seconds * 1000) / 2);
    const idleSeconds = (performance.now() - idleStarted) / 1000;
    const idle = usage(child.pid!);
    const secondHalfSeconds = (performance.now() - secondHalfStarted) / 1000;
    const referenceIdle = usage(reference.pid!);
    const idleShare = (idle.cpuSeconds - ready.cpuSeconds) / idleSeconds;
    const referenceShare = (referenceIdle.cpuSeconds - referenceReady.cpuSeconds) / idleSeconds;
    const startMet = readyWall <= 1 && ready.cpuSeconds <= 1;
    const idleMet = idleShare <= 0.002 && idle.rssMb <= 80;
    const perSecond = (from: number, to: number) => ((to - from) / idleSeconds).toFixed(1);
    console.log(`start to ready: ${readyWall.toFixed(2)} s wall, ${ready.cpuSeconds.toFixed(2)} s CPU (target <= 1 s each) ${startMet ? 'MET' : 'NOT MET'}`);
    console.log(
      `idle: ${(idleShare * 100).toFixed(2)} % of a core, RSS ${fmt(idle.rssMb)} MB (${fmt(ready.rssMb)} MB when ready), ${perSecond(ready.wakeUps, idle.wakeUps)} wake-ups a second (target <= 0.2 %, <= 80 MB) ${idleMet ? 'MET' : 'NOT MET'}`,
    );
    // After start-up's afterglow (V8 collecting and giving back what start-up allocated: bench/README.md, sixteenth session).
    console.log(
      `of which the second half: ${(((idle.onCpuSeconds - halfway.onCpuSeconds) / secondHalfSeconds) * 100).toFixed(2)} % of a core, ${((idle.wakeUps - halfway.wakeUps) / secondHalfSeconds).toFixed(1)} wake-ups a second`,
    );
    console.log(
      `reference, a bare node waking once a second: ${(referenceShare * 100).toFixed(2)} % of a core, RSS ${fmt(referenceIdle.rssMb)} MB, ${perSecond(referenceReady.wakeUps, referenceIdle.wakeUps)} wake-ups a second`,
    );
    return startMet && idleMet;
  } finally {
    await Promise.all(children.map(kill));
    rmSync(dataDir, { recursive: true, force: true });
    // Only now: a signal until here still ends what was started.
    for (const signal of ENDING_SIGNALS) process.off(signal, endNow);
  }
}
