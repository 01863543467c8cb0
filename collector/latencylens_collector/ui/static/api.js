// JSON calls to this service. Failures become values, never uncaught exceptions, so a page can
// say what is missing instead of breaking.
import { h } from "./dom.js";

// When the service requires API keys, the key is kept for this browser tab only.
const KEY_ITEM = "latencylens.apiKey";

function keyPrompt() {
  if (document.getElementById("key-form")) return;
  const input = h("input", { name: "key", type: "password", autocomplete: "off", placeholder: "ll_…", required: true });
  const form = h("form", { id: "key-form", class: "filters card", onsubmit: (event) => {
    event.preventDefault();
    window.sessionStorage.setItem(KEY_ITEM, input.value.trim());
    window.location.reload();
  } },
  h("label", {}, "This service needs an API key (sent as x-api-key, kept for this tab only)", input),
  h("button", { type: "submit", text: "Use key" }));
  document.querySelector("main").before(form);
}

export async function getJSON(path, params) {
  const url = new URL(path, window.location.origin);
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, value);
  }
  try {
    const headers = { Accept: "application/json" };
    const key = window.sessionStorage.getItem(KEY_ITEM);
    if (key) headers["x-api-key"] = key;
    const response = await fetch(url, { headers });
    if (response.status === 401) keyPrompt();
    const body = await response.json().catch(() => null);
    return { ok: response.ok, status: response.status, data: body };
  } catch (error) {
    return { ok: false, status: 0, data: { detail: String(error) } };
  }
}

let capabilities = null;

// Which optional endpoints (stats, slos, alerts) this service offers.
export async function getCapabilities() {
  if (capabilities === null) {
    const answer = await getJSON("/ui/api/capabilities");
    capabilities = answer.ok ? answer.data : {};
  }
  return capabilities;
}

export function errorText(answer) {
  const detail = answer.data && answer.data.detail;
  const text = typeof detail === "string" ? detail : detail ? JSON.stringify(detail) : "";
  return answer.status ? `HTTP ${answer.status}${text ? `: ${text}` : ""}` : `no answer: ${text}`;
}
