import adapter from "@sveltejs/adapter-static";
import { sveltekit } from "@sveltejs/kit/vite";
import { defineConfig } from "vitest/config";

export default defineConfig({
  plugins: [
    // Static files only: a reverse proxy serves them next to the agent's API paths.
    sveltekit({ adapter: adapter({ pages: "build", assets: "build", fallback: "200.html" }) }),
  ],
  test: {
    include: ["src/**/*.test.ts"],
    environment: "node",
  },
});
