import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { FastifyBaseLogger } from 'fastify';
import { RefusalLog } from '../src/http/refusal-log.js';

/** A logger that keeps what was logged at info. */
function recorder(): { log: FastifyBaseLogger; lines: { fields: Record<string, unknown>; message: string }[] } {
  const lines: { fields: Record<string, unknown>; message: string }[] = [];
  const log = { info: (fields: Record<string, unknown>, message: string) => lines.push({ fields, message }) } as unknown as FastifyBaseLogger;
  return { log, lines };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('refusal log', () => {
  it('logs the first refusal of a client for a reason, counts the repeats and logs the count when the window ends', async () => {
    const base = recorder();
    const request = recorder();
    const refusals = new RefusalLog(base.log, 50);
    for (let i = 0; i < 1000; i++) refusals.refused(request.log, '10.0.0.1 bot:b1', { bot_id: 'b1' }, 'bot request refused: signature does not match');
    assert.equal(request.lines.length, 1);
    assert.equal(base.lines.length, 0);
    await pause(120);
    assert.deepEqual(base.lines, [{ fields: { bot_id: 'b1', more: 999 }, message: 'bot request refused: signature does not match (999 more since)' }]);
    // A new window starts with a line of its own.
    refusals.refused(request.log, '10.0.0.1 bot:b1', { bot_id: 'b1' }, 'bot request refused: signature does not match');
    assert.equal(request.lines.length, 2);
  });

  it('another reason, another client or another bot on the same host is logged at once; a stale timestamp is one reason whatever its value', () => {
    const request = recorder();
    const refusals = new RefusalLog(recorder().log);
    const refuse = (client: string, message: string) => refusals.refused(request.log, client, {}, message);
    refuse('10.0.0.1 bot:b1', 'signature does not match');
    refuse('10.0.0.1 bot:b1', 'timestamp 1700000000 is more than 300 s from the server clock');
    refuse('10.0.0.1 bot:b1', 'timestamp 1700000001 is more than 300 s from the server clock');
    refuse('10.0.0.1 bot:b2', 'signature does not match');
    refuse('10.0.0.2 bot:b1', 'signature does not match');
    refuse('10.0.0.3', 'unknown bot');
    refuse('10.0.0.3', 'unknown bot');
    assert.deepEqual(
      request.lines.map((line) => line.message),
      [
        'signature does not match',
        'timestamp 1700000000 is more than 300 s from the server clock',
        'signature does not match',
        'signature does not match',
        'unknown bot',
      ],
    );
  });

  it('logs the open counts when flushed (shutdown)', () => {
    const base = recorder();
    const refusals = new RefusalLog(base.log);
    for (let i = 0; i < 3; i++) refusals.refused(recorder().log, '10.0.0.1', {}, 'unknown bot');
    refusals.refused(recorder().log, '10.0.0.2', {}, 'unknown bot');
    refusals.flush();
    assert.deepEqual(
      base.lines.map((line) => line.message),
      ['unknown bot (2 more since)'],
    );
  });
});
