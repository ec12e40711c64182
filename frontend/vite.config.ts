import react from "@vitejs/plugin-react";
import { defineConfig } from "vitest/config";

// Django (WhiteNoise) serves dist/ under /static/ and returns dist/index.html
// for every non-API path, so built asset URLs must start with /static/.
// The dev server keeps base "/" so client-side routes (/, /namespaces, ...)
// work at the same paths as in production.
export default defineConfig(({ command }) => ({
  base: command === "build" ? "/static/" : "/",
  plugins: [react()],
  build: {
    outDir: "dist",
    emptyOutDir: true,
    sourcemap: false,
    // Keep the entry chunk small; chart-heavy pages should be lazy routes.
    chunkSizeWarningLimit: 600,
    rollupOptions: {
      output: {
        // Libraries change less often than app code: separate, long-cached chunk.
        manualChunks(id) {
          if (/node_modules\/(react|react-dom|scheduler|react-router|@tanstack)\//.test(id)) return "vendor";
          return undefined;
        },
      },
    },
  },
  server: {
    port: 5173,
    strictPort: false,
    proxy: {
      "/api": {
        target: "http://127.0.0.1:8000",
        changeOrigin: false,
      },
    },
  },
  test: {
    environment: "node",
    include: ["src/**/*.test.{ts,tsx}"],
    setupFiles: ["src/test/setup.ts"],
    restoreMocks: true,
  },
}));
