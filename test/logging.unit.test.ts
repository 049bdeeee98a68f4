import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import Fastify from 'fastify';
import { pino } from 'pino';
import { loggerOptions, requestLogger } from '../src/http/logging.js';

/** A logger set up as the service's, writing its lines into an array (without their time). */
function capturedLogger(level = 'info') {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      const { time: _time, ...line } = JSON.parse(chunk.toString()) as Record<string, unknown>;
      lines.push(line);
      done();
    },
  });
  const options = loggerOptions(level, 'json', false) as pino.LoggerOptions;
  return { logger: pino({ ...options, base: null }, stream), lines };
}

describe('request loggers', () => {
  it("write the lines pino's own child writes, secrets redacted, the request id escaped", async () => {
    const { logger, lines } = capturedLogger();
    for (const reqId of ['req-1', 'req-"2"\n\u2028', '']) {
      logger.child({ reqId }).info({ settings: { password: 'hunter2' }, token: 't' }, 'saved');
      requestLogger.call(Fastify(), logger, { reqId }, {}, {} as never).info({ settings: { password: 'hunter2' }, token: 't' }, 'saved');
      const [pinos, ours] = lines.splice(0);
      assert.deepEqual(ours, pinos);
      assert.equal(ours!.reqId, reqId);
      assert.deepEqual(ours!.settings, { password: '[redacted]' });
    }
  });

  it("leave to pino a binding a serializer takes, one named as pino's options are, and one that is not text", async () => {
    const { logger, lines } = capturedLogger();
    const cases: Array<[Record<string, unknown>, Record<string, unknown>]> = [
      [{ reqId: 'req-4' }, { serializers: { reqId: (id: string) => `route-${id}` } }],
      [{ level: 'req-5' }, {}],
      [{ reqId: 42 }, {}],
      [{ reqId: 'req-6', other: { password: 'hunter2' } }, {}],
      [{ token: 'a-secret' }, {}],
    ];
    for (const [bindings, options] of cases) {
      logger.child(bindings, options).info('line');
      requestLogger.call(Fastify(), logger, bindings, options, {} as never).info('line');
      const [pinos, ours] = lines.splice(0);
      assert.deepEqual(ours, pinos, JSON.stringify(bindings));
    }
  });

  it('redact the secret fields at the top of a line and one object down', () => {
    const { logger, lines } = capturedLogger();
    requestLogger
      .call(Fastify(), logger, { reqId: 'req-7' }, {}, {} as never)
      .warn({ token: 'a', mqtt: { password: 'b', client_key: 'c' }, secret: 'd' }, 'saved');
    assert.deepEqual(lines[0], {
      level: 40,
      reqId: 'req-7',
      token: '[redacted]',
      mqtt: { password: '[redacted]', client_key: '[redacted]' },
      secret: '[redacted]',
      msg: 'saved',
    });
  });

  it("keep a route's log level, and their own children add their bindings", async () => {
    const { logger, lines } = capturedLogger();
    const quiet = requestLogger.call(Fastify(), logger, { reqId: 'req-3' }, { level: 'warn' }, {} as never);
    quiet.info('not written');
    quiet.warn('written');
    quiet.child({ part: 'mqtt' }).warn('from a child');
    assert.deepEqual(
      lines.map((line) => [line.msg, line.reqId, line.part]),
      [
        ['written', 'req-3', undefined],
        ['from a child', 'req-3', 'mqtt'],
      ],
    );
  });

  it('carry the request id on the lines Fastify writes for a request', async () => {
    const { logger, lines } = capturedLogger('debug');
    const app = Fastify({ loggerInstance: logger, childLoggerFactory: requestLogger });
    app.get('/', async (request) => {
      request.log.warn({ mqtt: { token: 'secret' } }, 'handled');
      return {};
    });
    await app.inject({ method: 'GET', url: '/' });
    await app.close();
    const handled = lines.find((line) => line.msg === 'handled');
    assert.ok(handled, JSON.stringify(lines));
    assert.match(String(handled.reqId), /^req-/);
    assert.deepEqual(handled.mqtt, { token: '[redacted]' });
    assert.ok(lines.filter((line) => line.reqId === handled.reqId).length >= 3, 'incoming, handled and completed share the id');
  });
});
