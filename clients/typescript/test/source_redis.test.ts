// The redis source against its real service, its locks: test/source-suite.ts (the pauses: source_redis_pause.test.ts).
import { sourceSuite } from './source-suite';

sourceSuite('redis', 'locks');
