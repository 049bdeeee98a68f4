// A small dependency-free SVG line chart (and `node`, the SVG element helper the timeline shares): one x axis (run index, labelled by commit), several series.
const NS = 'http://www.w3.org/2000/svg';

export function node(name, attributes = {}, text) {
  const element = document.createElementNS(NS, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, String(value));
  if (text !== undefined) element.textContent = text;
  return element;
}

/** A step of 1, 2, 2.5 or 5 times a power of ten, near a quarter of the span: four or five gridlines. */
function niceStep(span) {
  const raw = span / 4;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 2.5, 5, 10].map((factor) => factor * magnitude).find((step) => step >= raw);
}

/**
 * The y range around the data, not from zero: each chart has its own axis, so a 20% step fills a
 * good part of it instead of being a bump on a scale set by the largest series.
 */
function niceRange(values) {
  const low = Math.min(...values);
  const high = Math.max(...values);
  // At least 10% of the values' size in view: a 0.5% wobble of a steady metric stays a wobble.
  const margin = Math.max((high - low) * 0.15, (Math.abs(high) * 0.1 - (high - low)) / 2) || 1;
  const step = niceStep(high - low + 2 * margin);
  // Never below zero for figures that cannot be negative.
  const min = Math.max(low >= 0 ? 0 : -Infinity, Math.floor((low - margin) / step) * step);
  return { min, max: Math.ceil((high + margin) / step) * step, step };
}

/** At most as many evenly spread label indices (the first and the last among them) as fit `room` pixels apart. */
function tickIndices(count, plotWidth, room) {
  const fit = Math.max(1, Math.min(count, Math.floor(plotWidth / room) + 1));
  if (fit === 1) return [count - 1];
  return [...new Set(Array.from({ length: fit }, (_, tick) => Math.round((tick * (count - 1)) / (fit - 1))))];
}

/**
 * A series may carry, per point, a noise band (`band`: [low, high] or null, drawn shaded), a
 * regression mark (`marks`: true draws a red ring), a text shown when the point is hovered,
 * tapped or focused (`titles`) and a page the point opens (`links`, http(s) only).
 * @param {HTMLElement} container
 * @param {{labels: string[], series: {name: string, color: string, values: (number|null)[], band?: ([number, number]|null)[], marks?: boolean[], titles?: string[], links?: (string|null)[]}[], legend?: boolean}} data (the caption beside the chart names the unit)
 */
export function lineChart(container, { labels, series, legend = true }) {
  container.replaceChildren();
  const width = Math.max(container.clientWidth, 280);
  const height = Math.max(container.clientHeight, 160);
  const svg = node('svg', { viewBox: `0 0 ${width} ${height}`, 'data-points': labels.length });
  container.append(svg);
  const visible = series.filter((line) => line.values.some((value) => value !== null));
  if (labels.length === 0 || visible.length === 0) {
    svg.append(node('text', { x: width / 2, y: height / 2, 'text-anchor': 'middle', class: 'empty' }, 'No baselines recorded yet'));
    return;
  }
  const pad = { left: 56, right: 14, top: legend ? 26 : 10, bottom: 28 };
  const plotWidth = width - pad.left - pad.right;
  const plotHeight = height - pad.top - pad.bottom;
  const range = niceRange(
    // A band's lower edge below zero is drawn at zero (the figures cannot be negative), so the axis stops there too.
    visible.flatMap((line) =>
      [...line.values, ...(line.band ?? []).flatMap((band) => (band ? [Math.max(0, band[0]), band[1]] : []))].filter(
        (value) => value !== null && Number.isFinite(value),
      ),
    ),
  );
  svg.dataset.yMin = range.min;
  svg.dataset.yMax = range.max;
  const x = (index) => pad.left + (labels.length === 1 ? plotWidth / 2 : (index / (labels.length - 1)) * plotWidth);
  const y = (value) => pad.top + plotHeight - ((Math.min(Math.max(value, range.min), range.max) - range.min) / (range.max - range.min)) * plotHeight;

  const steps = Math.round((range.max - range.min) / range.step);
  for (let step = 0; step <= steps; step++) {
    const value = range.min + range.step * step;
    svg.append(node('line', { x1: pad.left, x2: width - pad.right, y1: y(value), y2: y(value), class: 'axis' }));
    svg.append(node('text', { x: pad.left - 6, y: y(value) + 4, 'text-anchor': 'end', class: 'tick' }, String(+value.toPrecision(4))));
  }
  // A short commit is about 50 px at 11 px: 72 px apart keeps neighbours clear on a phone.
  for (const index of tickIndices(labels.length, plotWidth, 72))
    svg.append(node('text', { x: x(index), y: height - 8, 'text-anchor': 'middle', class: 'tick x-tick' }, labels[index]));

  let legendX = pad.left;
  for (const line of visible) {
    // The noise band first, under the line: the upper edge left to right, the lower edge back.
    const banded = (line.band ?? []).map((band, index) => (band ? { index, band } : null)).filter(Boolean);
    if (banded.length > 1) {
      const outline = [
        ...banded.map(({ index, band }) => `${x(index).toFixed(1)},${y(band[1]).toFixed(1)}`),
        ...banded.reverse().map(({ index, band }) => `${x(index).toFixed(1)},${y(band[0]).toFixed(1)}`),
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
      const dot = node('circle', { cx: point[0], cy: point[1], r: 4, fill: line.color, stroke: 'transparent', 'stroke-width': 12, 'data-point': line.name });
      const link = line.links?.[index];
      // A linked point is the link itself (focusable, Enter opens it); any other titled point is focusable on its own.
      const target = link ? node('a', { href: link, target: '_blank', rel: 'noopener' }) : dot;
      if (link) target.append(dot);
      if (line.titles?.[index]) {
        target.dataset.tip = line.titles[index];
        target.setAttribute('aria-label', line.titles[index]);
        if (!link) target.setAttribute('tabindex', '0');
      }
      svg.append(target);
    });
    if (!legend) continue;
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
    // Keep it inside the chart: to the left of the point in the right half, and never past either edge (a phone's chart is narrower than a tip).
    const wanted = left < box.width / 2 ? left + 12 : left - 12 - tip.offsetWidth;
    tip.style.left = `${Math.max(0, Math.min(wanted, box.width - tip.offsetWidth))}px`;
    tip.style.top = `${Math.max(0, at.top - box.top - tip.offsetHeight - 6)}px`;
  };
  svg.addEventListener('pointerover', show);
  svg.addEventListener('focusin', show);
  svg.addEventListener('pointerleave', () => (tip.hidden = true));
  svg.addEventListener('focusout', () => (tip.hidden = true));
  // On a touch screen the first tap on a linked point shows its tip; a second tap opens the link.
  let touch = false;
  svg.addEventListener('pointerdown', (event) => (touch = event.pointerType === 'touch'));
  let shown = null;
  svg.addEventListener('click', (event) => {
    const link = event.target.closest?.('a[data-tip]');
    if (!link) return;
    if (touch && shown !== link) {
      event.preventDefault();
      show({ target: link });
    }
    shown = link;
  });
}
