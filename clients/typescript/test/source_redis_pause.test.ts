// The redis source against its real service, the pauses: test/source-suite.ts.
import { sourceSuite } from './source-suite';

sourceSuite('redis', 'pauses');
