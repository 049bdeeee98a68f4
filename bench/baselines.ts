import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import Fastify from 'fastify';
import { baselineErrors, baselineSchema } from '../src/baselines/schema.js';
import { DETECTION_WEIGHT } from '../src/baselines/routes.js';
import { benchApp, load, type LoadResult } from './harness.js';
import { CHECK, QUICK, compareRates, fmt, header, ratio, roundsCompared, table } from './lib.js';

const valid = {
  commit_sha: 'a1b2c3d',
  timestamp: '2026-11-21T22:00:00.000Z',
  subject_geomean: 0.5,
  alpha_geomean: 1.5,
  beta_geomean: 1.0,
  gamma_geomean: 2.0,
  grep_1000_mean_ms: 40,
  throughput_mb_per_sec: 400,
  files_per_sec: 2500,
  total_runtime_sec: 180,
  corpus_size: 1000,
};
const invalid = { ...valid, commit_sha: 'xmain', subject_geomean: -1, extra: true };
const records = [valid, valid, valid, invalid];

/**
 * Records validated per second through our validation (schema file compiled once, errors mapped to
 * JSON pointers) against a bare compiled Ajv validator of the same file; then POST /api/baselines
 * throughput against a bare Fastify route validating the same schema.
 */
export async function benchBaselines(): Promise<boolean> {
  header('Baselines: validation and storage');
  const duration = QUICK ? 300 : 3000;
  const bare = new Ajv2020({ strict: true, allErrors: true });
  addFormats.default(bare);
  const bareValidate = bare.compile(baselineSchema);
  let i = 0;
  const [ours, reference] = await compareRates(
    () => {
      for (let n = 0; n < 100; n++) baselineErrors(records[i++ % 4]);
    },
    () => {
      for (let n = 0; n < 100; n++) bareValidate(records[i++ % 4]);
    },
    duration * 2,
    100,
    // Five rounds, not three: a validation costs under half a microsecond, so a round's best swings
    // with the machine (README.md, "How they measure").
    5,
  );
  table([
    { name: 'mothership validation', value: ours, unit: 'records/s', note: '1 in 4 invalid' },
    { name: 'bare compiled Ajv', value: reference, unit: 'records/s' },
  ]);
  const validationMet = ratio('validation vs bare Ajv', ours, reference, 0.9);

  // Both listen the whole time and alternate over rounds of the same size; each keeps its best.
  const rounds = QUICK ? 1 : CHECK ? 6 : 3;
  // The guard's rounds last two seconds each, however busy the machine.
  const size = QUICK ? { amount: 300 } : CHECK ? { duration: 2 } : { amount: 2000 };
  const body = JSON.stringify(valid);
  const service = await benchApp('sqlite');
  // A CI job pushes with a token of scope `ci`, as docs/baselines.md tells it to.
  const token = await service.token('ci');
  const route = Fastify();
  route.post(
    '/api/baselines',
    { schema: { body: Object.fromEntries(Object.entries(baselineSchema).filter(([key]) => key !== '$schema' && key !== '$id')) } },
    async (_request, reply) => reply.code(201).send({ id: 1 }),
  );
  const routeUrl = await route.listen({ port: 0, host: '127.0.0.1' });
  const storedRounds: LoadResult[] = [];
  const bareRounds: LoadResult[] = [];
  try {
    for (let round = 0; round < rounds; round++) {
      storedRounds.push(
        await load({
          url: `${service.url}/api/baselines`,
          connections: 10,
          ...size,
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body,
        }),
      );
      bareRounds.push(
        await load({ url: `${routeUrl}/api/baselines`, connections: 10, ...size, method: 'POST', headers: { 'content-type': 'application/json' }, body }),
      );
    }
  } finally {
    await route.close();
    await service.close();
  }
  const best = (results: LoadResult[]) => results.reduce((a, b) => (b.rps > a.rps ? b : a));
  const stored = best(storedRounds);
  const bareRoute = best(bareRounds);
  console.log(
    `POST /api/baselines (SQLite)   ${fmt(stored.rps).padStart(8)} req/s   p50 ${stored.p50} ms   p99 ${stored.p99} ms   non-2xx ${stored.non2xx}   ${fmt(stored.perCpuSecond)} per CPU second`,
  );
  console.log(
    `bare validating route         ${fmt(bareRoute.rps).padStart(8)} req/s   p50 ${bareRoute.p50} ms   p99 ${bareRoute.p99} ms   ${fmt(bareRoute.perCpuSecond)} per CPU second`,
  );
  const storedMet = ratio('POST /api/baselines vs bare validating route', ...roundsCompared(storedRounds, bareRounds), 0.3);
  if ([...storedRounds, ...bareRounds].some((result) => result.non2xx)) throw new Error('non-2xx answers');
  await benchPages();
  return validationMet && storedMet;
}

/**
 * What a page of 500 runs with their verdicts costs the service against the same page without
 * (CPU per page): the rate limiter charges it DETECTION_WEIGHT times as much, which this keeps honest.
 * A history of 600 runs, a new commit every other run, as CI re-runs a commit now and then.
 */
async function benchPages(): Promise<void> {
  const service = await benchApp('sqlite');
  try {
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${await service.token('ci')}` };
    for (let run = 0; run < 600; run++) {
      const record = {
        ...valid,
        commit_sha: `c0ffee${String(run >> 1).padStart(4, '0')}`,
        timestamp: new Date(Date.UTC(2026, 0, 1, 0, run)).toISOString(),
        subject_geomean: 0.5 * (1 + 0.02 * Math.sin(run)),
      };
      const pushed = await fetch(`${service.url}/api/baselines`, { method: 'POST', headers, body: JSON.stringify(record) });
      if (pushed.status !== 201) throw new Error(`push answered ${pushed.status}`);
    }
    const page = (query: string, amount: number) => load({ url: `${service.url}/api/baselines?${query}`, connections: 1, amount, headers });
    const plain: LoadResult[] = [];
    const verdicts: LoadResult[] = [];
    for (let round = 0; round < (QUICK ? 1 : 3); round++) {
      plain.push(await page('limit=500', QUICK ? 10 : 200));
      verdicts.push(await page('limit=500&detection=true', QUICK ? 2 : 20));
    }
    if ([...plain, ...verdicts].some((result) => result.non2xx)) throw new Error('non-2xx answers');
    const best = (results: LoadResult[]) => Math.max(...results.map((result) => result.perCpuSecond));
    console.log(`GET /api/baselines?limit=500                  ${fmt(best(plain)).padStart(6)} pages per CPU second`);
    console.log(`GET /api/baselines?limit=500&detection=true   ${fmt(best(verdicts)).padStart(6)} pages per CPU second`);
    console.log(`a page with verdicts costs ${fmt(best(plain) / best(verdicts), 1)} pages without; the limiter charges ${DETECTION_WEIGHT}`);
  } finally {
    await service.close();
  }
}
