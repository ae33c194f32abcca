// Builds the dashboard into the Python package, so `pip install agentbolt` ships it.
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

export default defineConfig({
  plugins: [react()],
  base: "/",
  build: {
    outDir: "../agentbolt/server/dashboard_dist",
    emptyOutDir: true,
    chunkSizeWarningLimit: 700,
    rollupOptions: {
      output: {
        // React + Mantine change rarely: one cacheable chunk apart from the app code.
        manualChunks(id) {
          if (id.includes("node_modules") && !id.includes("uplot")) return "vendor";
        },
      },
    },
  },
  server: {
    // `npm run dev` against a server on the default port: API calls go to it.
    proxy: { "/v1": "http://127.0.0.1:4747", "/healthz": "http://127.0.0.1:4747" },
  },
});
