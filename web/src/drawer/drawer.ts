/** The "Assistant" drawer Superset's pages load (`<script src=".../drawer.js" data-env="dev">`,
 * added by web/superset/drawer_config.py): a button, and a side drawer framing the agent's
 * /agent page in its embedded variant. The drawer tells the page what Superset shows — the
 * dashboard, chart or SQL Lab — and tells it again whenever Superset, a single-page app, moves
 * to another route. Its own elements live in a shadow root: Superset's styles do not reach them. */

import { isEnvId, isObjectId, MAX_NAME } from "#lib/context.ts";
import { FOCUS, isReady, shownAt, type Focus, type Shown } from "#lib/embed.ts";

const OPEN_KEY = "sstools.drawer.open";
const LABELS = {
  ru: { open: "Ассистент", close: "Закрыть", title: "SS-Tools Агент" },
  en: { open: "Assistant", close: "Close", title: "SS-Tools Agent" },
};
const STYLE = `
  :host { all: initial; }
  .toggle { position: fixed; right: 1rem; bottom: 1rem; z-index: 2147483000; font: 600 14px system-ui, sans-serif;
    padding: 0.6rem 1rem; border-radius: 999px; border: none; background: #1a73e8; color: white; cursor: pointer;
    box-shadow: 0 2px 8px rgb(0 0 0 / 25%); }
  .drawer { position: fixed; top: 0; right: 0; bottom: 0; width: min(28rem, 100vw); z-index: 2147483001;
    display: flex; flex-direction: column; background: white; box-shadow: -4px 0 16px rgb(0 0 0 / 20%); }
  .drawer[hidden] { display: none; }
  header { display: flex; align-items: center; justify-content: space-between; padding: 0.4rem 0.75rem;
    border-bottom: 1px solid #ddd; font: 600 14px system-ui, sans-serif; }
  header button { font: inherit; border: none; background: none; cursor: pointer; font-size: 20px; line-height: 1; }
  iframe { flex: 1; border: none; width: 100%; }
`;

interface Settings {
  agentOrigin: string;
  page: URL;
  env: string;
}

/** Where the agent is (the script's own origin) and which environment this Superset is. */
function settingsOf(script: HTMLScriptElement | null): Settings | null {
  const env = script?.dataset.env ?? "";
  if (!script?.src || !isEnvId(env)) return null;
  const agentOrigin = new URL(script.src).origin;
  const page = new URL("/agent", agentOrigin);
  page.search = new URLSearchParams({ embedded: "1", envId: env }).toString();
  return { agentOrigin, page, env };
}

/** The shown object's name, from Superset's own API (this page's session); null when it has
 * none or cannot say. A dashboard named by its slug gets its id from there too. */
async function focusOf(shown: Shown): Promise<Focus> {
  const focus: Focus = { objectType: shown.objectType, objectId: null, objectName: null, route: shown.route };
  if (shown.ref === null) return focus;
  const path = shown.objectType === "dashboard" ? "dashboard" : "chart";
  try {
    const reply = await fetch(`/api/v1/${path}/${encodeURIComponent(shown.ref)}`, { credentials: "same-origin" });
    if (!reply.ok) return focus;
    const { result } = (await reply.json()) as { result: Record<string, unknown> };
    const id = shown.objectType === "dashboard" ? result.id : shown.ref;
    const name = shown.objectType === "dashboard" ? result.dashboard_title : result.slice_name;
    focus.objectId = typeof id === "number" || typeof id === "string" ? String(id) : null;
    focus.objectName = typeof name === "string" ? name.slice(0, MAX_NAME) : null;
  } catch {
    // Superset did not answer: the route alone still says what kind of object it is
  }
  if (focus.objectId === null && isObjectId(shown.ref)) focus.objectId = shown.ref;
  return focus;
}

function install(settings: Settings): void {
  const lang = (document.documentElement.lang || navigator.language).toLowerCase().startsWith("ru") ? "ru" : "en";
  const labels = LABELS[lang];
  const host = document.createElement("div");
  host.id = "sstools-drawer";
  const root = host.attachShadow({ mode: "open" });
  const style = document.createElement("style");
  style.textContent = STYLE;
  const toggle = document.createElement("button");
  toggle.className = "toggle";
  toggle.textContent = labels.open;
  toggle.setAttribute("aria-expanded", "false");
  const drawer = document.createElement("aside");
  drawer.className = "drawer";
  drawer.hidden = true;
  drawer.setAttribute("aria-label", labels.title);
  const header = document.createElement("header");
  const title = document.createElement("span");
  title.textContent = labels.title;
  const close = document.createElement("button");
  close.textContent = "×";
  close.title = labels.close;
  close.setAttribute("aria-label", labels.close);
  header.append(title, close);
  drawer.append(header);
  root.append(style, toggle, drawer);
  document.body.append(host);

  let frame: HTMLIFrameElement | null = null;
  let focus: Focus | null = null;
  let routeSeen = "";

  function tell(): void {
    if (frame?.contentWindow && focus) {
      frame.contentWindow.postMessage({ type: FOCUS, focus }, settings.agentOrigin);
    }
  }

  /** Superset moved (or may have): find what it shows now and tell the page. */
  async function follow(): Promise<void> {
    const url = new URL(location.href);
    const route = url.pathname + url.search;
    if (route === routeSeen) return;
    routeSeen = route;
    const found = await focusOf(shownAt(url));
    if (routeSeen !== route) return; // it moved again while its name was looked up
    focus = found;
    tell();
  }

  function show(open: boolean): void {
    drawer.hidden = !open;
    toggle.hidden = open;
    toggle.setAttribute("aria-expanded", String(open));
    sessionStorage.setItem(OPEN_KEY, open ? "1" : "");
    if (open && !frame) {
      // made once and kept while closed: the conversation stays as it was
      frame = document.createElement("iframe");
      frame.title = labels.title;
      frame.src = settings.page.href;
      frame.allow = "clipboard-write";
      drawer.append(frame);
    }
  }

  // The page asks for the focus once it is signed in and knows its environments (again after a
  // reload inside the frame).
  window.addEventListener("message", (event) => {
    if (frame && event.source === frame.contentWindow && event.origin === settings.agentOrigin && isReady(event.data)) {
      tell();
    }
  });
  for (const method of ["pushState", "replaceState"] as const) {
    const original = history[method];
    history[method] = function (this: History, ...args: Parameters<History["pushState"]>) {
      original.apply(this, args);
      void follow();
    };
  }
  window.addEventListener("popstate", () => void follow());
  toggle.addEventListener("click", () => show(true));
  close.addEventListener("click", () => show(false));
  void follow();
  if (sessionStorage.getItem(OPEN_KEY)) show(true);
}

const settings = settingsOf(document.currentScript as HTMLScriptElement | null);
if (settings) install(settings);
