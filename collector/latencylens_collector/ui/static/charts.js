// Dependency-free charts: labelled stacked bars (HTML) and line charts with end labels (SVG).
import { COMPONENTS, DESCRIPTIONS, LABELS } from "./components.js";
import { h, s } from "./dom.js";
import { dur, pct, when } from "./format.js";

// Bars read left to right like time: a model call's wait before its first token (queue, prefill,
// model-unattributed) comes before decode.
const BAR_ORDER = ["retrieval", "tool", "app_other", "network", "queue", "prefill", "model_unattributed", "inference", "decode", "server_other"];

// One bar of a request's components. `scale` (0..1) shrinks the bar to compare rows; segments
// carry their own labels when wide enough, and a tooltip always.
export function stackedBar(parts, { total, scale = 1, tall = false, format = dur, shares = false } = {}) {
  const sum = total || COMPONENTS.reduce((acc, name) => acc + (parts[name] || 0), 0);
  const bar = h("div", { class: tall ? "stack tall" : "stack", style: { width: `${Math.max(scale, 0.002) * 100}%` } });
  if (!sum) return bar;
  for (const name of [...BAR_ORDER, ...COMPONENTS.filter((c) => !BAR_ORDER.includes(c))]) {
    const value = parts[name] || 0;
    if (value <= 0) continue;
    const share = value / sum;
    const effective = share * scale;
    const shown = shares ? pct(share) : format(value);
    // A phone's bar is a quarter of a laptop's: a label needs a larger share to fit. fitLabels()
    // then shortens or drops any label the drawn segment still cannot hold.
    const room = window.matchMedia("(max-width: 700px)").matches ? 3.2 : 1;
    let label = "";
    if (effective >= (tall ? 0.1 : 0.2) * room) label = `${LABELS[name]} ${shown}`;
    else if (effective >= (tall ? 0.045 : 0.09) * room) label = LABELS[name];
    bar.append(h("span", {
      class: `seg c-${name}`,
      "data-component": name,
      "data-short": LABELS[name],
      title: `${LABELS[name]}: ${shown}${shares ? "" : ` (${pct(share)})`} — ${DESCRIPTIONS[name]}`,
      style: { width: `${share * 100}%` },
      text: label,
    }));
  }
  return bar;
}

// Labels on bars never show cut: once the page is laid out, a label wider than its segment becomes
// the part's name alone (data-short), and if that does not fit either, nothing (the tooltip stays).
// Reads are batched so a long table is laid out three times, not once per segment.
export function fitLabels(root) {
  const overflowing = (els) => els.filter((el) => el.textContent && el.scrollWidth > el.clientWidth + 1);
  const shorten = overflowing([...root.querySelectorAll(".seg, .wf-bar > span")]);
  for (const el of shorten) el.textContent = el.dataset.short && el.textContent !== el.dataset.short ? el.dataset.short : "";
  for (const el of overflowing(shorten)) el.textContent = "";
}

// A small key for components that appear; most segments are labelled on the bar itself.
export function componentKey(present) {
  return h("div", { class: "key" },
    COMPONENTS.filter((name) => !present || present.has(name)).map((name) =>
      h("span", { title: DESCRIPTIONS[name] }, h("span", { class: `chip c-${name}` }), LABELS[name])));
}

function niceMax(value) {
  if (!(value > 0)) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) {
    if (step * magnitude >= value) return step * magnitude;
  }
  return 10 * magnitude;
}

// Axis labels in UTC like every time on the page ("09:15 UTC", or "05-01 09:15 UTC" over days).
function timeLabel(ms, spanMs) {
  const text = new Date(ms).toISOString();
  return `${spanMs > 2 * 86400e3 ? `${text.slice(5, 10)} ` : ""}${text.slice(11, 16)} UTC`;
}

// series: [{name, points: [[timeMs, value|null], ...]}]. Lines are labelled at their last point.
export function lineChart(series, { format = dur, title = "" } = {}) {
  // A phone gets a narrower drawing, so its text stays at its size when the SVG scales to the card.
  const narrow = window.matchMedia("(max-width: 700px)").matches;
  const width = narrow ? 380 : 640, height = 230, left = 58, right = narrow ? 92 : 110, top = 22, bottom = 26;
  const plotW = width - left - right, plotH = height - top - bottom;
  const points = series.flatMap((one) => one.points.filter((p) => p[1] !== null && p[1] !== undefined));
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title });
  if (!points.length) {
    svg.append(s("text", { x: left, y: height / 2, text: "no data in this window" }));
    return svg;
  }
  const t0 = Math.min(...points.map((p) => p[0]));
  const t1 = Math.max(...points.map((p) => p[0]));
  const yMax = niceMax(Math.max(...points.map((p) => p[1])) * 1.05);
  const x = (t) => left + (t1 === t0 ? plotW / 2 : ((t - t0) / (t1 - t0)) * plotW);
  const y = (v) => top + plotH - (v / yMax) * plotH;
  for (let i = 0; i <= 4; i += 1) {
    const value = (yMax * i) / 4;
    svg.append(s("line", { class: "gridline", x1: left, x2: left + plotW, y1: y(value), y2: y(value) }));
    svg.append(s("text", { x: left - 6, y: y(value) + 4, "text-anchor": "end", text: format(value) }));
  }
  const ticks = t1 === t0 ? [t0] : [t0, (t0 + t1) / 2, t1];
  ticks.forEach((t, i) => svg.append(s("text", {
    x: x(t), y: height - 8, "text-anchor": ticks.length === 1 ? "middle" : ["start", "middle", "end"][i], text: timeLabel(t, t1 - t0),
  })));
  const labels = [];
  series.forEach((one, index) => {
    const valid = one.points.filter((p) => p[1] !== null && p[1] !== undefined).sort((a, b) => a[0] - b[0]);
    if (!valid.length) return;
    const cls = `s${index % 4}`;
    if (valid.length === 1) {
      svg.append(s("circle", { class: `series ${cls}`, cx: x(valid[0][0]), cy: y(valid[0][1]), r: 3 }));
    } else {
      const d = valid.map((p, i) => `${i ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ");
      svg.append(s("path", { class: `series ${cls}`, d, "data-series": one.name }));
    }
    const last = valid[valid.length - 1];
    labels.push({ y: y(last[1]), text: `${one.name} ${format(last[1])}`, cls });
  });
  // Keep end labels 13 px apart so they stay readable when lines meet.
  labels.sort((a, b) => a.y - b.y);
  for (let i = 1; i < labels.length; i += 1) labels[i].y = Math.max(labels[i].y, labels[i - 1].y + 13);
  for (const label of labels) {
    svg.append(s("text", { class: `series-label ${label.cls}`, x: left + plotW + 6, y: label.y + 4, text: label.text }));
  }
  hoverTargets(svg, series, { x, format, left, top, plotW, plotH });
  return svg;
}

// Hover (or keyboard focus) on a bucket shows every series' value there: a native tooltip (<title>)
// and a readout line at the top of the chart. Each bucket is a focusable band, named for screen readers.
function hoverTargets(svg, series, { x, format, left, top, plotW, plotH }) {
  const times = [...new Set(series.flatMap((one) => one.points.filter((p) => p[1] !== null && p[1] !== undefined).map((p) => p[0])))].sort((a, b) => a - b);
  if (!times.length) return;
  const readout = s("text", { class: "readout", x: left + 4, y: top + 10, "data-readout": "" });
  const marker = s("line", { class: "hover-line", x1: 0, x2: 0, y1: top, y2: top + plotH, visibility: "hidden" });
  svg.append(marker);
  times.forEach((t, i) => {
    const values = series.map((one) => {
      const point = one.points.find((p) => p[0] === t && p[1] !== null && p[1] !== undefined);
      return point ? `${one.name} ${format(point[1])}` : null;
    }).filter(Boolean);
    const text = `${when(t, { short: true })}: ${values.join(", ")}`;
    const from = i === 0 ? left : (x(times[i - 1]) + x(t)) / 2;
    const to = i === times.length - 1 ? left + plotW : (x(t) + x(times[i + 1])) / 2;
    const band = s("rect", {
      class: "hover-band", x: Math.min(from, x(t) - 4), y: top, width: Math.max(to - from, 8), height: plotH,
      tabindex: "0", role: "img", "aria-label": text, "data-time": new Date(t).toISOString(), "data-values": text,
    }, s("title", { text }));
    const show = () => {
      readout.textContent = text;
      marker.setAttribute("x1", x(t)); marker.setAttribute("x2", x(t)); marker.setAttribute("visibility", "visible");
    };
    const hide = () => { readout.textContent = ""; marker.setAttribute("visibility", "hidden"); };
    band.addEventListener("mouseenter", show);
    band.addEventListener("focus", show);
    band.addEventListener("mouseleave", hide);
    band.addEventListener("blur", hide);
    svg.append(band);
  });
  svg.append(readout);
}
