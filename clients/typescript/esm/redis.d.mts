export * from '../dist/redis.js';
