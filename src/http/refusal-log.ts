import type { FastifyBaseLogger } from 'fastify';
import { LRUCache } from 'lru-cache';

/** Clients whose refusals are being counted at most; beyond that the least recently refused is reported and forgotten. */
const COUNTED_CLIENTS = 10_000;
export const REFUSAL_LOG_WINDOW_MS = 60_000;

interface Counted {
  fields: Record<string, unknown>;
  message: string;
  more: number;
}

/**
 * The log of refused credentials (a bot signature, an admin token), which says why (the caller only
 * gets an opaque 401) and from where. The first refusal of a client for a reason is logged at once;
 * the same again within the window is only counted, and the count is logged when the window ends. A
 * flood of refused requests then writes a line per client and reason a minute instead of a line per
 * request, which would cost each refusal more than the refusal itself and could fill the disk.
 */
export class RefusalLog {
  private readonly counting: LRUCache<string, Counted>;

  constructor(
    private readonly log: FastifyBaseLogger,
    windowMs = REFUSAL_LOG_WINDOW_MS,
  ) {
    this.counting = new LRUCache<string, Counted>({
      max: COUNTED_CLIENTS,
      ttl: windowMs,
      ttlAutopurge: true,
      dispose: (counted) => {
        if (counted.more > 0) this.log.info({ ...counted.fields, more: counted.more }, `${counted.message} (${counted.more} more since)`);
      },
    });
  }

  /**
   * Logs (with `log`, the request's logger) or counts a refusal. `client` is who is refused: its
   * address key, with the bot id when the bot exists (several bots may share a host). Numbers in the
   * message (a stale timestamp) do not make it another reason.
   */
  refused(log: FastifyBaseLogger, client: string, fields: Record<string, unknown>, message: string): void {
    const key = `${client}\n${message.replace(/\d+/g, '#')}`;
    const counted = this.counting.get(key);
    if (counted) {
      counted.more++;
      return;
    }
    this.counting.set(key, { fields, message, more: 0 });
    log.info(fields, message);
  }

  /** Logs the counts still open (at shutdown). */
  flush(): void {
    this.counting.clear();
  }
}
