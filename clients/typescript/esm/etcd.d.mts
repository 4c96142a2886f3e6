export * from '../dist/etcd.js';
