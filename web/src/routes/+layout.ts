// Static files, rendered in the browser: the page's state is the chat, not anything a server knows.
export const prerender = true;
export const ssr = false;
