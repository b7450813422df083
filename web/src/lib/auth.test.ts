import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  currentSession,
  handoffRefusal,
  login,
  LoginFailed,
  rememberPerson,
  renewSession,
  ssoMessageKey,
  takeHandoff,
  type Session,
} from "./auth.ts";
import { translate } from "./i18n.ts";
import { memoryStorage as memory } from "./memory-storage.ts";

type Call = { url: string; init: RequestInit };

/** fetch answered by `answers` (path → answer), every call recorded; unknown paths get a 404. */
function opsAnswering(answers: Record<string, (init: RequestInit) => Response>): Call[] {
  const calls: Call[] = [];
  vi.stubGlobal("fetch", async (url: string, init: RequestInit = {}) => {
    calls.push({ url, init });
    return answers[url]?.(init) ?? new Response("no", { status: 404 });
  });
  return calls;
}

const issued = (name: string) => ({ access_token: `access-${name}`, expires_in: 300, refresh_token: `refresh-${name}` });
const me = (username: string, role: string) => () => Response.json({ username, role, examples: [] });
const refused = (code: string, status = 401) => () =>
  Response.json({ detail: { code, message: "refused" } }, { status });

function keepSession(session: Session): void {
  sessionStorage.setItem("sstools.session", JSON.stringify(session));
}

const kept: Session = { token: "access-anna", username: "anna", role: "analyst", refreshToken: "refresh-anna", expiresAt: Date.now() + 300_000 };

beforeEach(() => {
  vi.stubGlobal("sessionStorage", memory());
});

afterEach(() => {
  vi.unstubAllGlobals();
});

describe("why a single sign-on's hand-off was refused", () => {
  it("is ops' reason when the page knows it", () => {
    expect(handoffRefusal(new LoginFailed(401, null, "oidc_handoff_foreign"))).toBe("oidc_handoff_foreign");
    expect(handoffRefusal(new LoginFailed(401, null, "oidc_handoff_invalid"))).toBe("oidc_handoff_invalid");
    expect(handoffRefusal(new LoginFailed(401, null, "user_inactive"))).toBe("user_inactive");
  });

  it("is a plain failure for anything else: a reason it does not know, no reason, no answer", () => {
    expect(handoffRefusal(new LoginFailed(401, null, "something_new"))).toBe("sso_failed");
    expect(handoffRefusal(new LoginFailed(502))).toBe("sso_failed");
    expect(handoffRefusal(new TypeError("Failed to fetch"))).toBe("sso_failed");
  });

  it("is said in words the person can act on, in both languages", () => {
    expect(translate("en", ssoMessageKey("oidc_handoff_foreign"))).toBe(
      "This sign-in was started in another browser, so it was not used. Sign in here yourself.",
    );
    expect(translate("ru", ssoMessageKey("oidc_handoff_foreign"))).toBe(
      "Этот вход был начат в другом браузере, поэтому он не использован. Войдите здесь сами.",
    );
    expect(ssoMessageKey("oidc_handoff_invalid")).toBe("sso_oidc_handoff_invalid");
    expect(ssoMessageKey("user_inactive")).toBe("sso_oidc_user_disabled");
    expect(ssoMessageKey("handoff_other_person")).toBe("sso_handoff_other_person");
    for (const code of ["oidc_handoff_foreign", "oidc_handoff_invalid", "handoff_other_person"]) {
      expect(translate("ru", ssoMessageKey(code))).toMatch(/[а-яё]/i);
      expect(translate("en", ssoMessageKey(code))).not.toMatch(/[а-яё]/i);
    }
  });

  it("keeps the provider's own refusals, and the drawer's silent try its own words", () => {
    expect(ssoMessageKey("oidc_unmapped")).toBe("sso_oidc_unmapped");
    expect(ssoMessageKey("oidc_name_taken")).toBe("sso_oidc_name_taken");
    expect(ssoMessageKey("oidc_denied")).toBe("sso_oidc_denied");
    expect(ssoMessageKey("oidc_denied", true)).toBe("ssoSilentFailed");
    expect(ssoMessageKey("oidc_handoff_foreign", true)).toBe("sso_oidc_handoff_foreign");
  });

  it("tells someone still signed in that they still are, never to sign in again", () => {
    expect(ssoMessageKey("oidc_handoff_foreign", false, true)).toBe("ssoKept_oidc_handoff_foreign");
    expect(translate("en", ssoMessageKey("oidc_handoff_foreign", true, true))).toBe(
      "A sign-in started in another browser was not used: you are still signed in as before.",
    );
    expect(ssoMessageKey("oidc_handoff_invalid", false, true)).toBe("ssoKept_oidc_handoff_invalid");
    expect(ssoMessageKey("no_such_code", false, true)).toBe("ssoKept_failed");
    expect(ssoMessageKey("constructor", false, true)).toBe("ssoKept_failed");
    expect(ssoMessageKey("handoff_other_person", false, true)).toBe("sso_handoff_other_person");
    expect(ssoMessageKey("oidc_unmapped", false, true)).toBe("sso_oidc_unmapped");
    for (const key of ["ssoKept_oidc_handoff_foreign", "ssoKept_oidc_handoff_invalid", "ssoKept_failed"] as const) {
      expect(translate("ru", key)).toMatch(/[а-яё]/i);
      expect(translate("en", key)).not.toMatch(/[а-яё]/i);
    }
  });

  it("is the generic text for a code it does not know, whatever the address's fragment says", () => {
    for (const code of ["sso_failed", "no_such_code", "constructor", "__proto__", "toString", ""]) {
      expect(ssoMessageKey(code), code).toBe("sso_failed");
    }
  });
});

describe("a single sign-on's hand-off taken in a tab", () => {
  it("keeps the session it stands for, with the person's name and role, sending the browser's cookies", async () => {
    const calls = opsAnswering({
      "/api/auth/oidc/session": () => Response.json(issued("ana")),
      "/api/auth/me": me("ana", "analyst"),
    });
    expect(await takeHandoff("code-1")).toBeNull();
    expect(currentSession()).toMatchObject({ token: "access-ana", username: "ana", role: "analyst", refreshToken: "refresh-ana" });
    const [posted, asked] = calls;
    expect(posted.init.method).toBe("POST");
    expect(posted.init.body).toBe('{"handoff":"code-1"}');
    expect(posted.init.credentials).toBe("same-origin"); // ops' binding cookie goes with it
    expect(asked.init.headers).toEqual({ Authorization: "Bearer access-ana" });
  });

  it("refused by ops as another browser's, signs no one in and says why", async () => {
    const calls = opsAnswering({ "/api/auth/oidc/session": refused("oidc_handoff_foreign") });
    expect(await takeHandoff("carried-in")).toBe("oidc_handoff_foreign");
    expect(currentSession()).toBeNull();
    expect(calls.map((call) => call.url)).toEqual(["/api/auth/oidc/session"]);
  });

  it("refused, leaves the session kept in the tab as it was", async () => {
    keepSession(kept);
    opsAnswering({ "/api/auth/oidc/session": refused("oidc_handoff_foreign") });
    expect(await takeHandoff("carried-in")).toBe("oidc_handoff_foreign");
    expect(currentSession()).toEqual(kept);
    opsAnswering({ "/api/auth/oidc/session": refused("oidc_handoff_invalid") });
    expect(await takeHandoff("used")).toBe("oidc_handoff_invalid");
    expect(currentSession()).toEqual(kept);
  });

  it("fails plainly on an answer that is not ops' (a proxy's error page), signing no one in", async () => {
    opsAnswering({ "/api/auth/oidc/session": () => new Response("<html>Bad Gateway</html>", { status: 502 }) });
    expect(await takeHandoff("code")).toBe("sso_failed");
    expect(currentSession()).toBeNull();
  });

  it("fails when ops will not say whose it is, keeping nothing and revoking what it was given", async () => {
    const calls = opsAnswering({
      "/api/auth/oidc/session": () => Response.json(issued("ana")),
      "/api/auth/me": refused("user_inactive"),
      "/api/auth/logout": () => new Response(null, { status: 204 }),
    });
    expect(await takeHandoff("code")).toBe("user_inactive");
    expect(currentSession()).toBeNull();
    expect(calls.filter((call) => call.url === "/api/auth/logout").map((call) => call.init.body)).toEqual(['{"refresh_token":"refresh-ana"}']);
  });

  it("never replaces another person's session in the tab, even when ops took it: it is revoked at once", async () => {
    keepSession(kept);
    const calls = opsAnswering({
      "/api/auth/oidc/session": () => Response.json(issued("mallory")),
      "/api/auth/me": me("mallory", "admin"),
      "/api/auth/logout": () => new Response(null, { status: 204 }),
    });
    expect(await takeHandoff("code")).toBe("handoff_other_person");
    expect(currentSession()).toEqual(kept);
    const revoked = calls.filter((call) => call.url === "/api/auth/logout").map((call) => call.init.body);
    expect(revoked).toEqual(['{"refresh_token":"refresh-mallory"}']);
  });

  it("renews the same person's session, revoking the one it replaces", async () => {
    keepSession(kept);
    const calls = opsAnswering({
      "/api/auth/oidc/session": () => Response.json(issued("anna-2")),
      "/api/auth/me": me("anna", "operator"),
      "/api/auth/logout": () => new Response(null, { status: 204 }),
    });
    expect(await takeHandoff("code")).toBeNull();
    expect(currentSession()).toMatchObject({ token: "access-anna-2", username: "anna", role: "operator" });
    const revoked = calls.filter((call) => call.url === "/api/auth/logout").map((call) => call.init.body);
    expect(revoked).toEqual(['{"refresh_token":"refresh-anna"}']);
  });
});

describe("the kept session's person", () => {
  it("has the role ops gives them after a password sign-in", async () => {
    opsAnswering({ "/api/auth/login": () => Response.json(issued("admin")), "/api/auth/me": me("admin", "admin") });
    const session = await login("admin", "secret-password");
    expect(session).toMatchObject({ username: "admin", role: "admin", token: "access-admin" });
    expect(currentSession()).toEqual(session);
  });

  it("is still signed in when ops cannot say the role (the password was right); the role then comes later", async () => {
    opsAnswering({ "/api/auth/login": () => Response.json(issued("admin")), "/api/auth/me": () => new Response("", { status: 503 }) });
    const session = await login("admin", "secret-password");
    expect(session.username).toBe("admin");
    expect(session.role).toBeUndefined();
    expect(rememberPerson({ username: "admin", role: "admin" })?.role).toBe("admin");
    expect(currentSession()).toMatchObject({ username: "admin", role: "admin", token: "access-admin" });
  });

  it("keeps a wrong password's refusal as it was", async () => {
    opsAnswering({ "/api/auth/login": refused("invalid_credentials") });
    const failure = await login("admin", "wrong").catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(LoginFailed);
    expect((failure as LoginFailed).retryAfter).toBeNull();
  });

  it("keeps the role across a renewal of the tokens", async () => {
    keepSession({ ...kept, expiresAt: Date.now() });
    opsAnswering({ "/api/auth/refresh": () => Response.json(issued("anna-renewed")) });
    const renewed = await renewSession("access-anna");
    expect(renewed).toMatchObject({ token: "access-anna-renewed", username: "anna", role: "analyst" });
    expect(currentSession()).toEqual(renewed);
  });

  it("takes ops' word for the role of the person it is, never another's", () => {
    keepSession(kept);
    expect(rememberPerson({ username: "anna", role: "operator" })).toMatchObject({ username: "anna", role: "operator", token: "access-anna" });
    expect(rememberPerson({ username: "mallory", role: "admin" })).toMatchObject({ username: "anna", role: "operator" });
  });
});
