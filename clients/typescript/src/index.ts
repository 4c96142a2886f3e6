// @fencing/client: fencing tokens for node-postgres.
//
// The lock services' sources live in entry points of their own, so that
// only the client library of the service you use is needed:
//   @fencing/client/etcd       EtcdSource       (etcd3)
//   @fencing/client/zookeeper  ZooKeeperSource  (node-zookeeper-client)
//   @fencing/client/redis      RedisSource      (ioredis)

export { Token, TokenSource, StaticToken, Scope, AcquireOptions } from './token';
export {
  FencingError, FencingDatabaseError, FencedOutError, FencedOutReason, StaleTokenError, TokenAlreadyUsedError,
  LeaseExpiredError, ClaimTakenOverError, TokenRequiredError, KeyReusedError, KeyInProgressError,
  GuardAlteredError, NotAcquiredError, LockLostError, classifyError,
} from './errors';
export {
  runFenced, runFencedMany, runLocked, FencedOptions, FencedContext, IsolationLevel, Queryable,
  TransactionAbortedError,
} from './fenced';
export {
  runOnce, RunOnceOptions, BeginOptions, Claim, ClaimState,
  idemBegin, idemCheckpoint, idemComplete, idemAbandon,
} from './idempotency';
export { LeaseSource, LeaseSourceOptions } from './lease';
export { SourceOptions } from './source';
export { GenerationOptions, DEFAULT_GENERATION_TABLE } from './generation';
