// Components over time: the aggregate form of a request's bar. One column per time bucket, split
// into each part's share of the end-to-end time of the bucket's requests (critical path, summed in
// the service by /api/stats); hover or focus a column for every part's share and p95. Filters by
// route, model and provider redraw it in place.
import { getJSON, errorText } from "./api.js";
import { COMPONENTS, LABELS } from "./components.js";
import { h, s } from "./dom.js";
import { dur, pct, when } from "./format.js";

const FILTERS = ["route", "model", "provider"];

// Every part of a bucket, largest share first: its share and its p95 (the tooltip), or the first
// `limit` of them (the readout line above the chart).
function readout(group, limit = COMPONENTS.length, p95 = true) {
  const parts = COMPONENTS.filter((name) => (group.components[name] || {}).share > 0)
    .sort((a, b) => group.components[b].share - group.components[a].share)
    .slice(0, limit)
    .map((name) => `${LABELS[name]} ${pct(group.components[name].share)}${p95 ? ` (p95 ${dur(group.components[name].p95)})` : ""}`);
  return `${when(group.bucket_start, { short: true })}, ${group.count} requests: ${parts.join(", ") || "no time"}`;
}

function columns(groups) {
  const buckets = groups.filter((g) => g.bucket_start && g.count > 0).sort((a, b) => Date.parse(a.bucket_start) - Date.parse(b.bucket_start));
  const narrow = window.matchMedia("(max-width: 700px)").matches;
  const width = narrow ? 380 : 640, height = 220, left = 40, right = 8, top = 26, bottom = 24;
  const plotW = width - left - right, plotH = height - top - bottom;
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "Share of end-to-end time per part over time" });
  if (!buckets.length) {
    svg.append(s("text", { x: left, y: height / 2, text: "no data in this window" }));
    return svg;
  }
  for (const share of [0, 0.5, 1]) {
    const y = top + plotH - share * plotH;
    svg.append(s("line", { class: "gridline", x1: left, x2: left + plotW, y1: y, y2: y }));
    svg.append(s("text", { x: left - 6, y: y + 4, "text-anchor": "end", text: pct(share) }));
  }
  const step = plotW / buckets.length;
  const line = s("text", { class: "readout", x: left, y: 14, text: "Hover or focus a column for its parts." });
  buckets.forEach((group, index) => {
    const x = left + index * step;
    const column = s("g", { class: "bucket", tabindex: 0, "data-bucket": group.bucket_start, "aria-label": readout(group) },
      s("title", { text: readout(group) }));
    let y = top + plotH;
    for (const name of COMPONENTS) {
      const share = (group.components[name] || {}).share || 0;
      if (share <= 0) continue;
      y -= share * plotH;
      column.append(s("rect", { class: `c-${name}`, "data-component": name, x: x + step * 0.08, y, width: Math.max(step * 0.84, 1), height: share * plotH }));
    }
    const show = () => { line.textContent = readout(group, narrow ? 1 : 2, !narrow); };
    column.addEventListener("mouseenter", show);
    column.addEventListener("focus", show);
    svg.append(column);
  });
  const ends = [buckets[0], buckets[buckets.length - 1]];
  ends.forEach((group, i) => svg.append(s("text", {
    x: i ? left + plotW : left, y: height - 6, "text-anchor": i ? "end" : "start", text: when(group.bucket_start, { short: true }),
  })));
  svg.append(line);
  return svg;
}

// The chart for [range.since, range.until) in `bucket`s; an element now, drawn when the data is in
// (data-state="ready").
export function componentsOverTime(range, bucket) {
  const root = h("div", { class: "components-over-time", id: "components-over-time", "data-state": "loading" });
  const selects = Object.fromEntries(FILTERS.map((field) => [field,
    h("select", { name: field, onchange: () => draw() }, h("option", { value: "", text: `any ${field}` }))]));
  const chart = h("div", { class: "chart-box" });
  const row = { display: "flex", flexWrap: "wrap", gap: "0.5em 1em", marginBottom: "0.5em" };
  root.append(h("div", { style: row }, FILTERS.map((field) => h("label", {}, `${field} `, selects[field]))), chart);

  async function draw() {
    root.dataset.state = "loading";
    const filters = Object.fromEntries(FILTERS.map((field) => [field, selects[field].value]));
    const answer = await getJSON("/api/stats", { ...range, bucket, ...filters });
    chart.replaceChildren(answer.ok ? columns(answer.data.groups || [])
      : h("p", { class: "error", text: `Could not load statistics (${errorText(answer)}).` }));
    root.dataset.state = "ready";
  }

  (async () => {
    const answer = await getJSON("/api/stats", { ...range, by: "route,model,provider" });
    for (const field of FILTERS) {
      const values = answer.ok ? [...new Set((answer.data.groups || []).map((g) => g.key[field]).filter(Boolean))].sort() : [];
      for (const value of values) selects[field].append(h("option", { value, text: value }));
    }
    await draw();
  })();
  return root;
}
