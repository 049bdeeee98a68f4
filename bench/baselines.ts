import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import Fastify from 'fastify';
import { baselineErrors, baselineSchema } from '../src/baselines/schema.js';
import { benchApp, load, type LoadResult } from './harness.js';
import { QUICK, compareRates, fmt, header, ratio, table } from './lib.js';

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

  const amount = QUICK ? 300 : 5000;
  const body = JSON.stringify(valid);
  const { url, close } = await benchApp('sqlite');
  let stored: LoadResult;
  try {
    stored = await load({
      url: `${url}/api/baselines`,
      connections: 10,
      amount,
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer bench-admin-token-0123456789' },
      body,
    });
  } finally {
    await close();
  }
  const route = Fastify();
  route.post(
    '/api/baselines',
    { schema: { body: Object.fromEntries(Object.entries(baselineSchema).filter(([key]) => key !== '$schema' && key !== '$id')) } },
    async (_request, reply) => reply.code(201).send({ id: 1 }),
  );
  const routeUrl = await route.listen({ port: 0, host: '127.0.0.1' });
  const bareRoute = await load({
    url: `${routeUrl}/api/baselines`,
    connections: 10,
    amount,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  await route.close();
  console.log(`POST /api/baselines (SQLite)   ${fmt(stored.rps).padStart(8)} req/s   p50 ${stored.p50} ms   p99 ${stored.p99} ms   non-2xx ${stored.non2xx}`);
  console.log(`bare validating route         ${fmt(bareRoute.rps).padStart(8)} req/s   p50 ${bareRoute.p50} ms   p99 ${bareRoute.p99} ms`);
  ratio('POST /api/baselines vs bare validating route', stored.rps, bareRoute.rps, null);
  if (stored.non2xx || bareRoute.non2xx) throw new Error(`non-2xx answers: ${stored.non2xx} stored, ${bareRoute.non2xx} reference`);
  return validationMet;
}
