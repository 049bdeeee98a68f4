import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort, waitForOwnListener, waitForPort } from './broker.js';

/** A private redis-server the test can stop and start. */
export async function startRedis() {
  const port = await freePort();
  let child: ChildProcess | null = null;
  const redis = {
    url: `redis://127.0.0.1:${port}/0`,
    async start() {
      child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
      await waitForOwnListener(child, port);
    },
    async stop() {
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGCONT');
      const exited = new Promise((resolve) => child!.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    },
    /** SIGSTOP: connected, but it answers nothing (a hung host, packets dropped); `thaw` sends SIGCONT. */
    freeze() {
      child?.kill('SIGSTOP');
    },
    thaw() {
      child?.kill('SIGCONT');
    },
  };
  await redis.start();
  return redis;
}

const PG_BIN = (() => {
  try {
    return execFileSync('sh', ['-c', 'ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1']).toString().trim();
  } catch {
    return '/usr/lib/postgresql/15/bin';
  }
})();

/**
 * A private PostgreSQL cluster (run as the postgres user) the test can stop and restart; `settings`:
 * more `-c` settings. `standbyOf`: a hot standby streaming from that cluster (its base backup),
 * through a new physical replication slot when `slot` names one.
 */
export async function startPostgres(settings: string[] = [], standbyOf?: { port: number; slot?: string }) {
  const dir = mkdtempSync(path.join(tmpdir(), 'mothership-pg-'));
  chmodSync(dir, 0o777);
  const data = path.join(dir, 'data');
  const port = await freePort();
  const asPostgres = (command: string) => execFileSync('su', ['postgres', '-s', '/bin/sh', '-c', command], { stdio: 'pipe' });
  const pgctl = (action: string) =>
    asPostgres(
      `${PG_BIN}/pg_ctl -D ${data} -o "-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off${settings.map((setting) => ` -c ${setting}`).join('')}" -l ${dir}/log -w ${action} >/dev/null`,
    );
  try {
    // `-c fast`: the primary's checkpoint at once, not spread over minutes.
    if (standbyOf)
      asPostgres(
        `${PG_BIN}/pg_basebackup -h 127.0.0.1 -p ${standbyOf.port} -U postgres -D ${data} -R -X stream -c fast${standbyOf.slot ? ` -C -S ${standbyOf.slot}` : ''}`,
      );
    else asPostgres(`${PG_BIN}/initdb -D ${data} -A trust -U postgres >/dev/null`);
    pgctl('start');
  } catch (error) {
    // Nothing left behind: a failed start's directory, or a server that came up partly.
    try {
      pgctl('-m immediate stop');
    } catch {
      // not running
    }
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  await waitForPort(port, true);
  // The server's process id is the first line of postmaster.pid; its backends are its children.
  const signalCluster = (signal: NodeJS.Signals) => {
    const server = Number(readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const children = execFileSync('ps', ['-o', 'pid=', '--ppid', String(server)])
      .toString()
      .split('\n')
      .map(Number)
      .filter(Boolean);
    process.kill(server, signal);
    for (const pid of children) {
      try {
        process.kill(pid, signal);
      } catch (error) {
        // A backend that ended between `ps` and now (a session that closed, an autovacuum worker).
        if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
      }
    }
  };
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    async stop() {
      pgctl('-m fast stop');
      await waitForPort(port, false);
    },
    /** SIGSTOP to the server and each of its processes (a frozen host, a hung VM); `thaw` sends SIGCONT. */
    freeze() {
      signalCluster('SIGSTOP');
    },
    thaw() {
      signalCluster('SIGCONT');
    },
    async restart() {
      await this.stop();
      pgctl('start');
      await waitForPort(port, true);
    },
    async destroy() {
      try {
        pgctl('-m immediate stop');
      } catch {
        // already stopped
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
