/** JSON from the stack's REST APIs (same origin) under the person's token: a refused token is
 * renewed once and the call made again; refused again, the session is over. */

import type { SessionTokens, TaskProgress } from "./types.ts";

export class SessionApi {
  constructor(private readonly session: SessionTokens) {}

  async json<T>(path: string, init: RequestInit = {}): Promise<T> {
    let token = await this.session.current();
    let response = await this.#fetch(path, init, token);
    if (response.status === 401 && token !== null) {
      token = await this.session.renew(token);
      if (token !== null) response = await this.#fetch(path, init, token);
    }
    if (response.status === 401) this.session.ended();
    if (!response.ok) throw new Error(`${init.method ?? "GET"} ${path}: ${response.status}`);
    return (await response.json()) as T;
  }

  #fetch(path: string, init: RequestInit, token: string | null): Promise<Response> {
    return fetch(path, { ...init, headers: { Authorization: `Bearer ${token ?? ""}` } });
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
