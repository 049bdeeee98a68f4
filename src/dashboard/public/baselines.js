// Baselines: the run history, one small chart per metric, and a comparison of any two runs, chosen in the page
// (#/baselines/<base id>..<head id>; the last two by default).
import { api, loadView } from './api.js';
import { $, dateTime, debounce, el, emptyState, row } from './dom.js';
import { lineChart } from './chart.js';

let runs = null;
let stale = false;
let pair = null; // [base id, head id] from the route

const isOpen = () => !$('#view-baselines').hidden;

export const baselines = {
  id: 'baselines',
  async show(params = []) {
    const match = /^(\d+)\.\.(\d+)$/.exec(params[0] ?? '');
    pair = match ? [Number(match[1]), Number(match[2])] : null;
    if (!runs || stale) await load();
    else await compare();
  },
  apply(event) {
    if (event.event_type !== 'baseline.recorded') return;
    if (isOpen()) reload();
    else stale = true;
  },
};

const reload = debounce(() => loadView('baselines', load), 300, 2000);

async function load() {
  runs = (await api('GET', '/api/baselines?limit=200&detection=true')).reverse();
  stale = false;
  drawCharts();
  await compare();
}

/** Every figure of a record, each charted on its own axis: the comparison tools' seconds would flatten the subject's. */
const METRICS = [
  { field: 'subject_geomean', unit: 's', title: 'Subject extraction (geometric mean)', color: '#1f8a7c' },
  { field: 'grep_1000_mean_ms', unit: 'ms', title: 'Search, 1000 files (mean)', color: '#4a78a8' },
  { field: 'throughput_mb_per_sec', unit: 'MB/s', title: 'Search throughput', color: '#4a78a8' },
  { field: 'files_per_sec', unit: 'files/s', title: 'Search rate', color: '#4a78a8' },
  { field: 'total_runtime_sec', unit: 's', title: 'Whole suite, wall clock', color: '#6b7a8f' },
  { field: 'alpha_geomean', unit: 's', title: 'alpha extraction (comparison tool)', color: '#3b6fb6' },
  { field: 'beta_geomean', unit: 's', title: 'beta extraction (comparison tool)', color: '#b7791f' },
  { field: 'gamma_geomean', unit: 's', title: 'gamma extraction (comparison tool)', color: '#8e44ad' },
];
// A record's commit_url is http(s) by the schema; checked again here, since it becomes a link.
const commitLink = (run) => (/^https?:\/\//.test(run.record.commit_url ?? '') ? run.record.commit_url : null);

function drawCharts() {
  const labels = runs.map((run) => run.record.commit_sha.slice(0, 7));
  const verdict = (run, field) => run.detection?.fields.find((entry) => entry.field === field);
  const figures = METRICS.filter(({ field }) => runs.some((run) => typeof run.record[field] === 'number')).map(({ field, unit, title, color }) => {
    const chart = el('div', { class: 'chart small', role: 'img', 'aria-label': `${title} per baseline run, in ${unit}` });
    const figure = el('figure', { class: 'metric-chart', 'data-metric': field }, [el('figcaption', {}, [`${title}, ${unit} `, el('code', {}, field)]), chart]);
    return { figure, chart, field, unit, color };
  });
  $('#baseline-charts').replaceChildren(
    ...(figures.length ? figures.map(({ figure }) => figure) : [emptyState('p', 'No baselines recorded yet: push one from CI with mothership baseline push.')]),
  );
  for (const { chart, field, unit, color } of figures) {
    const titles = runs.map((run) => {
      const judged = verdict(run, field);
      return [
        `${run.record.commit_sha} · ${dateTime(run.record.timestamp)}`,
        `${field}: ${run.record[field] ?? '-'} ${unit}`,
        ...(judged ? [judged.method !== 'none' ? `${judged.regression ? 'REGRESSION: ' : ''}${judged.reason}` : 'no history yet'] : []),
        ...(commitLink(run) ? ['Open: the commit'] : []),
      ].join('\n');
    });
    lineChart(chart, {
      labels,
      legend: false,
      series: [
        {
          name: field,
          color,
          values: runs.map((run) => (typeof run.record[field] === 'number' ? run.record[field] : null)),
          band: runs.map((run) => verdict(run, field)?.band ?? null),
          marks: runs.map((run) => Boolean(verdict(run, field)?.regression)),
          titles,
          links: runs.map(commitLink),
        },
      ],
    });
  }
  const latest = runs.at(-1)?.detection;
  $('#detection-verdict').textContent =
    !latest || latest.method === 'none'
      ? ''
      : latest.regressed
        ? `Latest run regressed against its history: ${latest.regressions.join(', ')}`
        : (latest.note ??
          `Latest run within its history's noise band (${latest.runs_considered} earlier commits, ±${latest.z_threshold} standard deviations, threshold ${latest.threshold_pct}%).`);
}

const runLabel = (run) => `${run.record.commit_sha.slice(0, 7)} · ${dateTime(run.record.timestamp)}`;

async function compare() {
  const body = $('#comparison tbody');
  const [baseSelect, headSelect] = [$('#compare-base'), $('#compare-head')];
  if (runs.length < 2) {
    body.replaceChildren(emptyState('tr', 'Record two baselines to compare them (for example with mothership baseline push from CI).', 4));
    $('#comparison-verdict').textContent = '';
    baseSelect.replaceChildren();
    headSelect.replaceChildren();
    return;
  }
  const known = (id) => runs.some((run) => run.id === id);
  const [base, head] = pair && known(pair[0]) && known(pair[1]) ? pair : [runs.at(-2).id, runs.at(-1).id];
  // Newest first: the runs one usually compares are at the top.
  const options = (chosen) => [...runs].reverse().map((run) => el('option', { value: run.id, selected: run.id === chosen }, runLabel(run)));
  baseSelect.replaceChildren(...options(base));
  headSelect.replaceChildren(...options(head));
  const comparison = await api('GET', `/api/baselines/compare?base=${base}&head=${head}`);
  const latestPair = base === runs.at(-2).id && head === runs.at(-1).id;
  const against = latestPair ? 'Against the previous run' : `${comparison.base.commit_sha.slice(0, 7)} → ${comparison.head.commit_sha.slice(0, 7)}`;
  $('#comparison-verdict').textContent = comparison.regressed
    ? `${against}: beyond ${comparison.threshold_pct}% on ${comparison.regressions.join(', ')}`
    : `${against}: nothing beyond ${comparison.threshold_pct}% (${comparison.base.commit_sha} → ${comparison.head.commit_sha})`;
  const pct = (value) => (value === null ? '-' : `${value > 0 ? '+' : ''}${value.toFixed(1)}%`);
  const line = (entry, label) =>
    row({ class: entry.regression ? 'regression' : undefined }, [
      ['Metric', label],
      ['Base', entry.base, 'num'],
      ['Head', entry.head, 'num'],
      ['Change', pct(entry.change_pct), 'num'],
    ]);
  // One replacement after the await: two loads overlapping (a view switch and an event) must not both append.
  body.replaceChildren(
    ...comparison.metrics.filter((entry) => entry.status !== 'missing').map((metric) => line(metric, `${metric.field} (${metric.unit})`)),
    ...comparison.speedups.filter((entry) => entry.status !== 'missing').map((speedup) => line(speedup, `speedup vs ${speedup.tool} (×)`)),
  );
}

// Choosing a run is a navigation: the comparison gets its own address, and Back returns to the previous one.
for (const select of ['#compare-base', '#compare-head']) {
  $(select).addEventListener('change', () => {
    location.hash = `#/baselines/${$('#compare-base').value}..${$('#compare-head').value}`;
  });
}
