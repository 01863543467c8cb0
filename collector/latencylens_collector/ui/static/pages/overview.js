// Overview: TTFT and end-to-end percentiles over time, decode rate, and where the time goes per
// model and provider. All aggregation happens in the service (/api/stats); the page draws it.
import { getJSON, getCapabilities, errorText } from "../api.js";
import { lineChart, stackedBar, componentKey } from "../charts.js";
import { COMPONENTS } from "../components.js";
import { h, mount } from "../dom.js";
import { dur, num, pct } from "../format.js";

const WINDOWS = [["1h", 3600, "1m"], ["6h", 21600, "5m"], ["24h", 86400, "1h"], ["7d", 604800, "1d"]];

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
      h("thead", {}, h("tr", {}, ["Model · provider", "Requests", "E2E p50", "E2E p95", "TTFT p95", "Output tok/s", "Cached", "Share of time (critical path)"].map((t, i) => h("th", { class: i && i < 7 ? "num" : "", text: t })))),
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
  const chosen = WINDOWS.find(([name]) => name === params.get("window")) || WINDOWS[2];
  const now = Date.now() / 1000;
  const range = { since: (now - chosen[1]).toFixed(3), until: (now + 1).toFixed(3) };
  root.dataset.state = "loading";
  const [overTime, byModel] = await Promise.all([
    getJSON("/api/stats", { ...range, bucket: chosen[2] }),
    getJSON("/api/stats", { ...range, by: "model,provider" }),
  ]);
  const picker = h("form", { class: "filters card", method: "get" },
    h("label", {}, "Window", h("select", { name: "window", onchange: (e) => e.target.form.submit() },
      WINDOWS.map(([name]) => h("option", { value: name, selected: name === chosen[0], text: `last ${name}` })))),
    h("span", { class: "muted", text: `${chosen[2]} buckets; computed by the service over all matching requests.` }));
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
    h("div", { class: "charts" },
      card("Time to first token", lineChart(series(buckets, "ttft_ns", ["p50", "p95", "p99"]), { title: "TTFT percentiles over time" })),
      card("End-to-end latency", lineChart(series(buckets, "e2e_ns", ["p50", "p95", "p99"]), { title: "End-to-end percentiles over time" })),
      card("Output tokens per second", lineChart([{ name: "tok/s", points: buckets.map((g) => [Date.parse(g.bucket_start), g.output_tokens_per_second]) }], { format: (v) => num(v), title: "Output tokens per second over time" })),
      card("Requests", lineChart([{ name: "requests", points: buckets.map((g) => [Date.parse(g.bucket_start), g.count]) }], { format: (v) => num(v), title: "Requests per bucket" }))),
    h("h2", { text: "Where the time goes, by model and provider" }),
    (byModel.data.groups || []).length ? breakdown(byModel.data.groups) : h("p", { class: "muted", text: "No requests in this window." }));
  root.dataset.state = "ready";
}
