// Cached and uncached requests apart (/api/stats/cache): is prefix caching cutting prefill here?
// One row per group and class: requests, cached share of input, TTFT p50/p95, prefill p50 and
// prefill per 1k uncached input tokens. Shared by the overview and the What to change first page.
import { h } from "./dom.js";
import { dur, num, pct } from "./format.js";

export function cacheTable(body, id = "cache-table") {
  const rows = body.groups.flatMap((group) => ["cached", "uncached"].map((name) => [group, name, group[name]]));
  if (!rows.length) return h("p", { class: "muted", id, text: "No requests in this window." });
  return h("div", { class: "scroll" }, h("table", { class: "grid", id },
    h("thead", {}, h("tr", {}, ["Group", "Requests", "n", "Cached input", "TTFT p50", "TTFT p95", "Prefill p50", "Prefill per 1k uncached tokens"]
      .map((t, i) => h("th", { class: i > 1 ? "num" : "", text: t })))),
    h("tbody", {}, rows.map(([group, name, part]) => h("tr", { "data-group": Object.values(group.key).join(" · "), "data-class": name },
      h("td", { text: Object.values(group.key).join(" · ") || "all requests" }),
      h("td", { text: name }),
      h("td", { class: "num", text: num(part.count) }),
      h("td", { class: "num", text: pct(part.cached_input_share) }),
      h("td", { class: "num", text: dur(part.ttft_ns.p50) }),
      h("td", { class: "num", text: dur(part.ttft_ns.p95) }),
      h("td", { class: "num", text: dur(part.prefill_ns.p50) }),
      h("td", { class: "num", text: dur(part.prefill_per_1k_uncached_tokens_ns) }))))));
}
