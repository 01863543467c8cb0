// Components over time: the aggregate form of a request's bar. One column per time bucket, split
// into each part's share of the end-to-end time of the bucket's requests, or into each part's mean
// contribution per request (the means stack up to the mean end-to-end time); both from
// /api/stats/components. Hover or focus a column for every part's share, mean and p95 (the readout
// line and the table under the chart). Filters by route, model and provider redraw it in place.
import { getJSON, errorText } from "./api.js";
import { COMPONENTS, LABELS } from "./components.js";
import { h, s } from "./dom.js";
import { dur, pct, when } from "./format.js";

const FILTERS = ["route", "model", "provider"];
const MODES = { share: "share of end-to-end", mean: "mean per request (ms)" };

// The parts a bucket has time in, largest first.
function present(bucket) {
  return COMPONENTS.filter((name) => (bucket.parts[name] || {}).mean_ns > 0)
    .sort((a, b) => bucket.parts[b].mean_ns - bucket.parts[a].mean_ns);
}

// One line: the bucket, its requests and its first `limit` parts with share, mean and p95.
function readout(bucket, limit = COMPONENTS.length, full = true) {
  const parts = present(bucket).slice(0, limit).map((name) => {
    const part = bucket.parts[name];
    return `${LABELS[name]} ${pct(part.share)}${full ? `, mean ${dur(part.mean_ns)}, p95 ${dur(part.p95_ns)}` : ` (${dur(part.mean_ns)})`}`;
  });
  return `${when(bucket.bucket_start, { short: true })}, ${bucket.count} requests, mean ${dur(bucket.e2e_mean_ns)}: ${parts.join("; ") || "no time"}`;
}

// Every part of one bucket: share, mean and p95 (the values a hover shows).
function valuesTable(bucket) {
  return h("table", { class: "grid components-values", "data-bucket": bucket.bucket_start },
    h("caption", { text: `${when(bucket.bucket_start, { short: true })}: ${bucket.count} requests, mean ${dur(bucket.e2e_mean_ns)}, p95 ${dur(bucket.e2e_p95_ns)}` }),
    h("thead", {}, h("tr", {}, ["Part", "Share", "Mean", "p95"].map((t) => h("th", { text: t })))),
    h("tbody", {}, present(bucket).map((name) => h("tr", { "data-component": name },
      h("td", {}, h("span", { class: `chip c-${name}` }), ` ${LABELS[name]}`),
      h("td", { class: "num", text: pct(bucket.parts[name].share) }),
      h("td", { class: "num", text: dur(bucket.parts[name].mean_ns) }),
      h("td", { class: "num", text: dur(bucket.parts[name].p95_ns) })))));
}

function ticks(max) {
  return [0, max / 2, max];
}

function columns(buckets, mode, details) {
  const narrow = window.matchMedia("(max-width: 700px)").matches;
  const width = narrow ? 380 : 640, height = 220, left = 52, right = 8, top = 26, bottom = 24;
  const plotW = width - left - right, plotH = height - top - bottom;
  const label = mode === "share" ? "Share of end-to-end time per part over time" : "Mean time per request per part over time";
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label, "data-mode": mode });
  if (!buckets.length) {
    svg.append(s("text", { x: left, y: height / 2, text: "no data in this window" }));
    return svg;
  }
  const value = (bucket, name) => mode === "share" ? (bucket.parts[name] || {}).share || 0 : (bucket.parts[name] || {}).mean_ns || 0;
  const max = mode === "share" ? 1 : Math.max(...buckets.map((b) => b.e2e_mean_ns), 1);
  for (const tick of ticks(max)) {
    const y = top + plotH - (tick / max) * plotH;
    svg.append(s("line", { class: "gridline", x1: left, x2: left + plotW, y1: y, y2: y }));
    svg.append(s("text", { x: left - 6, y: y + 4, "text-anchor": "end", text: mode === "share" ? pct(tick) : dur(tick) }));
  }
  const step = plotW / buckets.length;
  const line = s("text", { class: "readout", x: left, y: 14, text: "Hover or focus a column for its parts." });
  buckets.forEach((bucket, index) => {
    const x = left + index * step;
    const column = s("g", { class: "bucket", tabindex: 0, "data-bucket": bucket.bucket_start, "aria-label": readout(bucket) },
      s("title", { text: readout(bucket) }));
    let y = top + plotH;
    for (const name of COMPONENTS) {
      const v = value(bucket, name);
      if (v <= 0) continue;
      const part = bucket.parts[name];
      y -= (v / max) * plotH;
      column.append(s("rect", {
        class: `c-${name}`, "data-component": name, "data-share": part.share, "data-mean-ns": part.mean_ns, "data-p95-ns": part.p95_ns,
        x: x + step * 0.08, y, width: Math.max(step * 0.84, 1), height: (v / max) * plotH,
      }));
    }
    const show = () => {
      line.textContent = readout(bucket, narrow ? 1 : 2, false);
      details.replaceChildren(valuesTable(bucket));
    };
    column.addEventListener("mouseenter", show);
    column.addEventListener("focus", show);
    svg.append(column);
  });
  const ends = [buckets[0], buckets[buckets.length - 1]];
  ends.forEach((bucket, i) => svg.append(s("text", {
    x: i ? left + plotW : left, y: height - 6, "text-anchor": i ? "end" : "start", text: when(bucket.bucket_start, { short: true }),
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
  const mode = h("select", { name: "mode", onchange: () => redraw() },
    Object.entries(MODES).map(([value, text]) => h("option", { value, text })));
  const chart = h("div", { class: "chart-box" });
  const details = h("div", { class: "scroll components-details" });
  const row = { display: "flex", flexWrap: "wrap", gap: "0.5em 1em", marginBottom: "0.5em" };
  root.append(h("div", { style: row }, FILTERS.map((field) => h("label", {}, `${field} `, selects[field])), h("label", {}, "show ", mode)), chart, details);
  let buckets = [];

  function redraw() {
    chart.replaceChildren(columns(buckets, mode.value, details));
    details.replaceChildren(buckets.length ? valuesTable(buckets[buckets.length - 1]) : "");
  }

  async function draw() {
    root.dataset.state = "loading";
    const filters = Object.fromEntries(FILTERS.map((field) => [field, selects[field].value]).filter(([, v]) => v));
    const answer = await getJSON("/api/stats/components", { ...range, bucket, ...filters });
    if (answer.ok) {
      buckets = answer.data.buckets || [];
      redraw();
    } else {
      buckets = [];
      chart.replaceChildren(h("p", { class: "error", text: `Could not load statistics (${errorText(answer)}).` }));
      details.replaceChildren();
    }
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
