// The lease source against its real service, its locks: test/source-suite.ts (the pauses: source_lease_pause.test.ts).
import { sourceSuite } from './source-suite';

sourceSuite('lease', 'locks');
