// Builds the console into crates/cp/console/dist with fixed file names
// (no content hashes): meshlink-cp embeds exactly these files with
// include_bytes! (crates/cp/src/api/console.rs), so a rename here must be
// matched there. Cytoscape.js goes into its own chunk (graph.js), loaded
// only when the Network page opens.
import { defineConfig } from "vite";

export default defineConfig({
  base: "/",
  // `npm run dev`: the API calls go to a running control plane.
  server: { proxy: { "/api": process.env.MESHLINK_SERVER ?? "http://127.0.0.1:5681" } },
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: "../crates/cp/console/dist",
    emptyOutDir: true,
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    cssCodeSplit: false,
    sourcemap: false,
    rollupOptions: {
      output: {
        entryFileNames: "assets/app.js",
        chunkFileNames: "assets/[name].js",
        assetFileNames: "assets/[name][extname]",
        manualChunks(id: string) {
          return id.includes("node_modules/cytoscape") ? "graph" : undefined;
        },
      },
    },
  },
});
