// What to change first: per group of requests (route × model by default), the levers that would cut
// p95 end-to-end time or TTFT, ranked, each with its estimated change, evidence, confidence and
// assumptions. Everything is computed by the service (/api/advice); the page lays it out.
import { getJSON, errorText } from "../api.js";
import { cacheTable } from "../cachetable.js";
import { h, mount } from "../dom.js";
import { dur, num, pct } from "../format.js";

const WINDOWS = ["1h", "6h", "24h", "7d", "30d"];
const GROUPINGS = [["route,model", "route × model"], ["route", "route"], ["model", "model"], ["provider", "provider"], ["service", "service"]];
const METRICS = [["e2e_p50", "End-to-end p50"], ["e2e_p95", "End-to-end p95"], ["ttft_p50", "TTFT p50"], ["ttft_p95", "TTFT p95"]];
const FILTERS = ["route", "model", "provider", "service"];

// A change in ns with its sign: "−8.00 s", "+2.0 ms", "no change".
function signed(ns) {
  if (ns === null || ns === undefined) return "—";
  if (ns === 0) return "no change";
  return `${ns < 0 ? "−" : "+"}${dur(Math.abs(ns))}`;
}

// An evidence value for people: ns as a duration, shares as percentages, counts with separators.
function usd(value) {
  if (value === null || value === undefined) return "no price";
  const text = Number(value).toPrecision(4);
  return `$${text.includes(".") && !text.includes("e") ? text.replace(/0+$/, "").replace(/\.$/, "") : text}`;
}

function evidenceValue(name, value) {
  if (name.endsWith("_usd")) return usd(value);
  if (value === null || value === undefined) return "—";
  if (name.endsWith("_ns") && typeof value === "number") return dur(value);
  if (name.endsWith("share") && typeof value === "number") return pct(value, 1);
  if (typeof value === "number") return num(value, Number.isInteger(value) ? 0 : 2);
  return String(value);
}

function changeTable(group, lever) {
  const before = { e2e_p50: group.e2e_ns.p50, e2e_p95: group.e2e_ns.p95, ttft_p50: group.ttft_ns.p50, ttft_p95: group.ttft_ns.p95 };
  return h("table", { class: "grid advice-change", style: { width: "100%" } },
    h("thead", {}, h("tr", {}, ["Metric", "Now", "After", "Change"].map((t, i) => h("th", { class: i ? "num" : "", text: t })))),
    h("tbody", {}, METRICS.map(([key, label]) => h("tr", { "data-metric": key },
      h("td", { text: label }),
      h("td", { class: "num", text: dur(before[key]) }),
      h("td", { class: "num", text: dur(lever.after ? lever.after[key] : null) }),
      h("td", { class: "num change", text: signed(lever.change ? lever.change[key] : null) })))));
}

// The network lever's evidence per provider endpoint (server.address), slowest first.
function endpointTable(endpoints) {
  return h("div", { class: "scroll" }, h("table", { class: "grid endpoints" },
    h("thead", {}, h("tr", {}, ["Endpoint", "Requests", "Network p50", "Network p95"].map((t, i) => h("th", { class: i ? "num" : "", text: t })))),
    h("tbody", {}, endpoints.map((e) => h("tr", { "data-endpoint": e.endpoint || "" },
      h("td", { text: e.endpoint || "not recorded" }),
      h("td", { class: "num", text: num(e.requests) }),
      h("td", { class: "num", text: dur(e.network_p50_ns) }),
      h("td", { class: "num", text: dur(e.network_p95_ns) }))))));
}

// Lists and tables are styled here (through the CSSOM, which the CSP allows) so they fit a phone
// without the list's indent: the rank is written in the heading instead.
const PLAIN_LIST = { paddingLeft: "0", listStyle: "none" };
const INDENTED_LIST = { paddingLeft: "1.2em", margin: "0.25em 0" };

function leverItem(group, lever, rank) {
  return h("li", { class: "card lever", "data-lever": lever.lever, "data-recommended": String(lever.recommended) },
    h("h3", {}, `${rank}. ${lever.title}`, " ", h("span", { class: `badge confidence-${lever.confidence}`, text: `${lever.confidence} confidence` })),
    h("p", { class: "summary", text: lever.summary }),
    h("div", { class: "scroll" }, changeTable(group, lever)),
    h("details", { class: "evidence" },
      h("summary", { text: "Evidence" }),
      h("dl", {}, Object.entries(lever.evidence).map(([name, value]) => [
        h("dt", { text: name.replace(/_/g, " ") }), h("dd", { "data-evidence": name, text: evidenceValue(name, value) })])),
      lever.network_by_endpoint && lever.network_by_endpoint.length ? endpointTable(lever.network_by_endpoint) : null),
    lever.assumptions.length ? h("div", { class: "assumptions" }, h("strong", { text: "Assumes" }),
      h("ul", { style: INDENTED_LIST }, lever.assumptions.map((text) => h("li", { text })))) : null);
}

function groupSection(group) {
  const name = Object.values(group.key).join(" · ") || "all requests";
  const recommended = group.levers.filter((lever) => lever.recommended);
  const others = group.levers.filter((lever) => !lever.recommended);
  return h("section", { class: "advice-group", "data-group": name },
    h("h2", { text: name }),
    h("p", { class: "muted", text: `${num(group.count)} requests · ${group.dominant} is ${pct(group.dominant_share)} of end-to-end time · end-to-end p50 ${dur(group.e2e_ns.p50)}, p95 ${dur(group.e2e_ns.p95)} · TTFT p50 ${dur(group.ttft_ns.p50)}, p95 ${dur(group.ttft_ns.p95)}` }),
    h("p", { class: "muted cost", text: `Cost per request: ${usd(group.cost_per_request_usd)}` }),
    recommended.length
      ? h("ol", { class: "levers", style: PLAIN_LIST }, recommended.map((lever, i) => leverItem(group, lever, i + 1)))
      : h("p", { class: "notice no-lever", text: "No lever cuts p95 by 5 % or more for this group." }),
    others.length ? h("div", { class: "not-applicable" }, h("h3", { text: "Does not apply" }),
      h("ul", { style: INDENTED_LIST }, others.map((lever) => h("li", { "data-lever": lever.lever }, h("strong", { text: `${lever.title}: ` }), lever.summary)))) : null);
}

function form(params) {
  const select = (name, options, value) => h("select", { name }, options.map(([v, label]) => h("option", { value: v, selected: v === value, text: label })));
  return h("form", { class: "filters card", method: "get", id: "advice-form" },
    h("label", {}, "Window", select("since", WINDOWS.map((w) => [w, `last ${w}`]), params.get("since") || "24h")),
    h("label", {}, "Group by", select("by", GROUPINGS, params.get("by") || "route,model")),
    h("label", {}, "Fewest requests", h("input", { name: "min_requests", type: "number", min: 1, value: params.get("min_requests") || "20" })),
    h("label", {}, h("input", { name: "all", type: "checkbox", value: "true", checked: params.get("all") === "true" }), "Say why the other levers do not apply"),
    FILTERS.filter((f) => params.get(f)).map((f) => h("input", { type: "hidden", name: f, value: params.get(f) })),
    h("button", { type: "submit", text: "Show" }));
}

export async function render(root) {
  const params = new URLSearchParams(window.location.search);
  root.dataset.state = "loading";
  document.title = "What to change first · LatencyLens";
  const query = { since: params.get("since") || "24h", by: params.get("by") || "route,model", min_requests: params.get("min_requests") || "20", all: params.get("all") === "true" ? "true" : undefined };
  for (const f of FILTERS) if (params.get(f)) query[f] = params.get(f);
  const cacheQuery = { since: query.since, by: query.by };
  for (const f of FILTERS) if (params.get(f)) cacheQuery[f] = params.get(f);
  const [answer, cache] = await Promise.all([getJSON("/api/advice", query), getJSON("/api/stats/cache", cacheQuery)]);
  const filtered = FILTERS.filter((f) => params.get(f)).map((f) => `${f} ${params.get(f)}`);
  const head = [
    h("h1", { text: "What to change first" }),
    h("p", { class: "muted", id: "advice-method", text: "Each estimate replays this group's own stored requests with the change applied and measures p50 and p95 again; a lever is listed when it cuts p95 end-to-end time or TTFT by 5 % or more." }),
    filtered.length ? h("p", { class: "notice", id: "advice-filter" }, `Only requests with ${filtered.join(", ")}. `, h("a", { href: "/ui/advice", text: "All requests" })) : null,
    form(params),
  ];
  if (!answer.ok) {
    mount(root, head, h("p", { class: "error", text: `Could not load advice (${errorText(answer)}).` }));
    root.dataset.state = "ready";
    return;
  }
  const body = answer.data;
  mount(root, head,
    body.groups.length ? body.groups.map(groupSection) : h("p", { class: "notice", id: "no-groups", text: `No group has ${body.min_requests} or more requests in this window.` }),
    body.small_groups.length ? h("p", { class: "muted", id: "small-groups", text: `${body.small_groups.length} smaller group(s) not advised on: lower "Fewest requests" to include them.` }) : null,
    h("h2", { text: "Cached and uncached requests" }),
    h("p", { class: "muted", text: "Requests that read input from the provider's cache and requests that read none, apart: where the cached ones take less prefill per uncached token and less TTFT, prefix caching is working." }),
    cache.ok ? cacheTable(cache.data) : h("p", { class: "error", text: `Could not load the cache split (${errorText(cache)}).` }));
  root.dataset.state = "ready";
}
