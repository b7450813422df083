/** JSON from the stack's REST APIs (same origin) under the person's token: a refused token is
 * renewed once and the call made again; refused again, the session is over. */

import type { SessionTokens, TaskProgress } from "./types.ts";

/** An API's refusal: its status and, where it said one, its typed `detail` (`{code, message}`,
 * or FastAPI's list of what failed validation). */
export class ApiError extends Error {
  constructor(
    readonly method: string,
    readonly path: string,
    readonly status: number,
    readonly detail: unknown = null,
  ) {
    super(`${method} ${path}: ${status}`);
  }

  /** The refusal's code (`last_admin`, `permission_denied`, ...), when it gave one. */
  get code(): string | null {
    const detail = this.detail as { code?: unknown } | null;
    return detail && typeof detail === "object" && typeof detail.code === "string" ? detail.code : null;
  }
}

export class SessionApi {
  constructor(private readonly session: SessionTokens) {}

  async json<T>(path: string, init: RequestInit = {}): Promise<T> {
    return (await (await this.ok(path, init)).json()) as T;
  }

  /** A JSON body sent with `method` (POST, PATCH), its JSON answer back. */
  send<T>(method: string, path: string, body: unknown): Promise<T> {
    return this.json<T>(path, { method, headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  }

  /** The answer's body as it came (a CSV export), read under the same token. */
  async blob(path: string): Promise<Blob> {
    return (await this.ok(path, {})).blob();
  }

  /** The answer to a call, once it is one of success; else an ApiError. */
  async ok(path: string, init: RequestInit): Promise<Response> {
    let token = await this.session.current();
    let response = await this.#fetch(path, init, token);
    if (response.status === 401 && token !== null) {
      token = await this.session.renew(token);
      if (token !== null) response = await this.#fetch(path, init, token);
    }
    if (response.status === 401) this.session.ended();
    if (!response.ok) {
      const body = (await response.json().catch(() => null)) as { detail?: unknown } | null;
      throw new ApiError(init.method ?? "GET", path, response.status, body?.detail ?? null);
    }
    return response;
  }

  #fetch(path: string, init: RequestInit, token: string | null): Promise<Response> {
    const headers = new Headers(init.headers);
    headers.set("Authorization", `Bearer ${token ?? ""}`);
    return fetch(path, { ...init, headers });
  }
}

export const TASK_ENDED = new Set(["success", "failed"]);

export interface TasksApi {
  task(id: string): Promise<TaskProgress>;
}

/** Ops' task status, as the person may read it with their own token (their own tasks;
 * operators see all): `/api/my/tasks/{id}` (the tool's path takes the agent's token too). */
export class OpsTasksApi implements TasksApi {
  constructor(private readonly api: SessionApi) {}

  task(id: string): Promise<TaskProgress> {
    return this.api.json<TaskProgress>(`/api/my/tasks/${encodeURIComponent(id)}`);
  }
}
