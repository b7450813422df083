/** An answer's Markdown as HTML for the page: the agent writes its lists as Markdown tables and
 * its objects as links. Raw HTML in the text is shown as text, never run (`html: false`), and
 * markdown-it refuses `javascript:` and other script-bearing links; a link opens in a new tab,
 * with no way back into the chat's window. */

import MarkdownIt from "markdown-it";

const renderer = new MarkdownIt({ html: false, linkify: true, breaks: true });
const defaultLinkOpen = renderer.renderer.rules.link_open ?? ((tokens, index, options, _env, self) => self.renderToken(tokens, index, options));
renderer.renderer.rules.link_open = (tokens, index, options, env, self) => {
  tokens[index].attrSet("target", "_blank");
  tokens[index].attrSet("rel", "noopener noreferrer");
  return defaultLinkOpen(tokens, index, options, env, self);
};

export function markdown(text: string): string {
  return renderer.render(text);
}
