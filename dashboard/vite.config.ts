// Builds the dashboard into the Python package, so `pip install agentbolt` ships it.
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

export default defineConfig({
  plugins: [react()],
  base: "/",
  build: {
    outDir: "../agentbolt/server/dashboard/dist",
    emptyOutDir: true,
    chunkSizeWarningLimit: 700,
    rollupOptions: {
      output: {
        // React and the router change rarely: one cacheable chunk apart from the app code.
        // Mantine is left to Rollup, so the entry chunk holds only the components of the
        // first screen, and each page's chunk the rest (a "vendor" chunk of all of Mantine
        // would put every page's components on the first render's path).
        manualChunks(id) {
          if (/node_modules\/(react|react-dom|scheduler|react-router)\//.test(id)) return "vendor";
        },
      },
    },
  },
  server: {
    // `npm run dev` against a server on the default port: API calls go to it.
    proxy: { "/v1": "http://127.0.0.1:4747", "/healthz": "http://127.0.0.1:4747" },
  },
});
