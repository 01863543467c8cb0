// Overview: TTFT and end-to-end percentiles over time, decode rate, and where the time goes per
// model and provider. All aggregation happens in the service (/api/stats); the page draws it.
import { getJSON, getCapabilities, errorText } from "../api.js";
import { fitLabels, lineChart, stackedBar, componentKey } from "../charts.js";
import { COMPONENTS, PERCENTILES, metricLabel, metricMeaning } from "../components.js";
import { h, mount } from "../dom.js";
import { cacheTable } from "../cachetable.js";
import { componentsOverTime } from "../timeline.js";
import { dur, num, pct, when } from "../format.js";

// [name, seconds, bucket]: each window with a bucket that gives it 15 to 300 points.
const WINDOWS = [["15m", 900, "1m"], ["1h", 3600, "1m"], ["6h", 21600, "5m"], ["24h", 86400, "5m"], ["7d", 604800, "1h"], ["30d", 2592000, "1d"]];
const HOUR = 3600;

// Without ?window= the page picks the smallest window holding the data of the last 30 days, so a
// fresh install with minutes of data shows lines over minutes, not dots in a day. Hourly counts
// find the first hour with data; when that is the last two hours, minute counts place it exactly.
async function windowFromData(now) {
  const count = (answer) => (answer.ok ? (answer.data.groups || []).filter((g) => g.bucket_start && g.count > 0) : []);
  const hours = count(await getJSON("/api/stats", { since: (now - 30 * 86400).toFixed(3), until: (now + 1).toFixed(3), bucket: "1h" }));
  if (!hours.length) return { chosen: WINDOWS[3], first: null };
  let first = Math.min(...hours.map((g) => Date.parse(g.bucket_start) / 1000));
  if (now - first <= 2 * HOUR) {
    const minutes = count(await getJSON("/api/stats", { since: (now - 3 * HOUR).toFixed(3), until: (now + 1).toFixed(3), bucket: "1m" }));
    if (minutes.length) first = Math.min(...minutes.map((g) => Date.parse(g.bucket_start) / 1000));
  }
  const age = now - first;
  return { chosen: WINDOWS.find(([, seconds]) => seconds >= age) || WINDOWS[WINDOWS.length - 1], first };
}

function series(groups, metric, quantiles) {
  return quantiles.map((q) => ({
    name: q,
    points: groups.filter((g) => g.bucket_start).map((g) => [Date.parse(g.bucket_start), g[metric] ? g[metric][q] : null]),
  }));
}

function card(title, ...children) {
  return h("div", { class: "card" }, h("h2", { text: title }), children);
}

function breakdown(groups) {
  const shares = (g) => Object.fromEntries(COMPONENTS.map((c) => [c, g.components && g.components[c] ? g.components[c].share || 0 : 0]));
  const sorted = [...groups].sort((a, b) => b.count - a.count);
  const label = (g) => `${g.key.model || "(no model)"} · ${g.key.provider || "?"}`;
  return [
    componentKey(),
    h("table", { class: "grid", id: "by-model" },
      h("thead", {}, h("tr", {}, ["Model · provider", "Requests", `${metricLabel("e2e_ns")} p50`, `${metricLabel("e2e_ns")} p95`, `${metricLabel("ttft_ns")} p95`, `${metricLabel("decode_tokens_per_second")} (mean tok/s)`, "Cached", "Share of time (critical path)"].map((t, i) => h("th", { class: i && i < 7 ? "num" : "", text: t, title: i === 5 ? metricMeaning("decode_tokens_per_second") : undefined })))),
      h("tbody", {}, sorted.map((g) => h("tr", { "data-group": label(g) },
        h("td", { text: label(g) }),
        h("td", { class: "num", text: num(g.count) }),
        h("td", { class: "num", text: dur(g.e2e_ns && g.e2e_ns.p50) }),
        h("td", { class: "num", text: dur(g.e2e_ns && g.e2e_ns.p95) }),
        h("td", { class: "num", text: dur(g.ttft_ns && g.ttft_ns.p95) }),
        h("td", { class: "num", text: num(g.output_tokens_per_second) }),
        h("td", { class: "num", text: pct(g.cached_token_ratio) }),
        h("td", { class: "bar-cell" }, stackedBar(shares(g), { total: 1, shares: true })))))),
  ];
}

export async function render(root) {
  const capabilities = await getCapabilities();
  if (!capabilities.stats) {
    mount(root, h("h1", { text: "Overview" }),
      h("p", { class: "notice", id: "unavailable", text: "The overview is not available: this service has no statistics endpoint (/api/stats). The slow-requests page works without it." }));
    root.dataset.state = "ready";
    return;
  }
  const params = new URLSearchParams(window.location.search);
  const now = Date.now() / 1000;
  root.dataset.state = "loading";
  const asked = WINDOWS.find(([name]) => name === params.get("window"));
  const auto = asked ? null : await windowFromData(now);
  const chosen = asked || auto.chosen;
  const range = { since: (now - chosen[1]).toFixed(3), until: (now + 1).toFixed(3) };
  const [overTime, byModel, cache] = await Promise.all([
    getJSON("/api/stats", { ...range, bucket: chosen[2] }),
    getJSON("/api/stats", { ...range, by: "model,provider" }),
    getJSON("/api/stats/cache", { ...range, by: "model,provider" }),
  ]);
  const picker = h("form", { class: "filters card", method: "get" },
    h("label", {}, "Window", h("select", { name: "window", onchange: (e) => e.target.form.submit() },
      WINDOWS.map(([name]) => h("option", { value: name, selected: name === chosen[0], text: `last ${name}` })))),
    h("span", { class: "muted", id: "window-note", "data-window": chosen[0], "data-bucket": chosen[2],
      text: `${auto ? `Window chosen from the data${auto.first ? ` (first request in it ${when(auto.first * 1000, { short: true })})` : ""}; ` : ""}${chosen[2]} buckets; computed by the service over all matching requests. Hover or focus a chart for its values.` }));
  if (!overTime.ok || !byModel.ok) {
    mount(root, h("h1", { text: "Overview" }), picker,
      h("p", { class: "error", text: `Could not load statistics (${errorText(overTime.ok ? byModel : overTime)}).` }));
    root.dataset.state = "ready";
    return;
  }
  const buckets = (overTime.data.groups || []).filter((g) => g.bucket_start).sort((a, b) => Date.parse(a.bucket_start) - Date.parse(b.bucket_start));
  const total = buckets.reduce((acc, g) => acc + g.count, 0);
  mount(root,
    h("h1", { text: "Overview" }),
    picker,
    h("p", {}, h("a", { id: "advice-link", href: "/ui/advice", text: "What to change first →" })),
    total === 0 ? h("p", { class: "notice", text: `No requests in the last ${chosen[0]}.` }) : null,
    h("div", { class: "charts", id: "charts" },
      card(`${metricLabel("ttft_ns")} (time to first token)`, lineChart(series(buckets, "ttft_ns", PERCENTILES), { title: "TTFT percentiles over time" })),
      card(`${metricLabel("e2e_ns")[0].toUpperCase()}${metricLabel("e2e_ns").slice(1)} latency`, lineChart(series(buckets, "e2e_ns", PERCENTILES), { title: "End-to-end percentiles over time" })),
      card(`${metricLabel("decode_tokens_per_second")[0].toUpperCase()}${metricLabel("decode_tokens_per_second").slice(1)} (mean, tok/s)`, lineChart([{ name: "tok/s", points: buckets.map((g) => [Date.parse(g.bucket_start), g.output_tokens_per_second]) }], { format: (v) => num(v), title: "Mean decode rate over time" })),
      card("Requests", lineChart([{ name: "requests", points: buckets.map((g) => [Date.parse(g.bucket_start), g.count]) }], { format: (v) => num(v), title: "Requests per bucket" }))),
    card("Where the time goes over time (share, mean and p95 per part)", componentsOverTime(range, chosen[2])),
    h("h2", { text: "Where the time goes, by model and provider" }),
    (byModel.data.groups || []).length ? h("div", { class: "scroll" }, breakdown(byModel.data.groups)) : h("p", { class: "muted", text: "No requests in this window." }),
    h("h2", { text: "Cached and uncached requests, by model and provider" }),
    h("p", { class: "muted", text: "Requests that read input from the provider's cache and requests that read none, apart: where the cached ones take less prefill per uncached token and less TTFT, prefix caching is working." }),
    cache.ok ? cacheTable(cache.data, "overview-cache-table") : h("p", { class: "error", id: "overview-cache-table", text: `Could not load the cache split (${errorText(cache)}).` }));
  fitLabels(root);
  root.dataset.state = "ready";
}
