/** An answer's Markdown as HTML for the page: the agent writes its lists as Markdown tables and
 * its objects as links. Raw HTML in the text is shown as text, never run (`html: false`), and
 * markdown-it refuses `javascript:` and other script-bearing links; a link opens in a new tab,
 * with no way back into the chat's window.
 *
 * An answer may repeat what Superset or a database holds (a model quotes a chart's name, a cell),
 * so nothing in it may fetch anything or pass for the page's own: an image is shown as its
 * Markdown source, never loaded (its address could carry data out), and a link to anywhere but
 * this page or a configured Superset is marked external — an arrow, the whole address as its
 * title, `data-external` — and followed without referrer or endorsement. */

import MarkdownIt from "markdown-it";

/** Where links lead to the page's own objects: its origin, and each configured Superset's. */
export interface TrustedOrigins {
  self: string;
  supersets: readonly string[];
}

type RenderEnv = { trusted: TrustedOrigins };

const renderer = new MarkdownIt({ html: false, linkify: true, breaks: true });
const rules = renderer.renderer.rules;
const escapeHtml = renderer.utils.escapeHtml;
type Rule = NonNullable<typeof rules.link_open>;
const plain: Rule = (tokens, index, options, _env, self) => self.renderToken(tokens, index, options);
const linkOpen = rules.link_open ?? plain;
const linkClose = rules.link_close ?? plain;

function isExternal(href: string, env: unknown): boolean {
  const { trusted } = env as RenderEnv;
  let origin: string;
  try {
    origin = new URL(href, trusted.self).origin; // a relative address is the page's own
  } catch {
    return true;
  }
  return origin !== new URL(trusted.self).origin && !trusted.supersets.includes(origin);
}

rules.link_open = (tokens, index, options, env, self) => {
  const token = tokens[index];
  const href = String(token.attrGet("href") ?? "");
  token.attrSet("target", "_blank");
  if (isExternal(href, env)) {
    token.attrSet("rel", "noopener noreferrer nofollow");
    token.attrSet("data-external", "true");
    token.attrSet("title", href);
    token.meta = { external: true };
  } else {
    token.attrSet("rel", "noopener noreferrer");
  }
  return linkOpen(tokens, index, options, env, self);
};

rules.link_close = (tokens, index, options, env, self) => {
  // links do not nest: the nearest link_open before this close is its own
  let open = index - 1;
  while (open >= 0 && tokens[open].type !== "link_open") open -= 1;
  const mark = tokens[open]?.meta?.external ? '<span class="external-mark" aria-hidden="true">↗</span>' : "";
  return mark + linkClose(tokens, index, options, env, self);
};

// An image is its source as text: `![alt](address)`.
rules.image = (tokens, index) => {
  const token = tokens[index];
  return escapeHtml(`![${token.content}](${String(token.attrGet("src") ?? "")})`);
};

export function markdown(text: string, trusted: TrustedOrigins): string {
  return renderer.render(text, { trusted } satisfies RenderEnv);
}
