// @fencing/client: fencing tokens for node-postgres.
//
// The lock-service sources live in their own entry points, so that only
// the client library you use is needed:
//   @fencing/client/etcd       EtcdTokenSource       (etcd3)
//   @fencing/client/zookeeper  ZooKeeperTokenSource  (node-zookeeper-client)
//   @fencing/client/redis      RedisTokenSource      (ioredis)

export { Token, TokenSource, StaticTokenSource } from './token';
export {
  FencingError, FencedOutError, FencedOutReason, StaleTokenError, TokenAlreadyUsedError,
  LeaseExpiredError, ClaimTakenOverError, TokenRequiredError, IdempotencyKeyReusedError,
  InProgressError, LockNotAcquiredError, classifyError,
} from './errors';
export {
  runFenced, FencedOptions, RetryOptions, IsolationLevel, Queryable, TransactionAbortedError,
} from './fenced';
export {
  runOnce, RunOnceOptions, BeginOptions, Claim, ClaimState,
  idemBegin, idemCheckpoint, idemComplete, idemAbandon,
} from './idempotency';
export { LeaseTokenSource, LeaseTokenSourceOptions } from './lease';
export { GenerationOptions, readGeneration, DEFAULT_GENERATION_TABLE } from './generation';
