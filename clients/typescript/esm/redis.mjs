// ESM entry point: the CommonJS build's exports, so that one copy of
// each class exists whichever way the package is loaded.
export * from '../dist/redis.js';
