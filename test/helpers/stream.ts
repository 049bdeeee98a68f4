import { ADMIN_TOKEN } from './app.js';

/**
 * An open Server-Sent Events stream (`/api/events/stream` of `base`) that collects the events it
 * receives; `ended` resolves when the server ends it. `credentials`: the request's headers (the admin token's by default).
 */
export async function openStream(base: string, lastEventId?: number, credentials: Record<string, string> = { authorization: `Bearer ${ADMIN_TOKEN}` }) {
  const controller = new AbortController();
  const headers: Record<string, string> = { ...credentials };
  if (lastEventId !== undefined) headers['last-event-id'] = String(lastEventId);
  const response = await fetch(`${base}/api/events/stream`, { headers, signal: controller.signal });
  if (response.status !== 200) throw new Error(`the stream answered ${response.status}`);
  const ids: number[] = [];
  const events: { seq: number; event_type: string; detail: Record<string, unknown> }[] = [];
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const reading = (async () => {
    for (;;) {
      const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const id = /^id: (\d+)$/m.exec(frame)?.[1];
        if (!id) continue;
        ids.push(Number(id));
        const data = /^data: (.*)$/m.exec(frame)?.[1];
        if (data) events.push({ seq: Number(id), ...JSON.parse(data) });
      }
    }
  })();
  return {
    ids,
    events,
    ended: reading,
    close: async () => {
      controller.abort();
      await reading;
    },
  };
}
