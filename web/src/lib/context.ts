/** What a chat's context may hold, as the agent checks it (`sstools.agent.limits.UiContext`):
 * the kinds of object, an id's digits, a name's and a route's length, an environment id. One
 * place for the page's URL parameters, the drawer's messages and the drawer itself. */

export const OBJECT_TYPES = ["dashboard", "dataset", "migration", "chart", "sqllab"] as const;
export type ObjectType = (typeof OBJECT_TYPES)[number];
export const MAX_NAME = 256;
export const MAX_ROUTE = 512;

export function isObjectType(value: unknown): value is ObjectType {
  return OBJECT_TYPES.includes(value as ObjectType);
}

/** An object's id: the digits of a number, at most 18 of them. */
export function isObjectId(value: unknown): value is string {
  return typeof value === "string" && /^\d{1,18}$/.test(value);
}

/** An environment id as the agent and ops accept one: lower-case letters, digits, "-" and "_",
 * at most 63 characters (sstools.common.tool_args.ENV_ID_PATTERN). */
export function isEnvId(value: string): boolean {
  return /^[a-z0-9][a-z0-9_-]{0,62}$/.test(value);
}
