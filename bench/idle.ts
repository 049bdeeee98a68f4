import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { QUICK, fmt, header } from './lib.js';

/** `mothership` as installed: the bundle of build/bundle.ts. */
const MAIN = fileURLToPath(new URL('../mothership.js', import.meta.url));
/** Linux counts a process's CPU in clock ticks of 1/100 s (`getconf CLK_TCK`). */
const TICKS_PER_SECOND = 100;

/** The process's CPU so far (user + system) in seconds, and its resident memory in MB, from /proc. */
function usage(pid: number): { cpuSeconds: number; rssMb: number } {
  // Fields after the command name, which may hold spaces, start after its closing parenthesis.
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
  return { cpuSeconds: ticks / TICKS_PER_SECOND, rssMb: rssKb / 1024 };
}

/**
 * `mothership serve` as a user starts it (SQLite, the default log level, nothing configured), in a
 * process of its own: the wall and CPU time from the spawn to the line saying it listens, then its
 * CPU and RSS over a stretch with no traffic at all.
 */
export async function benchIdle(): Promise<boolean> {
  const seconds = QUICK ? 2 : 120;
  header(`Idle: mothership serve, SQLite, no traffic for ${seconds} s`);
  const dataDir = mkdtempSync(path.join(tmpdir(), 'mothership-bench-idle-'));
  const started = performance.now();
  const child = spawn(process.execPath, [MAIN, 'serve'], {
    env: { PATH: process.env.PATH ?? '', DATA_DIR: dataDir, PORT: '0', ADMIN_TOKEN: 'bench-admin-token-0123456789' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    await new Promise<void>((resolve, reject) => {
      let output = '';
      child.stdout!.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes(' listening on ')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`mothership serve exited (${code}) before listening: ${output}`)));
    });
    const readyWall = (performance.now() - started) / 1000;
    const ready = usage(child.pid!);
    const idleStarted = performance.now();
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    const idle = usage(child.pid!);
    const idleShare = (idle.cpuSeconds - ready.cpuSeconds) / ((performance.now() - idleStarted) / 1000);
    const startMet = readyWall <= 1 && ready.cpuSeconds <= 1;
    const idleMet = idleShare <= 0.002 && idle.rssMb <= 80;
    console.log(`start to ready: ${readyWall.toFixed(2)} s wall, ${ready.cpuSeconds.toFixed(2)} s CPU (target <= 1 s each) ${startMet ? 'MET' : 'NOT MET'}`);
    console.log(
      `idle: ${(idleShare * 100).toFixed(2)} % of a core, RSS ${fmt(idle.rssMb)} MB (${fmt(ready.rssMb)} MB when ready) (target <= 0.2 %, <= 80 MB) ${idleMet ? 'MET' : 'NOT MET'}`,
    );
    return startMet && idleMet;
  } finally {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    }
    rmSync(dataDir, { recursive: true, force: true });
  }
}
