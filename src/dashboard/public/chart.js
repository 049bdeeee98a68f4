// A small dependency-free SVG line chart (and `node`, the SVG element helper the timeline shares): one x axis (run index, labelled by commit), several series.
const NS = 'http://www.w3.org/2000/svg';

export function node(name, attributes = {}, text) {
  const element = document.createElementNS(NS, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, String(value));
  if (text !== undefined) element.textContent = text;
  return element;
}

function niceMax(value) {
  if (value <= 0) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  return (Math.ceil((value / magnitude) * 2) / 2) * magnitude;
}

/**
 * A series may carry, per point, a noise band (`band`: [low, high] or null, drawn shaded), a
 * regression mark (`marks`: true draws a red ring) and a text shown when the point is hovered,
 * tapped or focused (`titles`).
 * @param {HTMLElement} container
 * @param {{labels: string[], series: {name: string, color: string, values: (number|null)[], band?: ([number, number]|null)[], marks?: boolean[], titles?: string[]}[], unit: string}} data
 */
export function lineChart(container, { labels, series, unit }) {
  container.replaceChildren();
  const width = Math.max(container.clientWidth, 300);
  const height = Math.max(container.clientHeight, 160);
  const svg = node('svg', { viewBox: `0 0 ${width} ${height}`, 'data-points': labels.length });
  container.append(svg);
  const visible = series.filter((line) => line.values.some((value) => value !== null));
  if (labels.length === 0 || visible.length === 0) {
    svg.append(node('text', { x: width / 2, y: height / 2, 'text-anchor': 'middle', class: 'empty' }, 'No baselines recorded yet'));
    return;
  }
  const pad = { left: 56, right: 12, top: 26, bottom: 28 };
  const plotWidth = width - pad.left - pad.right;
  const plotHeight = height - pad.top - pad.bottom;
  const max = niceMax(
    Math.max(...visible.flatMap((line) => [...line.values, ...(line.band ?? []).map((band) => band?.[1] ?? null)].filter((value) => value !== null))),
  );
  const x = (index) => pad.left + (labels.length === 1 ? plotWidth / 2 : (index / (labels.length - 1)) * plotWidth);
  const y = (value) => pad.top + plotHeight - (value / max) * plotHeight;

  for (let step = 0; step <= 4; step++) {
    const value = (max / 4) * step;
    svg.append(node('line', { x1: pad.left, x2: width - pad.right, y1: y(value), y2: y(value), class: 'axis' }));
    svg.append(
      node('text', { x: pad.left - 6, y: y(value) + 4, 'text-anchor': 'end', class: 'tick' }, `${+value.toPrecision(3)}${step === 4 ? ' ' + unit : ''}`),
    );
  }
  const every = Math.max(1, Math.ceil(labels.length / Math.max(1, Math.floor(plotWidth / 70))));
  labels.forEach((label, index) => {
    if (index % every === 0 || index === labels.length - 1)
      svg.append(node('text', { x: x(index), y: height - 8, 'text-anchor': 'middle', class: 'tick' }, label));
  });

  let legendX = pad.left;
  for (const line of visible) {
    // The noise band first, under the line: the upper edge left to right, the lower edge back.
    const banded = (line.band ?? []).map((band, index) => (band ? { index, band } : null)).filter(Boolean);
    if (banded.length > 1) {
      const outline = [
        ...banded.map(({ index, band }) => `${x(index).toFixed(1)},${y(band[1]).toFixed(1)}`),
        ...banded.reverse().map(({ index, band }) => `${x(index).toFixed(1)},${y(Math.max(0, band[0])).toFixed(1)}`),
      ];
      svg.append(node('polygon', { points: outline.join(' '), fill: line.color, 'fill-opacity': 0.12, stroke: 'none', 'data-band': line.name }));
    }
    const points = line.values.map((value, index) => (value === null ? null : [x(index), y(value)]));
    const path = points.reduce((d, point, index) => (point ? `${d}${d && points[index - 1] ? 'L' : 'M'}${point[0].toFixed(1)},${point[1].toFixed(1)}` : d), '');
    svg.append(node('path', { d: path, fill: 'none', stroke: line.color, 'stroke-width': 2, 'data-series': line.name }));
    points.forEach((point, index) => {
      if (!point) return;
      if (line.marks?.[index])
        svg.append(node('circle', { cx: point[0], cy: point[1], r: 7, fill: 'none', stroke: 'var(--bad)', 'stroke-width': 2, 'data-regression': line.name }));
      // A wide transparent stroke makes the dot easy to hit with a finger.
      const dot = node('circle', { cx: point[0], cy: point[1], r: 4, fill: line.color, stroke: 'transparent', 'stroke-width': 12 });
      if (line.titles?.[index]) {
        dot.dataset.tip = line.titles[index];
        dot.setAttribute('tabindex', '0');
        dot.setAttribute('aria-label', line.titles[index]);
      }
      svg.append(dot);
    });
    svg.append(node('rect', { x: legendX, y: 6, width: 10, height: 10, fill: line.color, rx: 2 }));
    svg.append(node('text', { x: legendX + 14, y: 15, class: 'legend' }, line.name));
    legendX += 24 + line.name.length * 7;
  }
  attachTip(container, svg);
}

/** One tooltip per chart, next to the point under the pointer (or focused): the browser's own title tip is slow and never shows on touch. */
function attachTip(container, svg) {
  const tip = document.createElement('div');
  tip.className = 'chart-tip';
  tip.hidden = true;
  container.append(tip);
  const show = (event) => {
    const dot = event.target.closest?.('[data-tip]');
    if (!dot) {
      tip.hidden = true;
      return;
    }
    tip.textContent = dot.dataset.tip;
    tip.hidden = false;
    const box = container.getBoundingClientRect();
    const at = dot.getBoundingClientRect();
    const left = at.left + at.width / 2 - box.left;
    // Keep it inside the chart: flip to the left of the point in the right half.
    tip.style.left = `${left < box.width / 2 ? left + 12 : left - 12 - tip.offsetWidth}px`;
    tip.style.top = `${Math.max(0, at.top - box.top - tip.offsetHeight - 6)}px`;
  };
  svg.addEventListener('pointerover', show);
  svg.addEventListener('focusin', show);
  svg.addEventListener('pointerleave', () => (tip.hidden = true));
  svg.addEventListener('focusout', () => (tip.hidden = true));
}
