// Picks the page from the URL path and renders it into <main id="app">.
import { h, mount } from "./dom.js";

const ROUTES = [
  [/^\/ui\/?$/, "requests", () => import("./pages/requests.js")],
  [/^\/ui\/requests\/?$/, "requests", () => import("./pages/requests.js")],
  [/^\/ui\/requests\/([0-9a-fA-F]{32})\/?$/, "requests", () => import("./pages/request.js")],
  [/^\/ui\/overview\/?$/, "overview", () => import("./pages/overview.js")],
  [/^\/ui\/slos\/?$/, "slos", () => import("./pages/slos.js")],
  [/^\/ui\/advice\/?$/, "advice", () => import("./pages/advice.js")],
];

async function start() {
  const root = document.getElementById("app");
  const path = window.location.pathname;
  for (const [pattern, nav, load] of ROUTES) {
    const match = path.match(pattern);
    if (!match) continue;
    for (const link of document.querySelectorAll("[data-nav]")) {
      link.classList.toggle("active", link.dataset.nav === nav);
    }
    const page = await load();
    await page.render(root, ...match.slice(1));
    document.body.dataset.ready = "true";
    return;
  }
  mount(root, h("p", { class: "error", text: `No page at ${path}.` }));
  document.body.dataset.ready = "true";
}

start();
