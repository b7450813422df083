import { defineConfig } from "vite";

// The drawer Superset loads: one classic script (an IIFE, no module loader on Superset's pages),
// written next to the page's build so the same server serves it at /drawer.js.
export default defineConfig({
  build: {
    outDir: "build",
    emptyOutDir: false,
    lib: { entry: "src/drawer/drawer.ts", formats: ["iife"], name: "sstoolsDrawer", fileName: () => "drawer.js" },
  },
});
