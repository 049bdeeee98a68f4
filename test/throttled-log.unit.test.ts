import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { FastifyBaseLogger } from 'fastify';
import { ThrottledLog } from '../src/http/throttled-log.js';

interface Line {
  level: string;
  fields: Record<string, unknown>;
  message: string;
}

/** A logger that keeps what was logged at info and warn. */
function recorder(): { log: FastifyBaseLogger; lines: Line[] } {
  const lines: Line[] = [];
  const at = (level: string) => (fields: Record<string, unknown>, message: string) => lines.push({ level, fields, message });
  return { log: { info: at('info'), warn: at('warn') } as unknown as FastifyBaseLogger, lines };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('throttled log', () => {
  it('writes the first line of a key and message, counts the repeats and writes the count, at the same level, when the window ends', async () => {
    const base = recorder();
    const request = recorder();
    const throttled = new ThrottledLog(base.log, 50);
    for (let i = 0; i < 1000; i++)
      throttled.write(request.log, 'ip:10.0.0.1 bot:b1', 'info', { bot_id: 'b1' }, 'bot request refused: signature does not match');
    throttled.write(request.log, 'readyz', 'warn', { attempt: 1 }, 'readiness: database unreachable');
    throttled.write(request.log, 'readyz', 'warn', { attempt: 2 }, 'readiness: database unreachable');
    assert.deepEqual(
      request.lines.map((line) => [line.level, line.message]),
      [
        ['info', 'bot request refused: signature does not match'],
        ['warn', 'readiness: database unreachable'],
      ],
    );
    assert.equal(base.lines.length, 0);
    await pause(120);
    assert.deepEqual(base.lines, [
      { level: 'info', fields: { bot_id: 'b1', more: 999 }, message: 'bot request refused: signature does not match (999 more since)' },
      { level: 'warn', fields: { attempt: 1, more: 1 }, message: 'readiness: database unreachable (1 more since)' },
    ]);
    // A new window starts with a line of its own.
    throttled.write(request.log, 'ip:10.0.0.1 bot:b1', 'info', { bot_id: 'b1' }, 'bot request refused: signature does not match');
    assert.equal(request.lines.length, 3);
  });

  it('another message, another client or another bot on the same host is written at once', () => {
    const request = recorder();
    const throttled = new ThrottledLog(recorder().log);
    const refuse = (client: string, message: string) => throttled.write(request.log, client, 'info', {}, message);
    refuse('ip:10.0.0.1 bot:b1', 'signature does not match');
    refuse('ip:10.0.0.1 bot:b1', 'timestamp more than 300 s from the server clock');
    refuse('ip:10.0.0.1 bot:b1', 'timestamp more than 300 s from the server clock');
    refuse('ip:10.0.0.1 bot:b2', 'signature does not match');
    refuse('ip:10.0.0.2 bot:b1', 'signature does not match');
    refuse('ip:10.0.0.3', 'unknown bot');
    refuse('ip:10.0.0.3', 'unknown bot');
    assert.deepEqual(
      request.lines.map((line) => line.message),
      ['signature does not match', 'timestamp more than 300 s from the server clock', 'signature does not match', 'signature does not match', 'unknown bot'],
    );
  });

  it('writes the open counts when flushed (shutdown)', () => {
    const base = recorder();
    const throttled = new ThrottledLog(base.log);
    for (let i = 0; i < 3; i++) throttled.write(recorder().log, 'ip:10.0.0.1', 'info', {}, 'unknown bot');
    throttled.write(recorder().log, 'ip:10.0.0.2', 'info', {}, 'unknown bot');
    throttled.flush();
    assert.deepEqual(
      base.lines.map((line) => line.message),
      ['unknown bot (2 more since)'],
    );
  });
});
