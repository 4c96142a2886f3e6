// The zookeeper source against its real service, the pauses: test/source-suite.ts.
import { sourceSuite } from './source-suite';

sourceSuite('zookeeper', 'pauses');
