/** The drawer inside Superset and the /agent page it frames: what Superset is showing (its
 * route read as a focus), and the two messages they exchange across origins.
 *
 * The page, framed, says it is ready (`sstools:ready`) to the origin its environment's Superset
 * is opened at, and accepts focus (`sstools:focus`) from its parent window at exactly that origin:
 * which environment the focus belongs to is decided by where the message came from, never by
 * what it says. The drawer, in turn, accepts `ready` only from the agent's origin and its own
 * frame. Both sides check every field of what they receive. */

export const READY = "sstools:ready";
export const FOCUS = "sstools:focus";

import { isObjectId, MAX_NAME, MAX_ROUTE, type ObjectType } from "./context.ts";

/** What Superset can show around the drawer. */
export type FocusType = Extract<ObjectType, "dashboard" | "chart" | "sqllab">;
const FOCUS_TYPES: readonly (FocusType | null)[] = ["dashboard", "chart", "sqllab", null];

/** What the person is looking at in Superset; `objectId` is a number's digits once known. */
export interface Focus {
  objectType: FocusType | null;
  objectId: string | null;
  objectName: string | null;
  route: string;
}

/** A Superset route: the object it shows and how Superset names it there (a dashboard's id or
 * slug; a chart's id). */
export interface Shown {
  objectType: FocusType | null;
  ref: string | null;
  route: string;
}

/** The object a Superset URL shows: a dashboard (`/superset/dashboard/<id or slug>/`), a chart
 * being explored (`/explore/?slice_id=N`), SQL Lab (`/sqllab/`), or nothing in particular. */
export function shownAt(url: URL): Shown {
  const route = url.pathname.slice(0, MAX_ROUTE);
  const dashboard = /^\/superset\/dashboard\/([^/]+)\/?$/.exec(url.pathname);
  if (dashboard) {
    const ref = dashboard[1]; // an id or a slug as it is in the path: nothing else is looked up
    return { objectType: "dashboard", ref: /^[\w-]{1,128}$/.test(ref) ? ref : null, route };
  }
  if (/^\/(superset\/)?explore\/?$/.test(url.pathname)) {
    const chart = url.searchParams.get("slice_id");
    return { objectType: "chart", ref: isObjectId(chart) ? chart : null, route };
  }
  if (/^\/(superset\/)?sqllab\/?$/.test(url.pathname)) return { objectType: "sqllab", ref: null, route };
  return { objectType: null, ref: null, route };
}

/** A focus message's focus, every field checked; null for anything else. */
export function focusIn(data: unknown): Focus | null {
  if (!isRecord(data) || data.type !== FOCUS || !isRecord(data.focus)) return null;
  const { objectType, objectId, objectName, route } = data.focus;
  const typeOk = FOCUS_TYPES.includes(objectType as FocusType | null);
  const idOk = objectId === null || isObjectId(objectId);
  const nameOk = objectName === null || (typeof objectName === "string" && objectName.length <= MAX_NAME);
  const routeOk = typeof route === "string" && route.length <= MAX_ROUTE;
  if (!typeOk || !idOk || !nameOk || !routeOk) return null;
  return { objectType, objectId, objectName, route } as Focus;
}

/** Whether a message is the framed page saying it is ready. */
export function isReady(data: unknown): boolean {
  return isRecord(data) && data.type === READY;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The framed page's side: focus from the parent window at `origin`, once the page says it is
 * ready. Returns what stops listening. */
export function followDrawer(
  frame: Pick<Window, "addEventListener" | "removeEventListener" | "parent">,
  origin: string,
  onFocus: (focus: Focus) => void,
): () => void {
  const listener = (event: MessageEvent) => {
    if (event.source !== frame.parent || event.origin !== origin) return;
    const focus = focusIn(event.data);
    if (focus) onFocus(focus);
  };
  frame.addEventListener("message", listener as EventListener);
  frame.parent.postMessage({ type: READY }, origin);
  return () => frame.removeEventListener("message", listener as EventListener);
}
