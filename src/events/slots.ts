/** Which cap refuses a new stream: the client's own, or the instance's. */
export type SlotRefusal = 'client' | 'total';

/** The open event streams, counted per client (`token:<id>` or an address key) and in total, against their caps. */
export class StreamSlots {
  private readonly byClient = new Map<string, number>();
  private total = 0;

  constructor(private readonly caps: { total: number; perClient: number }) {}

  /** Takes a slot for `client`, or says which cap is reached (and takes nothing). */
  take(client: string): SlotRefusal | null {
    const held = this.byClient.get(client) ?? 0;
    if (held >= this.caps.perClient) return 'client';
    if (this.total >= this.caps.total) return 'total';
    this.byClient.set(client, held + 1);
    this.total++;
    return null;
  }

  /** Gives back a slot `take` handed to `client`. */
  release(client: string): void {
    const held = this.byClient.get(client) ?? 0;
    if (held <= 1) this.byClient.delete(client);
    else this.byClient.set(client, held - 1);
    this.total--;
  }

  get open(): number {
    return this.total;
  }
}
