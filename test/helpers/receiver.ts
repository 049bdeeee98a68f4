import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

/** How the receiver answers one request: a status code, 'hang' (never answers) or a custom handler. */
export type Behaviour = number | 'hang' | ((response: ServerResponse) => void);

/** A real HTTP webhook receiver; answers from a queue of behaviours, then `fallback` (changed with `answerWith`). */
export async function startReceiver(fallback: Behaviour = 200) {
  const received: Received[] = [];
  const queue: Behaviour[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      received.push({ headers: request.headers, body, at: Date.now() });
      const behaviour = queue.shift() ?? fallback;
      if (behaviour === 'hang') return;
      if (typeof behaviour === 'function') return behaviour(response);
      response.writeHead(behaviour, { 'content-type': 'text/plain' });
      response.end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    received,
    answerNext: (...behaviours: Behaviour[]) => queue.push(...behaviours),
    answerWith: (behaviour: Behaviour) => (fallback = behaviour),
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
