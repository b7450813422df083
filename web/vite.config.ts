import adapter from "@sveltejs/adapter-static";
import { sveltekit } from "@sveltejs/kit/vite";
import { defineConfig } from "vitest/config";

export default defineConfig({
  plugins: [
    // Static files only: a reverse proxy serves them next to the agent's API paths.
    sveltekit({
      adapter: adapter({ pages: "build", assets: "build", fallback: "200.html" }),
      // Each built page carries this policy as a <meta http-equiv>, with the hashes of its own
      // inline bootstrap script added to script-src: nothing else inline ever runs. The proxy's
      // header (web/Caddyfile, tools/devstack/Caddyfile) repeats the rest and adds what a meta
      // cannot say (frame-ancestors); a browser enforces both, so the stricter of each wins.
      csp: {
        mode: "hash",
        directives: {
          "default-src": ["self"],
          "script-src": ["self"],
          // Svelte puts component styles in files, but the app shell's wrapper has a style attribute
          "style-src": ["self", "unsafe-inline"],
          "img-src": ["self", "data:"],
          "connect-src": ["self"],
          "object-src": ["none"],
          "base-uri": ["self"],
          "form-action": ["self"],
        },
      },
    }),
  ],
  test: {
    include: ["src/**/*.test.ts"],
    environment: "node",
  },
});
