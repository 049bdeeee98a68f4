// Clients that send slowly or not at all, without a credential: each connection is answered 408 and
// closed after HTTP_REQUEST_TIMEOUT_MS, so one client cannot hold sockets for good (an outside
// attack held 20,000 of them, and the service answered nobody else).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { eventually, startTestApp, type TestApp } from '../helpers/app.js';

const TIMEOUT_MS = 1000;

/** Opens a raw connection, runs `send` on it, and resolves with what the server wrote and how long until it closed. */
function connection(port: number, send: (socket: net.Socket) => void): Promise<{ answer: string; closedAfterMs: number }> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = net.connect(port, '127.0.0.1', () => send(socket));
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.on('error', () => {}); // a reset is a close too
    socket.on('close', () => resolve({ answer, closedAfterMs: Date.now() - started }));
    // The test's own bound: a connection the server never closes fails the test rather than hanging it.
    setTimeout(() => {
      socket.destroy();
      reject(new Error(`still open after 20 s; answered ${JSON.stringify(answer.slice(0, 100))}`));
    }, 20_000).unref();
  });
}

describe('clients that send slowly or not at all', () => {
  let app: TestApp;
  let port: number;
  before(async () => {
    app = await startTestApp('sqlite', { HTTP_REQUEST_TIMEOUT_MS: String(TIMEOUT_MS) });
    const address = await app.http.listen({ port: 0, host: '127.0.0.1' });
    port = Number(new URL(address).port);
  });
  after(() => app.cleanup());

  const headers = 'POST /api/events HTTP/1.1\r\nHost: hub\r\nContent-Type: application/json\r\nContent-Length: 1048000\r\n\r\n';

  it('headers and then no body: 408 request_timeout, and the connection closed', async () => {
    const { answer, closedAfterMs } = await connection(port, (socket) => socket.write(headers));
    assert.match(answer, /^HTTP\/1\.1 (401|408) /, answer.slice(0, 200));
    assert.ok(closedAfterMs < TIMEOUT_MS + 5000, `closed after ${closedAfterMs} ms`);
  });

  it('a byte of body now and then: closed all the same once the request has taken the timeout', async () => {
    let drip: NodeJS.Timeout | undefined;
    try {
      const { closedAfterMs } = await connection(port, (socket) => {
        socket.write(headers);
        drip = setInterval(() => socket.writable && socket.write(' '), 200);
      });
      assert.ok(closedAfterMs < TIMEOUT_MS + 5000, `closed after ${closedAfterMs} ms`);
    } finally {
      clearInterval(drip);
    }
  });

  it('a connection that sends nothing at all is closed', async () => {
    const { closedAfterMs } = await connection(port, () => {});
    assert.ok(closedAfterMs < TIMEOUT_MS + 5000, `closed after ${closedAfterMs} ms`);
  });

  it('half the headers: 408 and closed', async () => {
    const { answer, closedAfterMs } = await connection(port, (socket) => socket.write('GET /healthz HTTP/1.1\r\nHost: hub\r\n'));
    assert.match(answer, /^HTTP\/1\.1 408 /, answer.slice(0, 200));
    assert.match(answer, /request_timeout/);
    assert.ok(closedAfterMs < TIMEOUT_MS + 5000, `closed after ${closedAfterMs} ms`);
  });

  it('a request sent in time is answered as ever', async () => {
    assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);
  });
});

describe('connections per address', () => {
  it('an address holding HTTP_CONNECTIONS_PER_ADDRESS has its next one closed at once, and may connect again once one closes', async () => {
    const app = await startTestApp('sqlite', { HTTP_CONNECTIONS_PER_ADDRESS: '5' });
    const port = Number(new URL(await app.http.listen({ port: 0, host: '127.0.0.1' })).port);
    const held: net.Socket[] = [];
    try {
      for (let i = 0; i < 5; i++)
        held.push(
          await new Promise<net.Socket>((resolve) => {
            const socket = net.connect(port, '127.0.0.1', () => resolve(socket));
          }),
        );
      const refused = await connection(port, (socket) => socket.write('GET /healthz HTTP/1.1\r\nHost: hub\r\n\r\n'));
      assert.equal(refused.answer, '', 'closed without an answer');
      held.pop()!.destroy();
      const agent = new http.Agent({ keepAlive: false });
      await eventually(
        async () =>
          (await new Promise<number>((resolve, reject) =>
            http
              .get({ port, host: '127.0.0.1', path: '/healthz', agent }, (response) => {
                response.resume();
                resolve(response.statusCode!);
              })
              .on('error', reject),
          )) === 200,
        5000,
        'a connection after one closed',
      );
    } finally {
      for (const socket of held) socket.destroy();
      await app.cleanup();
    }
  });
});
