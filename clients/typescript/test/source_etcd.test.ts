// The etcd source against its real service, its locks: test/source-suite.ts (the pauses: source_etcd_pause.test.ts).
import { sourceSuite } from './source-suite';

sourceSuite('etcd', 'locks');
