import { describe, expect, it } from "vitest";
import { FOCUS, focusIn, followDrawer, isReady, READY, shownAt } from "./embed.ts";

const at = (path: string) => shownAt(new URL(path, "https://bi.example.test"));

describe("what a Superset route shows", () => {
  it("reads dashboards by id or slug, charts being explored, and SQL Lab", () => {
    expect(at("/superset/dashboard/12/")).toEqual({ objectType: "dashboard", ref: "12", route: "/superset/dashboard/12/" });
    expect(at("/superset/dashboard/legacy-kpis/?native_filters_key=x")).toMatchObject({ objectType: "dashboard", ref: "legacy-kpis" });
    expect(at("/explore/?form_data_key=abc&slice_id=7")).toMatchObject({ objectType: "chart", ref: "7" });
    expect(at("/superset/explore/?slice_id=7")).toMatchObject({ objectType: "chart", ref: "7" });
    expect(at("/explore/p/AbC/")).toMatchObject({ objectType: null, ref: null });
    expect(at("/sqllab/")).toEqual({ objectType: "sqllab", ref: null, route: "/sqllab/" });
    expect(at("/dashboard/list/")).toEqual({ objectType: null, ref: null, route: "/dashboard/list/" });
  });

  it("names no object it could not look up safely", () => {
    expect(at("/superset/dashboard/%2E%2E%2Fapi/")).toMatchObject({ objectType: "dashboard", ref: null });
    expect(at("/superset/dashboard/a%20b/")).toMatchObject({ objectType: "dashboard", ref: null });
    expect(at("/explore/?slice_id=7;drop")).toMatchObject({ objectType: "chart", ref: null });
    expect(at("/explore/?slice_id=1234567890123456789")).toMatchObject({ objectType: "chart", ref: null });
  });
});

describe("the focus message", () => {
  const focus = { objectType: "dashboard", objectId: "3", objectName: "Legacy KPIs", route: "/superset/dashboard/3/" };

  it("is taken with every field in bounds", () => {
    expect(focusIn({ type: FOCUS, focus })).toEqual(focus);
    expect(focusIn({ type: FOCUS, focus: { objectType: null, objectId: null, objectName: null, route: "/" } })).not.toBeNull();
  });

  it.each([
    ["another type", { type: READY, focus }],
    ["no focus", { type: FOCUS }],
    ["an object kind the chat has not", { type: FOCUS, focus: { ...focus, objectType: "robot" } }],
    ["an id of letters", { type: FOCUS, focus: { ...focus, objectId: "3 OR 1=1" } }],
    ["a numeric id", { type: FOCUS, focus: { ...focus, objectId: 3 } }],
    ["a long name", { type: FOCUS, focus: { ...focus, objectName: "x".repeat(257) } }],
    ["no route", { type: FOCUS, focus: { ...focus, route: undefined } }],
    ["a string", "sstools:focus"],
    ["null", null],
  ])("is refused with %s", (_what, data) => {
    expect(focusIn(data)).toBeNull();
  });

  it("ready is only the ready message", () => {
    expect(isReady({ type: READY })).toBe(true);
    expect(isReady({ type: FOCUS })).toBe(false);
    expect(isReady(READY)).toBe(false);
  });
});

describe("the framed page's side", () => {
  function framed() {
    const listeners: ((event: MessageEvent) => void)[] = [];
    const posted: [unknown, string][] = [];
    const parent = { postMessage: (data: unknown, origin: string) => posted.push([data, origin]) };
    const frame = {
      parent: parent as unknown as Window,
      addEventListener: (_type: string, listener: (event: MessageEvent) => void) => listeners.push(listener),
      removeEventListener: (_type: string, listener: (event: MessageEvent) => void) =>
        listeners.splice(listeners.indexOf(listener), 1),
    } as unknown as Window;
    const deliver = (source: unknown, origin: string, data: unknown) =>
      listeners.forEach((listener) => listener({ source, origin, data } as MessageEvent));
    return { frame, parent, posted, deliver, listeners };
  }

  it("says it is ready to exactly its Superset's origin and follows focus from its parent there alone", () => {
    const { frame, parent, posted, deliver, listeners } = framed();
    const seen: unknown[] = [];
    const stop = followDrawer(frame, "https://bi.example.test", (focus) => seen.push(focus));
    expect(posted).toEqual([[{ type: READY }, "https://bi.example.test"]]);
    const focus = { objectType: "sqllab", objectId: null, objectName: null, route: "/sqllab/" };
    deliver(parent, "https://evil.example.test", { type: FOCUS, focus }); // another origin
    deliver({}, "https://bi.example.test", { type: FOCUS, focus }); // another window at that origin
    deliver(parent, "https://bi.example.test:8443", { type: FOCUS, focus }); // another port
    deliver(parent, "https://bi.example.test", { type: FOCUS, focus: { ...focus, objectType: "x" } }); // malformed
    expect(seen).toEqual([]);
    deliver(parent, "https://bi.example.test", { type: FOCUS, focus });
    expect(seen).toEqual([focus]);
    stop();
    expect(listeners).toEqual([]);
  });
});
