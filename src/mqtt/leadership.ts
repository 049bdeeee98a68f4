import type { FastifyBaseLogger } from 'fastify';
import type pg from 'pg';
import { loadPg } from '../db/index.js';
import { pollEvery, type Poller } from '../ticks.js';
import type { RefusalCounts } from './refusals.js';

/** The advisory lock class of MQTT ownership (the second key is the installation's hash). */
const LOCK_CLASS = 0x4d5154; // "MQT"
const POLL_MS = 2000;
/**
 * PostgreSQL ends the lock's session when it has been idle for this many polls: an owner that is
 * frozen (SIGSTOP, a VM paused) rather than dead keeps its TCP connection, and with it the lock, for
 * as long as it stays frozen. Its successor takes over at most a poll later.
 */
const IDLE_POLLS = 3;
/** The settings row where the owner reports its connection, for the instances standing by. */
const REPORT_KEY = 'mqtt.owner';

/** The installation's MQTT connection as its owner last reported it (refusal counts: absent from earlier releases' reports). */
export interface OwnerReport extends Partial<RefusalCounts> {
  enabled: boolean;
  connected: boolean;
  last_error: string | null;
  last_connected_at: string | null;
  next_reconnect_at: string | null;
  /** Absent from the reports of earlier releases. */
  client_id_conflict?: boolean;
  leader_since: string | null;
}

/**
 * One MQTT owner per installation when several instances share a PostgreSQL database: the owner
 * holds a session advisory lock on a connection of its own. Only the owner connects to the broker
 * (all instances use the same client id, so two would take the connection from each other). The
 * lock goes with the session: when the owner dies or loses the database, PostgreSQL releases it and
 * another instance, polling every POLL_MS, takes over and publishes `online` and a full sync. An
 * owner that can no longer reach its session gives up MQTT at once (it no longer knows it owns it).
 */
export class MqttLeadership {
  private client: pg.Client | null = null;
  private poller: Poller | null = null;
  private onChange: (leader: boolean) => Promise<void> = async () => {};
  private leading: { since: string } | null = null;
  /** On a standby: the owner's last report, read at every poll. */
  private owner: OwnerReport | null = null;
  /** The session's last query: node-postgres deprecates sending one while another runs, so they go one after another. */
  private lastQuery: Promise<unknown> = Promise.resolve();

  private readonly pollMs: number;
  private readonly timeoutMs: number;

  /**
   * `timeoutMs`: the session's connection and query timeout (DATABASE_TIMEOUT_MS), so that an owner
   * whose server stops answering gives MQTT up instead of waiting on its session for good.
   */
  constructor(
    private readonly databaseUrl: string,
    private readonly installation: string,
    private readonly log: FastifyBaseLogger,
    options: { timeoutMs: number; pollMs?: number },
  ) {
    this.pollMs = options.pollMs ?? POLL_MS;
    this.timeoutMs = options.timeoutMs;
  }

  get leader(): boolean {
    return this.leading !== null;
  }

  /** This instance's role; on a standby also the owner's last report (every instance then shows the installation's connection). */
  status(): { role: 'leader' | 'standby'; leader_since: string | null; owner: OwnerReport | null } {
    return { role: this.leading ? 'leader' : 'standby', leader_since: this.leading?.since ?? null, owner: this.leading ? null : this.owner };
  }

  /** The owner reports a change of its connection, through the session that holds the lock (a write of a lost session fails with it). */
  report(status: Omit<OwnerReport, 'leader_since'>): void {
    if (!this.leading || !this.client) return;
    const value = JSON.stringify({ ...status, leader_since: this.leading.since });
    void this.query(
      this.client,
      'insert into settings (key, value, updated_at) values ($1, $2, $3) on conflict (key) do update set value = excluded.value, updated_at = excluded.updated_at',
      [REPORT_KEY, value, new Date().toISOString()],
    ).catch(() => {}); // the next poll finds the session lost
  }

  async start(onChange: (leader: boolean) => Promise<void>): Promise<void> {
    this.onChange = onChange;
    await this.check();
    this.poller = pollEvery(this.pollMs, () => this.check());
  }

  /** Gives ownership up (the caller has stopped MQTT first, so its `offline` precedes the next owner's `online`). */
  async stop(): Promise<void> {
    await this.poller?.stop();
    this.poller = null;
    this.leading = null;
    await this.client?.end().catch(() => {});
    this.client = null;
  }

  private query<Row extends pg.QueryResultRow>(client: pg.Client, text: string, values?: unknown[]): Promise<pg.QueryResult<Row>> {
    const result = this.lastQuery.then(() => client.query<Row>(text, values));
    this.lastQuery = result.catch(() => {});
    return result;
  }

  private async check(): Promise<void> {
    try {
      if (!this.client) {
        const client = new (await loadPg()).Client({
          connectionString: this.databaseUrl,
          connectionTimeoutMillis: this.timeoutMs,
          query_timeout: this.timeoutMs,
        });
        client.on('error', () => {}); // a lost session shows in the next query
        await client.connect();
        // PostgreSQL 14 and later; older servers keep a frozen owner's lock until its connection drops.
        await client.query(`set idle_session_timeout = ${IDLE_POLLS * this.pollMs}`).catch(() => {});
        this.client = client;
      }
      if (this.leading) {
        await this.query(this.client, 'select 1'); // the session, and with it the lock, is still ours
        return;
      }
      const { rows } = await this.query<{ won: boolean }>(this.client, 'select pg_try_advisory_lock($1, hashtext($2)) as won', [LOCK_CLASS, this.installation]);
      if (!rows[0]?.won) {
        const report = await this.query<{ value: string }>(this.client, 'select value from settings where key = $1', [REPORT_KEY]);
        this.owner = report.rows[0] ? (JSON.parse(report.rows[0].value) as OwnerReport) : null;
        return;
      }
      this.owner = null;
      this.leading = { since: new Date().toISOString() };
      this.log.info('this instance now owns the MQTT connection');
      await this.onChange(true);
    } catch (error) {
      await this.client?.end().catch(() => {});
      this.client = null;
      if (!this.leading) return;
      this.leading = null;
      this.log.warn({ err: error }, 'lost the database session holding MQTT ownership: MQTT stopped on this instance');
      await this.onChange(false);
    }
  }
}
