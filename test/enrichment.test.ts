import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createHmac } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { NONCE_TTL_SECONDS, parseSignatures, sign, stringToSign, timestampFresh, verifySignatures } from '../src/enrichment/signing.js';
import { builtInCommentary, commentaryFor, llmCommentary, parseReplay, replayRefusal, ReplayError } from '../src/enrichment/commentary.js';
import { COMMENTARY_LIMIT, FAILURE_MESSAGE_LIMIT, LLM_RESPONSE_LIMIT } from '../src/limits.js';
import { DIALECTS, createTestEnv, eventually, startTestApp, type TestApp } from './helpers/app.js';
import { botRequest } from './helpers/bot.js';
import { REPLAY } from './helpers/fixtures.js';
import { DAILY_QUOTA } from '../src/enrichment/quota.js';
import { DatabaseNonceStore } from '../src/enrichment/bot-auth.js';
import { CompiledQuery, sql } from 'kysely';
import { newestMatches } from '../src/enrichment/matches.js';
import { holdAdvisoryLock } from './helpers/locks.js';

describe('bot request signing', () => {
  const parts = { method: 'post', pathAndQuery: '/api/request-enrichment?x=1', timestamp: '1795300000', nonce: 'abcdefghijklmnop', body: '{"match_id":"m1"}' };

  it('signs the documented string', () => {
    const bodyHash = createHash('sha256').update('{"match_id":"m1"}').digest('hex');
    assert.equal(stringToSign(parts), `v1\nPOST\n/api/request-enrichment?x=1\n1795300000\nabcdefghijklmnop\n${bodyHash}`);
    // Plain HMAC-SHA256 hex, reproducible with openssl (docs/enrichment.md), over string or bytes alike.
    assert.equal(sign('secret', parts), createHmac('sha256', 'secret').update(stringToSign(parts)).digest('hex'));
    assert.equal(sign('secret', parts), sign('secret', { ...parts, body: Buffer.from(parts.body) }));
  });

  it('accepts any matching v1 entry and rejects everything else', () => {
    const good = sign('s1', parts);
    assert.deepEqual(parseSignatures(`v0=abc v1=${good} v1=zz`), [good]);
    assert.equal(verifySignatures(['s1'], parts, [good]), true);
    assert.equal(verifySignatures(['s2'], parts, [good]), false);
    assert.equal(verifySignatures(['s2', 's1'], parts, ['0'.repeat(64), good]), true);
    assert.equal(verifySignatures(['s1'], { ...parts, body: '{"match_id":"m2"}' }, [good]), false);
  });

  it('accepts timestamps up to 300 s from the clock either way, to the second', () => {
    const nowMs = 1_795_300_000_999; // late in its second: the server compares whole seconds
    for (const [offset, fresh] of [
      [0, true],
      [300, true],
      [-300, true],
      [301, false],
      [-301, false],
    ] as const) {
      assert.equal(timestampFresh(String(1_795_300_000 + offset), nowMs), fresh, `offset ${offset}`);
    }
    for (const malformed of ['', '17953e5', '-1795300000', '1795300000.5', '1'.repeat(13)]) assert.equal(timestampFresh(malformed, nowMs), false, malformed);
  });

  it('remembers a nonce longer than its request stays fresh, so no signed request can be sent twice', () => {
    const timestamp = '1795300000';
    let first = Infinity;
    let last = -Infinity;
    for (let nowMs = 1_795_299_000_000; nowMs <= 1_795_301_000_000; nowMs += 250) {
      if (timestampFresh(timestamp, nowMs)) [first, last] = [Math.min(first, nowMs), Math.max(last, nowMs)];
    }
    assert.ok(last - first >= 600_000, 'fresh for about 2 x 300 s');
    assert.ok(NONCE_TTL_SECONDS * 1000 > last - first, `nonce kept ${NONCE_TTL_SECONDS} s, request fresh for ${(last - first) / 1000} s`);
  });
});

describe('commentary', () => {
  it('writes readable commentary from a replay', () => {
    const text = builtInCommentary(REPLAY, 'm1');
    assert.match(text, /^Ranked match #42: red \(Nova\) against blue \(Blaze\) over 10:12\./);
    assert.match(text, /At 0:35, Nova scores, opening the scoring for red\./);
    assert.match(text, /At 3:30, Blaze scores, levelling it\./);
    assert.match(text, /At 9:50, Blaze scores and blue takes the lead\./);
    assert.match(text, /Player of the match: Blaze, with 2 points\./);
    assert.match(text, /Final score: blue 2, red 1\. Blue takes it\./);
  });

  it('names the field when the replay is unusable', () => {
    assert.throws(() => parseReplay(null), ReplayError);
    assert.throws(() => parseReplay({ players: [] }), /replay.players must be a non-empty array/);
    assert.throws(() => parseReplay({ players: [{ id: 'p1', name: 'A' }], events: [{ t: 'x', type: 'goal' }] }), /replay.events\[0\]/);
    assert.throws(
      () => parseReplay({ players: [{ team: 'red' }] }),
      (error: ReplayError) => error.path === '/players/0',
    );
    assert.throws(
      () => parseReplay({ players: ['a'], final_score: { a: '2' } }),
      (error: ReplayError) => error.path === '/final_score/a',
    );
    // Bounds an outside attack found missing: "At 1.66e+306:56", "with Infinity points", 647 KB of lineup.
    assert.throws(
      () => parseReplay({ players: ['a'], events: [{ t: 1e308, type: 'goal', player: 'a' }] }),
      (error: ReplayError) => error.path === '/events/0/t',
    );
    assert.throws(
      () => parseReplay({ players: ['a'], events: [{ t: 1, type: 'goal', player: 'a', points: 1e308 }] }),
      (error: ReplayError) => error.path === '/events/0/points',
    );
    assert.throws(
      () => parseReplay({ players: ['a'], final_score: { a: 1e308 } }),
      (error: ReplayError) => error.path === '/final_score/a',
    );
    assert.throws(
      () => parseReplay({ players: Array.from({ length: 1001 }, (_, index) => `p${index}`) }),
      (error: ReplayError) => error.path === '/players',
    );
  });

  it('reads the shapes games export: players as ids or objects, numbers as ids, scores as a map or a list', () => {
    assert.deepEqual(parseReplay({ players: ['ann', 7] }).players, [
      { id: 'ann', name: 'ann' },
      { id: '7', name: '7' },
    ]);
    assert.deepEqual(parseReplay({ players: [{ name: 'Nova' }, { id: 3, team: 'blue' }] }).players, [
      { id: 'Nova', name: 'Nova' },
      { id: '3', name: '3', team: 'blue' },
    ]);
    assert.deepEqual(
      parseReplay({
        players: ['a', 'b'],
        final_score: [
          { team: 'a', score: 2 },
          { player: 'b', points: 1 },
        ],
      }).final_score,
      { a: 2, b: 1 },
    );
  });

  describe('tells the outcome the replay records', () => {
    const teams = [
      { id: 'p1', name: 'Nova', team: 'red' },
      { id: 'p2', name: 'Blaze', team: 'blue' },
    ];
    const cases: { title: string; replay: object; winner: RegExp; star?: RegExp; never?: RegExp[] }[] = [
      {
        title: '2-0 by goals without points',
        replay: {
          players: teams,
          events: [
            { t: 1, type: 'goal', player: 'p1' },
            { t: 2, type: 'goal', player: 'p1' },
          ],
        },
        winner: /Final score: red 2, blue 0\. Red takes it\./,
        star: /Player of the match: Nova, with 2 points\./,
        never: [/Honours even/],
      },
      {
        title: '2-0 exported with the winner only',
        replay: { players: teams, final_score: { red: 2 } },
        winner: /Final score: red 2, blue 0\. Red takes it\./,
        never: [/Honours even/],
      },
      {
        title: 'the loser scored most points',
        replay: {
          players: [...teams, { id: 'p3', name: 'Echo', team: 'blue' }],
          events: [
            { t: 1, type: 'kill', player: 'p1', target: 'p2', points: 5 },
            { t: 2, type: 'objective', player: 'p2', points: 4 },
            { t: 3, type: 'objective', player: 'p3', points: 2 },
          ],
          winner: 'blue',
          final_score: { red: 5, blue: 6 },
        },
        winner: /Blue takes it\./,
        star: /Player of the match: Blaze, with 4 points\./,
        never: [/Player of the match: Nova/],
      },
      {
        title: 'a declared winner the score does not show',
        replay: { players: teams, events: [{ t: 1, type: 'score', player: 'p1', points: 4 }], winner: 'blue' },
        winner: /Blue takes it\./,
        never: [/Player of the match: Nova/, /Red takes it/],
      },
      { title: 'a real draw', replay: { players: teams, final_score: { red: 1, blue: 1 } }, winner: /Final score: red 1, blue 1\. Honours even\./ },
      {
        title: 'free for all, players as plain ids',
        replay: {
          players: ['ann', 'bob', 'cy'],
          events: [
            { t: 5, type: 'score', player: 'bob', points: 3 },
            { t: 9, type: 'score', player: 'ann', points: 1 },
          ],
        },
        winner: /Final score: bob 3, ann 1, cy 0\. Bob takes it\./,
        star: /Player of the match: bob, with 3 points\./,
      },
      {
        title: 'a winner named by a player name',
        replay: {
          players: [
            { id: 'u1', name: 'Kai' },
            { id: 'u2', name: 'Lu' },
          ],
          events: [
            { t: 1, type: 'goal', player: 'u2' },
            { t: 2, type: 'goal', player: 'u1' },
            { t: 3, type: 'goal', player: 'u1' },
          ],
          winner: 'Kai',
        },
        winner: /Kai takes it\./,
        star: /Player of the match: Kai, with 2 points\./,
        never: [/Lu takes it/],
      },
    ];
    for (const { title, replay, winner, star, never = [] } of cases) {
      it(title, () => {
        const text = builtInCommentary(replay, 'm');
        assert.match(text, winner, text);
        if (star) assert.match(text, star, text);
        for (const pattern of never) assert.doesNotMatch(text, pattern, text);
      });
    }
  });

  it('asks an OpenAI-compatible endpoint when configured', async () => {
    let seen: { auth?: string; body?: any; url?: string } = {};
    const server = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk) => (body += chunk));
      request.on('end', () => {
        seen = { auth: request.headers.authorization, body: JSON.parse(body), url: request.url };
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ choices: [{ message: { role: 'assistant', content: '  What a match!  ' } }] }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const generate = llmCommentary({ url: `http://127.0.0.1:${port}/v1`, model: 'test-model', apiKey: 'k-123' });
      assert.equal(await generate(REPLAY, 'm1'), 'What a match!');
      assert.equal(seen.url, '/v1/chat/completions');
      assert.equal(seen.auth, 'Bearer k-123');
      assert.equal(seen.body.model, 'test-model');
      assert.match(seen.body.messages[1].content, /Ranked match #42/);
      // Any replay goes to the model, not only the built-in generator's shape.
      assert.equal(await generate({ rounds: [{ winner: 'x' }] }, 'm2'), 'What a match!');
      assert.match(seen.body.messages[1].content, /"rounds"/);
      await assert.rejects(generate(null, 'm3'), ReplayError);
    } finally {
      server.close();
    }
  });

  it('fails an attempt whose LLM answer is over the read limit, without reading it whole', async () => {
    let written = 0;
    const server = createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        response.writeHead(200, { 'content-type': 'application/json' });
        // An endless answer: the client must stop reading it.
        const chunk = Buffer.alloc(64 * 1024, 'x');
        const pump = () => {
          while (written <= 8 * LLM_RESPONSE_LIMIT && response.write(chunk)) written += chunk.length;
          if (written <= 8 * LLM_RESPONSE_LIMIT) response.once('drain', pump);
          else response.end();
        };
        pump();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const generate = llmCommentary({ url: `http://127.0.0.1:${port}/v1`, model: 'test-model', apiKey: null });
      await assert.rejects(generate(REPLAY, 'm1'), new RegExp(`more than ${LLM_RESPONSE_LIMIT} bytes`));
      assert.ok(written < 8 * LLM_RESPONSE_LIMIT, `the server wrote ${written} bytes`);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});

for (const dialect of DIALECTS) {
  describe(`enrichment requests (${dialect})`, () => {
    let app: TestApp;
    let bot: { id: string; shared_secret: string };
    const request = (body: unknown, options = {}) => botRequest(app.http, bot, 'POST', '/api/request-enrichment', body, options);
    const jobs = () => app.database.db.selectFrom('enrichment_jobs').selectAll().execute();
    const nonceStored = async (nonce: string) =>
      (await app.database.db.selectFrom('nonces').select('key').where('key', '=', `${bot.id}:${nonce}`).executeTakeFirst()) !== undefined;

    before(async () => {
      app = await startTestApp(dialect);
      bot = (await app.api('POST', '/api/bots', { name: 'Replay Bot' })).body;
      assert.equal(bot.id, 'replay-bot');
      assert.match(bot.shared_secret, /^mss_[A-Za-z0-9_-]{43}$/);
      for (let i = 1; i <= 12; i++) await app.api('POST', '/api/matches', { id: `m${i}`, status: 'completed', replay: REPLAY });
      await app.api('POST', '/api/matches', { id: 'live', status: 'in_progress' });
      await app.api('POST', '/api/matches', { id: 'bare', status: 'completed' });
    });
    after(() => app.cleanup());

    it('stores the shared secret encrypted and never shows it again', async () => {
      const row = await app.database.db.selectFrom('bots').selectAll().where('id', '=', bot.id).executeTakeFirstOrThrow();
      assert.ok(!row.secret_encrypted.includes(bot.shared_secret.slice(4)));
      assert.equal(app.box.open(row.secret_encrypted), bot.shared_secret);
      const list = await app.api('GET', '/api/bots');
      assert.equal(JSON.stringify(list.body).includes(bot.shared_secret), false);
    });

    it('accepts a signed request: 202, Location, estimate, one job, requested_at set, event emitted with its webhook delivery', async () => {
      assert.equal((await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: 'http://127.0.0.1:9/hook' } })).status, 200);
      const response = await request({ match_id: 'm1' }, { nonce: 'first-request-nonce' });
      assert.equal(response.status, 202, JSON.stringify(response.body));
      assert.equal(response.headers.location, '/api/matches/m1/enrichment');
      assert.equal(response.body.match_id, 'm1');
      assert.equal(response.body.status, 'queued');
      assert.equal(response.body.duplicate, false);
      assert.ok(Number.isInteger(response.body.estimated_wait_seconds) && response.body.estimated_wait_seconds >= 1);
      assert.equal(response.headers['ratelimit-policy'], `"default";q=100000;w=10, "daily";q=${DAILY_QUOTA};w=86400`);
      assert.match(String(response.headers.ratelimit), new RegExp(`"daily";r=${DAILY_QUOTA - 1};t=0$`), 'more quota is available now');
      const match = (await app.api('GET', '/api/matches/m1')).body;
      assert.equal(match.enrichment_requested_at, response.body.requested_at);
      assert.equal(match.enrichment.status, 'queued');
      assert.equal((await jobs()).length, 1);
      const [event, ...others] = (await app.api('GET', '/api/events')).body.events;
      assert.deepEqual(others, []);
      assert.equal(event.event_type, 'enrichment.requested');
      assert.deepEqual(event.detail, { match_id: 'm1', bot_id: bot.id, job_id: response.body.job_id });
      const deliveries = await app.database.db.selectFrom('webhook_deliveries').selectAll().execute();
      assert.equal(deliveries.length, 1, 'the webhook outbox row is written with the event');
      assert.equal(deliveries[0]!.event_seq, event.seq);
      assert.match(deliveries[0]!.webhook_id, /^msg_[0-9a-f]{32}$/);
      const delivered = JSON.parse(deliveries[0]!.payload);
      assert.deepEqual([delivered.event_type, delivered.timestamp, delivered.detail], [event.event_type, event.timestamp, event.detail]);
      assert.ok(await nonceStored('first-request-nonce'), 'the nonce of an accepted request is recorded');
      await app.api('POST', '/api/settings/integration', { webhook: { enabled: false } });
    });

    it('is idempotent per match: a repeat enqueues nothing and uses no quota', async () => {
      const first = await request({ match_id: 'm1' });
      assert.equal(first.status, 202);
      assert.equal(first.body.duplicate, true);
      assert.equal(first.headers.location, '/api/matches/m1/enrichment', "the job is this bot's: its status answers it");
      assert.equal((await jobs()).length, 1);
      assert.match(String(first.headers.ratelimit), new RegExp(`"daily";r=${DAILY_QUOTA - 1};`));
      // Another bot's repeat learns the job's state, but the status URL would answer it 404: no Location.
      const other = (await app.api('POST', '/api/bots', { name: 'Second Bot' })).body;
      const second = await botRequest(app.http, other, 'POST', '/api/request-enrichment', { match_id: 'm1' });
      assert.deepEqual([second.status, second.body.duplicate, second.body.job_id], [202, true, first.body.job_id]);
      assert.equal(second.headers.location, undefined);
      assert.equal('own' in second.body, false, 'the answer is the documented one');
      assert.equal((await botRequest(app.http, other, 'GET', '/api/matches/m1/enrichment')).status, 404);
      assert.equal((await app.api('DELETE', `/api/bots/${other.id}`)).status, 204);
    });

    it('rejects unknown and unfinished matches without using quota', async () => {
      const unknown = await request({ match_id: 'nope' }, { nonce: 'refused-unknown-match' });
      assert.equal(unknown.status, 404);
      assert.equal(unknown.body.code, 'match_not_found');
      const live = await request({ match_id: 'live' }, { nonce: 'refused-unfinished-match' });
      assert.equal(live.status, 409);
      assert.equal(live.body.code, 'match_not_completed');
      assert.deepEqual(
        [await nonceStored('refused-unknown-match'), await nonceStored('refused-unfinished-match')],
        [false, false],
        'a refused request writes nothing',
      );
      const bad = await request({ match_id: 'm1', extra: true });
      assert.equal(bad.status, 400);
      assert.equal(bad.body.errors[0].path, '/extra');
      const bare = await request({ match_id: 'bare' });
      assert.equal(bare.status, 409);
      assert.equal(bare.body.code, 'replay_unusable');
      assert.equal((await jobs()).length, 1);
      assert.equal((await app.api('GET', '/api/matches/bare')).body.enrichment_requested_at, null);
    });

    it('checks a replay when the match is written, naming the field', async () => {
      const created = await app.api('POST', '/api/matches', { id: 'unreadable', status: 'completed', replay: { players: [{ team: 'red' }] } });
      assert.equal(created.status, 400);
      assert.equal(created.body.errors[0].path, '/replay/players/0');
      assert.equal((await app.api('GET', '/api/matches/unreadable')).status, 404);
      const patched = await app.api('PATCH', '/api/matches/bare', { replay: { players: 'nobody' } });
      assert.equal(patched.status, 400);
      assert.equal(patched.body.errors[0].path, '/replay/players');
      assert.equal((await app.api('PATCH', '/api/matches/bare', { replay: { players: ['ann', 'bob'] } })).status, 200);
    });

    it('enforces DAILY_QUOTA jobs per rolling 24 h with Retry-After until the oldest leaves the window', async () => {
      // m1 is queued already; m12 stays unrequested for the status test.
      assert.ok(DAILY_QUOTA + 1 < 12, 'the matches set up are enough');
      for (let i = 2; i <= DAILY_QUOTA; i++) assert.equal((await request({ match_id: `m${i}` })).status, 202);
      const next = `m${DAILY_QUOTA + 1}`;
      const sixth = await request({ match_id: next }, { nonce: 'refused-at-quota' });
      assert.equal(sixth.status, 429);
      assert.equal(await nonceStored('refused-at-quota'), false, 'a request refused at quota writes nothing, not even its nonce');
      assert.equal(sixth.body.code, 'quota_exceeded');
      assert.deepEqual(sixth.body['violated-policies'], ['daily']);
      const retryAfter = Number(sixth.headers['retry-after']);
      assert.deepEqual([sixth.headers['x-quota-remaining'], sixth.headers['x-quota-reset']], ['0', String(retryAfter)]);
      assert.ok(retryAfter > 86_000 && retryAfter <= 86_400, String(retryAfter));
      assert.match(String(sixth.headers.ratelimit), new RegExp(`"daily";r=0;t=${retryAfter}$`), 't is when the quota frees up, as Retry-After');
      // Quota is checked before the match (seed order): an idempotent repeat is refused too while at quota.
      const repeat = await request({ match_id: 'm1' });
      assert.equal(repeat.status, 429);
      assert.ok(Math.abs(Number(repeat.headers['retry-after']) - retryAfter) <= 1, 'answered from memory with the same Retry-After');

      // Window edges: a job enqueued 24 h - 5 s ago still counts; at 24 h + 1 s it has left.
      const shift = async (seconds: number) =>
        app.database.db
          .updateTable('enrichment_jobs')
          .set({ enqueued_at: new Date(Date.now() - seconds * 1000).toISOString() })
          .where('match_id', '=', 'm1')
          .execute();
      // A bot at its quota stays so until its oldest job leaves the window: later requests are answered
      // from memory, without reading the jobs. Moved behind the service's back, they are not seen...
      await shift(86_400 + 1);
      assert.equal((await request({ match_id: next })).status, 429, 'refused from memory');
      // ...until the service is told to forget (only tests move jobs in time).
      app.enrichment.requests.forgetQuotas();
      await shift(86_400 - 5);
      const stillCounted = await request({ match_id: next });
      assert.equal(stillCounted.status, 429);
      assert.ok(Number(stillCounted.headers['retry-after']) <= 5);
      await shift(86_400 + 1);
      app.enrichment.requests.forgetQuotas();
      assert.equal((await request({ match_id: next })).status, 202);
      assert.equal((await jobs()).length, DAILY_QUOTA + 1);

      // Jobs stamped ahead of the clock by less than a window count (another instance's clock runs
      // ahead: counting them keeps the quota exact across instances); stamped further ahead (a clock
      // that ran a day or more ahead, since corrected) they do not hold the bot at its quota until then.
      const ahead = (seconds: number) =>
        app.database.db
          .updateTable('enrichment_jobs')
          .set({ enqueued_at: new Date(Date.now() + seconds * 1000).toISOString() })
          .where('match_id', '!=', 'm1')
          .execute();
      const later = `m${DAILY_QUOTA + 2}`;
      await ahead(23 * 3600);
      app.enrichment.requests.forgetQuotas();
      assert.equal((await request({ match_id: later })).status, 429, 'an instance 23 h ahead: counted');
      await ahead(365 * 86_400);
      app.enrichment.requests.forgetQuotas();
      assert.equal((await request({ match_id: later })).status, 202, 'a year ahead: not counted');
      const listed = (await app.api('GET', '/api/bots')).body.find((each: { id: string }) => each.id === bot.id);
      assert.equal(listed.quota.used, 1, 'the list counts as the quota does');
    });

    it('answers status to the bot and to an admin', async () => {
      const byBot = await botRequest(app.http, bot, 'GET', '/api/matches/m2/enrichment');
      assert.equal(byBot.status, 200);
      assert.equal(byBot.body.status, 'queued');
      assert.equal(byBot.body.commentary, null);
      const byAdmin = await app.api('GET', '/api/matches/m2/enrichment');
      assert.equal(byAdmin.status, 200);
      assert.equal((await app.api('GET', '/api/matches/m2/enrichment', undefined, { authorization: '' })).status, 401);
      // Another bot sees neither this bot's match nor whether an unrequested match exists (outside attack).
      const other = (await app.api('POST', '/api/bots', { name: 'Nosy Bot' })).body;
      for (const match of ['m2', 'm12', 'no-such-match']) {
        const nosy = await botRequest(app.http, other, 'GET', `/api/matches/${match}/enrichment`);
        assert.deepEqual([nosy.status, nosy.body.code, nosy.body.commentary], [404, 'match_not_found', undefined], match);
      }
      assert.equal((await botRequest(app.http, bot, 'GET', '/api/matches/m12/enrichment')).status, 404, 'a match it never requested');
    });
  });

  describe(`bot authentication (${dialect})`, () => {
    let app: TestApp;
    let bot: { id: string; shared_secret: string };
    before(async () => {
      app = await startTestApp(dialect);
      bot = (await app.api('POST', '/api/bots', { id: 'auth-bot', name: 'Auth' })).body;
      await app.api('POST', '/api/matches', { id: 'done', status: 'completed', replay: REPLAY });
      // A bot reads the enrichment of matches it requested.
      assert.equal((await botRequest(app.http, bot, 'POST', '/api/request-enrichment', { match_id: 'done' })).status, 202);
    });
    after(() => app.cleanup());

    const expect401 = async (what: string, promise: Promise<{ status: number; body: any; headers: Record<string, unknown> }>) => {
      const response = await promise;
      assert.equal(response.status, 401, what);
      assert.match(String(response.headers['www-authenticate']), /^Mothership-Signature /, what);
      assert.deepEqual(
        response.body,
        { type: '/problems/unauthorized', title: 'Unauthorized', status: 401, detail: 'Missing or invalid credentials', code: 'unauthorized' },
        what,
      );
    };

    it('answers one opaque 401 for every failure and enqueues nothing', async () => {
      const body = { match_id: 'done' };
      const send = (options = {}, who = bot) => botRequest(app.http, who, 'POST', '/api/request-enrichment', body, options);
      const now = Math.floor(Date.now() / 1000);
      await expect401(
        'no headers',
        app.http
          .inject({ method: 'POST', url: '/api/request-enrichment', payload: body })
          .then((r) => ({ status: r.statusCode, body: r.json(), headers: r.headers })),
      );
      await expect401('unknown bot', send({}, { id: 'ghost', shared_secret: bot.shared_secret }));
      await expect401('wrong secret', send({ secrets: ['mss_wrong'] }));
      await expect401('tampered body', send({ tamper: { body: '{"match_id":"other"}' } }));
      await expect401('tampered path', send({ tamper: { url: '/api/request-enrichment?x=1' } }));
      // 302: the clock may tick between reading `now` and the server's check (the exact edges are unit-tested above).
      await expect401('timestamp 302 s ahead', send({ timestamp: now + 302 }));
      await expect401('timestamp 301 s behind', send({ timestamp: now - 301 }));
      await expect401('nonce too short', send({ nonce: 'short' }));
      await expect401('nonce with bad characters', send({ nonce: 'abcdefghijklmnop!' }));
      await expect401('not v1', send({ headers: { 'x-bot-signature': 'v2=' + 'a'.repeat(64) } }));
      assert.equal((await app.database.db.selectFrom('enrichment_jobs').selectAll().execute()).length, 1, 'only the job of the request made before');
    });

    it('a bot is accepted as soon as it is created, though a request under its id was refused just before (outside attack: for 5 s)', async () => {
      await app.api('POST', '/api/matches', { id: 'early', status: 'completed', replay: REPLAY });
      await expect401(
        'a bot not created yet',
        botRequest(app.http, { id: 'early-bot', shared_secret: 'mss_not-yet' }, 'POST', '/api/request-enrichment', { match_id: 'early' }),
      );
      const early = (await app.api('POST', '/api/bots', { id: 'early-bot', name: 'Early Bot' })).body;
      const response = await botRequest(app.http, early, 'POST', '/api/request-enrichment', { match_id: 'early' });
      assert.equal(response.status, 202, JSON.stringify(response.body));
      // The same after a rotation: the new secret works at once.
      const rotated = (await app.api('POST', `/api/bots/${early.id}/rotate-secret`)).body;
      assert.equal((await botRequest(app.http, { id: early.id, shared_secret: rotated.shared_secret }, 'GET', '/api/matches/early/enrichment')).status, 200);
    });

    // PostgreSQL only: there a request reads the bot's row on another connection while a rotation's
    // transaction is open. SQLite's one connection serves the transaction alone until it ends.
    if (dialect === 'postgres')
      it('a request that read the bot while its rotation was committing leaves the new secret working at once (outside review)', async () => {
        const rotating = (await app.api('POST', '/api/bots', { id: 'rotating-bot', name: 'Rotating Bot' })).body;
        const LOCK = 77_001;
        // The rotation's commit waits, in a deferred trigger, for a lock this test holds.
        await sql
          .raw(
            `create function rotation_waits() returns trigger language plpgsql as $$ begin perform pg_advisory_lock(${LOCK}); perform pg_advisory_unlock(${LOCK}); return null; end $$;
             create constraint trigger rotation_waits after update on bots deferrable initially deferred for each row execute function rotation_waits()`,
          )
          .execute(app.database.db);
        try {
          const lock = await holdAdvisoryLock(app.database.db, LOCK);
          const rotation = app.api('POST', `/api/bots/${rotating.id}/rotate-secret`);
          try {
            await eventually(
              async () =>
                (
                  await sql<{
                    waiting: number;
                  }>`select count(*)::int as waiting from pg_locks where locktype = 'advisory' and objid = ${LOCK} and not granted`.execute(app.database.db)
                ).rows[0]!.waiting === 1,
              5000,
              'the rotation waiting to commit',
            );
            // Read before the commit: the row as it was, the old secret still current.
            assert.equal((await botRequest(app.http, rotating, 'GET', '/api/matches/done/enrichment')).status, 404, 'signed with the old secret');
          } finally {
            await lock.release();
          }
          const rotated = (await rotation).body;
          const response = await botRequest(app.http, { id: rotating.id, shared_secret: rotated.shared_secret }, 'GET', '/api/matches/done/enrichment');
          assert.equal(response.status, 404, `the new secret at once: ${JSON.stringify(response.body)}`);
        } finally {
          await sql.raw('drop trigger rotation_waits on bots; drop function rotation_waits()').execute(app.database.db);
        }
      });

    it('an instance whose clock runs ahead purges no nonce the others still refuse replays by (outside attack: 11 minutes ahead)', async () => {
      const nonces = new DatabaseNonceStore(app.database);
      const key = `${bot.id}:clock-skew-nonce-0001`;
      assert.equal(await nonces.firstUse(key), true);
      await nonces.purgeExpired(Date.now() + 700_000);
      assert.equal(await nonces.firstUse(key), false, 'still a replay on the instances with the right clock');
      await nonces.purgeExpired(Date.now() + 2 * NONCE_TTL_SECONDS * 1000 + 1000);
      assert.equal(
        await app.database.db.selectFrom('nonces').select('key').where('key', '=', key).executeTakeFirst(),
        undefined,
        'purged a lifetime after it expired',
      );
    });

    it('a clock stepped forward purges no nonce still live by the time passed (outside test: +30 min, back, and a replay was accepted)', async () => {
      const nonces = new DatabaseNonceStore(app.database);
      const key = `${bot.id}:clock-step-nonce-0001`;
      assert.equal(await nonces.firstUse(key), true);
      const wall = Date.now;
      Date.now = () => wall() + 30 * 60 * 1000;
      try {
        await nonces.purgeExpired();
      } finally {
        Date.now = wall;
      }
      assert.equal(await nonces.firstUse(key), false, 'the clock back: its request is fresh again, and still a replay');
    });

    it("a deleted bot's signatures are refused; a bot created again under its id takes over its quota window and matches", async () => {
      const first = (await app.api('POST', '/api/bots', { id: 'again-bot', name: 'Again' })).body;
      await app.api('POST', '/api/matches', { id: 'again-match', status: 'completed', replay: REPLAY });
      assert.equal((await botRequest(app.http, first, 'POST', '/api/request-enrichment', { match_id: 'again-match' })).status, 202);
      assert.equal((await app.api('DELETE', '/api/bots/again-bot')).status, 204);
      await expect401('a deleted bot', botRequest(app.http, first, 'GET', '/api/matches/again-match/enrichment'));
      const second = (await app.api('POST', '/api/bots', { id: 'again-bot', name: 'Again' })).body;
      assert.equal((await botRequest(app.http, second, 'GET', '/api/matches/again-match/enrichment')).status, 200);
      const listed = (await app.api('GET', '/api/bots')).body.find((each: { id: string }) => each.id === 'again-bot');
      assert.equal(listed.quota.used, 1);
    });

    it('tampered method is refused', async () => {
      const response = await botRequest(app.http, bot, 'GET', '/api/matches/done/enrichment', undefined, { tamper: { url: '/api/matches/other/enrichment' } });
      assert.equal(response.status, 401);
    });

    it('accepts skew within 300 s both ways and refuses a replayed nonce', async () => {
      const now = Math.floor(Date.now() / 1000);
      assert.equal((await botRequest(app.http, bot, 'GET', '/api/matches/done/enrichment', undefined, { timestamp: now + 295 })).status, 200);
      assert.equal((await botRequest(app.http, bot, 'GET', '/api/matches/done/enrichment', undefined, { timestamp: now - 295 })).status, 200);
      const nonce = 'replay-nonce-0123456789';
      assert.equal((await botRequest(app.http, bot, 'POST', '/api/request-enrichment', { match_id: 'done' }, { nonce })).status, 202);
      // Refused in the request's own write, answered as the bot check answers.
      await expect401('a replayed nonce', botRequest(app.http, bot, 'POST', '/api/request-enrichment', { match_id: 'done' }, { nonce }));
    });

    it('accepts several v1 entries when one matches', async () => {
      const response = await botRequest(app.http, bot, 'GET', '/api/matches/done/enrichment', undefined, { secrets: ['mss_old_wrong', bot.shared_secret] });
      assert.equal(response.status, 200);
    });

    it('keeps the previous secret working for 24 h after a rotation, then refuses it', async () => {
      const rotated = (await app.api('POST', `/api/bots/${bot.id}/rotate-secret`)).body;
      assert.notEqual(rotated.shared_secret, bot.shared_secret);
      const expires = Date.parse(rotated.previous_secret_expires_at) - Date.now();
      assert.ok(expires > 86_390_000 && expires <= 86_400_000);
      assert.equal((await botRequest(app.http, bot, 'GET', '/api/matches/done/enrichment')).status, 200, 'old secret within grace');
      assert.equal((await botRequest(app.http, { id: bot.id, shared_secret: rotated.shared_secret }, 'GET', '/api/matches/done/enrichment')).status, 200);
      // 24 h later: moved back in the database, and the cached copy dropped as its TTL would.
      await app.database.db
        .updateTable('bots')
        .set({ previous_secret_expires_at: new Date(Date.now() - 1000).toISOString() })
        .where('id', '=', bot.id)
        .execute();
      app.enrichment.bots.invalidate(bot.id);
      assert.equal((await botRequest(app.http, bot, 'GET', '/api/matches/done/enrichment')).status, 401, 'old secret after grace');
    });
  });

  describe(`enrichment concurrency (${dialect})`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect);
    });
    after(() => app.cleanup());

    it('50 concurrent requests for 10 matches by one bot enqueue exactly DAILY_QUOTA jobs, each match at most once', async () => {
      const bot = (await app.api('POST', '/api/bots', { id: 'racer', name: 'Racer' })).body;
      for (let i = 0; i < 10; i++) await app.api('POST', '/api/matches', { id: `race-${i}`, status: 'completed', replay: REPLAY });
      const responses = await Promise.all(
        Array.from({ length: 50 }, (_, i) => botRequest(app.http, bot, 'POST', '/api/request-enrichment', { match_id: `race-${i % 10}` })),
      );
      const statuses = responses.map((response) => response.status);
      assert.ok(
        statuses.every((status) => status === 202 || status === 429),
        String(statuses),
      );
      const jobs = await app.database.db.selectFrom('enrichment_jobs').select('match_id').execute();
      assert.equal(jobs.length, DAILY_QUOTA);
      assert.equal(new Set(jobs.map((job) => job.match_id)).size, DAILY_QUOTA);
      const fresh = responses.filter((response) => response.status === 202 && !response.body.duplicate);
      assert.equal(fresh.length, DAILY_QUOTA);
    });
  });

  describe(`enrichment quota across two instances (${dialect})`, () => {
    it('60 concurrent requests of one bot over two instances sharing the database: DAILY_QUOTA jobs, each match once, as many events', async () => {
      const env = await createTestEnv(dialect);
      const first = await startTestApp(dialect, {}, { testEnv: env });
      const second = await startTestApp(dialect, {}, { testEnv: env });
      try {
        const bot = (await first.api('POST', '/api/bots', { id: 'shared', name: 'Shared' })).body;
        for (let i = 0; i < 10; i++) await first.api('POST', '/api/matches', { id: `s-${i}`, status: 'completed', replay: REPLAY });
        const responses = await Promise.all(
          Array.from({ length: 60 }, (_, i) => botRequest((i % 2 ? first : second).http, bot, 'POST', '/api/request-enrichment', { match_id: `s-${i % 10}` })),
        );
        assert.ok(
          responses.every((response) => response.status === 202 || response.status === 429),
          JSON.stringify(responses.map((r) => r.status)),
        );
        const jobs = await first.database.db.selectFrom('enrichment_jobs').select('match_id').execute();
        assert.equal(jobs.length, DAILY_QUOTA);
        assert.equal(new Set(jobs.map((job) => job.match_id)).size, DAILY_QUOTA);
        const fresh = responses.filter((response) => response.status === 202 && !response.body.duplicate);
        assert.deepEqual(
          fresh.map((response) => response.body.match_id).sort(),
          jobs.map((job) => job.match_id).sort(),
          'each job answered as new exactly once',
        );
        const events = await first.database.db.selectFrom('events').select('payload').where('event_type', '=', 'enrichment.requested').execute();
        assert.deepEqual(events.map((event) => JSON.parse(event.payload).detail.match_id).sort(), jobs.map((job) => job.match_id).sort());
      } finally {
        await first.close();
        await second.close();
        await env.cleanup();
      }
    });
  });

  describe(`a stored replay the worker would refuse (${dialect})`, () => {
    let app: TestApp;
    let bot: { id: string; shared_secret: string };
    // What the previous release accepted and today's bound refuses.
    const beyondBound = { players: ['ann', 'bob'], events: [{ t: 2_000_000, type: 'goal', player: 'ann' }] };
    const storeReplay = (id: string, replay: unknown) =>
      app.database.db
        .updateTable('matches')
        .set({ replay: JSON.stringify(replay) })
        .where('id', '=', id)
        .execute();
    const request = (matchId: string, options = {}) => botRequest(app.http, bot, 'POST', '/api/request-enrichment', { match_id: matchId }, options);
    const quotaUsed = async () => (await app.api('GET', '/api/bots')).body.find((entry: { id: string }) => entry.id === bot.id).quota.used;
    const jobCount = async () => (await app.database.db.selectFrom('enrichment_jobs').select('id').execute()).length;
    /** Matches enough to bring the bot to its quota. */
    const fillers = Array.from({ length: DAILY_QUOTA }, (_, i) => `g${i + 1}`);

    before(async () => {
      app = await startTestApp(dialect);
      bot = (await app.api('POST', '/api/bots', { id: 'old-replays', name: 'Old replays' })).body;
      for (const id of ['old', ...fillers]) await app.api('POST', '/api/matches', { id, status: 'completed', replay: REPLAY });
      // Stored by the previous release, which had no bound on event times.
      await storeReplay('old', beyondBound);
    });
    after(() => app.cleanup());

    it('is refused before any quota is used: 400 naming the field, nothing written, the same answer again', async () => {
      for (let attempt = 0; attempt < 2; attempt++) {
        const refused = await request('old', { nonce: 'old-replay-request-nonce' });
        assert.equal(refused.status, 400, JSON.stringify(refused.body));
        assert.equal(refused.headers['content-type'], 'application/problem+json; charset=utf-8');
        assert.equal(refused.body.code, 'replay_invalid');
        assert.deepEqual(refused.body.errors, [{ path: '/replay/events/0/t', message: 'replay.events[0].t must be 0 to 1000000 seconds' }]);
        assert.match(refused.body.detail, /PATCH \/api\/matches\/old/);
      }
      assert.equal(await quotaUsed(), 0);
      assert.equal(await jobCount(), 0);
      assert.equal((await app.api('GET', '/api/matches/old')).body.enrichment_requested_at, null);
      const nonce = await app.database.db.selectFrom('nonces').select('key').where('key', '=', `${bot.id}:old-replay-request-nonce`).executeTakeFirst();
      assert.equal(nonce, undefined, 'not even its nonce');
      // The worker's rule, not the built-in generator's alone: one that reads any replay accepts it.
      assert.equal(replayRefusal(commentaryFor({ url: 'http://127.0.0.1:9', model: 'm', apiKey: null }).rule, beyondBound), null);
      assert.equal(replayRefusal(commentaryFor(null).rule, beyondBound)?.field, '/replay/events/0/t');
    });

    it('a bot at its quota is refused for its quota first; once corrected the request is accepted', async () => {
      for (const id of fillers) assert.equal((await request(id)).status, 202);
      app.enrichment.requests.forgetQuotas();
      const atQuota = await request('old');
      assert.equal(atQuota.status, 429, JSON.stringify(atQuota.body));
      assert.equal(atQuota.body.code, 'quota_exceeded');
      await app.database.db
        .updateTable('enrichment_jobs')
        .set({ enqueued_at: new Date(Date.now() - 25 * 3600_000).toISOString() })
        .execute();
      app.enrichment.requests.forgetQuotas();
      assert.equal((await request('old')).status, 400);
      assert.equal((await app.api('PATCH', '/api/matches/old', { replay: REPLAY })).status, 200);
      const accepted = await request('old');
      assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
      assert.equal(await quotaUsed(), 1);
    });
  });

  describe(`enrichment worker (${dialect})`, () => {
    let app: TestApp;
    let bot: { id: string; shared_secret: string };
    before(async () => {
      app = await startTestApp(dialect, { WORKER: 'embedded', ENRICHMENT_LEASE_MS: '400', ENRICHMENT_RETRY_BASE_MS: '50' }, { start: true });
      bot = (await app.api('POST', '/api/bots', { id: 'worker-bot', name: 'W' })).body;
    });
    after(() => app.cleanup());

    it('writes the commentary and emits enrichment.completed', async () => {
      await app.api('POST', '/api/matches', { id: 'good', status: 'completed', replay: REPLAY });
      assert.equal((await botRequest(app.http, bot, 'POST', '/api/request-enrichment', { match_id: 'good' })).status, 202);
      const status = await eventually(
        async () => {
          const body = (await botRequest(app.http, bot, 'GET', '/api/matches/good/enrichment')).body;
          return body.status === 'completed' ? body : null;
        },
        5000,
        'completed',
      );
      assert.match(status.commentary, /Blue takes it/);
      assert.equal(status.estimated_wait_seconds, 0);
      const match = (await app.api('GET', '/api/matches/good')).body;
      assert.equal(match.enrichment.status, 'completed');
      assert.ok(match.enrichment.completed_at);
      const types = (await app.api('GET', '/api/events')).body.events.map((event: { event_type: string }) => event.event_type);
      assert.deepEqual(types, ['enrichment.requested', 'enrichment.completed']);
    });

    it('retries a failing job up to 3 attempts, then marks it failed with the error', async () => {
      // A replay the API would refuse today, stored after the job was accepted (by an earlier release
      // or another generator's instance): the worker applies the same rule as the request.
      await app.api('POST', '/api/matches', { id: 'broken', status: 'completed', replay: REPLAY });
      await app.enrichment.worker!.stop();
      assert.equal((await botRequest(app.http, bot, 'POST', '/api/request-enrichment', { match_id: 'broken' })).status, 202);
      await app.database.db
        .updateTable('matches')
        .set({ replay: JSON.stringify({ players: 'nobody' }) })
        .where('id', '=', 'broken')
        .execute();
      await app.enrichment.worker!.start();
      const status = await eventually(
        async () => {
          const body = (await app.api('GET', '/api/matches/broken/enrichment')).body;
          return body.status === 'failed' ? body : null;
        },
        5000,
        'failed',
      );
      assert.match(status.error, /replay.players must be a non-empty array/);
      const job = await app.database.db.selectFrom('enrichment_jobs').selectAll().where('match_id', '=', 'broken').executeTakeFirstOrThrow();
      assert.equal(job.attempts, 3);
      const failed = (await app.api('GET', '/api/events')).body.events.filter((event: { event_type: string }) => event.event_type === 'enrichment.failed');
      assert.equal(failed.length, 1);
      assert.equal(failed[0].detail.attempts, 3);
    });

    it('bounds the stored commentary and failure message, whatever the replay quotes', async () => {
      await app.api('POST', '/api/matches', { id: 'wordy', status: 'completed', replay: { ...REPLAY, title: 'T'.repeat(3 * COMMENTARY_LIMIT) } });
      await app.api('POST', '/api/matches', { id: 'wordy-broken', status: 'completed', replay: REPLAY });
      // The request refuses a replay the worker would: this one is broken after it was accepted.
      await app.enrichment.worker!.stop();
      for (const match_id of ['wordy', 'wordy-broken'])
        assert.equal((await botRequest(app.http, bot, 'POST', '/api/request-enrichment', { match_id })).status, 202);
      await app.database.db
        .updateTable('matches')
        .set({ replay: JSON.stringify({ players: ['a'], final_score: { ['s'.repeat(4 * FAILURE_MESSAGE_LIMIT)]: 'many' } }) })
        .where('id', '=', 'wordy-broken')
        .execute();
      await app.enrichment.worker!.start();
      const done = async (id: string, status: string) =>
        eventually(
          async () => {
            const body = (await app.api('GET', `/api/matches/${id}/enrichment`)).body;
            return body.status === status ? body : null;
          },
          5000,
          status,
        );
      const wordy = await done('wordy', 'completed');
      assert.ok(Buffer.byteLength(wordy.commentary) <= COMMENTARY_LIMIT, `${Buffer.byteLength(wordy.commentary)} bytes`);
      assert.ok(wordy.commentary.endsWith('…'));
      const broken = await done('wordy-broken', 'failed');
      assert.ok(Buffer.byteLength(broken.error) <= FAILURE_MESSAGE_LIMIT, `${Buffer.byteLength(broken.error)} bytes`);
      const failed = (await app.api('GET', '/api/events?type=enrichment.failed')).body.events.at(-1);
      assert.equal(failed.detail.error, broken.error);
    });

    it('claims a job again when the worker holding it went silent past its lease', async () => {
      await app.api('POST', '/api/matches', { id: 'orphan', status: 'completed', replay: REPLAY });
      // Stop the embedded worker so a "dead" worker can hold the job.
      await app.enrichment.worker!.stop();
      assert.equal((await botRequest(app.http, bot, 'POST', '/api/request-enrichment', { match_id: 'orphan' })).status, 202);
      const claimed = await app.enrichment.queue.claim('dead-worker');
      assert.equal(claimed?.match_id, 'orphan');
      await app.enrichment.worker!.start();
      const done = await eventually(async () => (await app.api('GET', '/api/matches/orphan/enrichment')).body.status === 'completed', 5000, 'reclaimed');
      assert.ok(done);
      const job = await app.database.db.selectFrom('enrichment_jobs').selectAll().where('match_id', '=', 'orphan').executeTakeFirstOrThrow();
      assert.equal(job.attempts, 2);
      assert.equal(await app.enrichment.queue.complete(claimed!, 'dead-worker', 'late'), false, 'the dead worker cannot overwrite the result');
    });
  });
}

for (const dialect of DIALECTS) {
  describe(`matches at size (${dialect})`, () => {
    let app: TestApp;
    before(async () => (app = await startTestApp(dialect)));
    after(() => app.cleanup());

    it('lists the newest matches through an index, not by sorting every match (a year of matches)', async () => {
      await sql`insert into matches (id, status, created_at)
        select 'match-' || g, 'completed', '2026-01-01T00:00:00.000Z'
        from ${sql.raw(dialect === 'postgres' ? 'generate_series(1, 20000) g' : '(with recursive s(g) as (select 1 union all select g + 1 from s where g < 20000) select g from s)')}`.execute(
        app.database.db,
      );
      for (const id of ['b-newest', 'a-newest']) assert.equal((await app.api('POST', '/api/matches', { id, status: 'scheduled' })).status, 201);
      await sql`analyze`.execute(app.database.db);
      const listed = (await app.api('GET', '/api/matches?limit=3')).body.map((match: { id: string }) => match.id);
      assert.deepEqual(listed.slice(0, 2).sort(), ['a-newest', 'b-newest']);
      assert.equal(listed[2], 'match-1', 'ties in time by id');
      const query = newestMatches(app.database.db, 50).compile();
      const explain = dialect === 'postgres' ? 'explain ' : 'explain query plan ';
      const { rows } = await app.database.db.executeQuery(CompiledQuery.raw(explain + query.sql, [...query.parameters]));
      const plan = rows.map((row) => Object.values(row as object).join(' ')).join('\n');
      if (dialect === 'postgres') assert.doesNotMatch(plan, /Sort|Seq Scan/, plan);
      else assert.doesNotMatch(plan, /TEMP B-TREE|SCAN matches(?! USING)/, plan);
    });
  });
}
