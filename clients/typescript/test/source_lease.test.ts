// The lease source against its real service: test/source-suite.ts.
import { sourceSuite } from './source-suite';

sourceSuite('lease');
