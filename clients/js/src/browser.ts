// The browser build: everything in the package's main entry as the global `Slotflight`.
export * from "./index.js";
