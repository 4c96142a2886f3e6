export * from '../dist/zookeeper.js';
