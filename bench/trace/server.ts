// The ingest service for bench/trace in its own process: prints one line
// `<url> <dsn> <key>` once it listens, with a fresh data dir and tenant.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createIngestApp } from '../../plugins/trace-ingest/app.ts';
import { parseDsn } from '../../sdk/index.ts';

const dir = await mkdtemp(path.join(tmpdir(), 'bench-ingest-'));
const ingest = await createIngestApp({ dataDir: dir, queueLimit: 100_000 });
const url = await ingest.listen(0);
await ingest.service.createTenant('bench', { modelioEnabled: true });
const { dsn } = await ingest.service.mintDsn('bench', 'bench', url);
process.stdout.write(`${url} ${dsn} ${parseDsn(dsn).key}\n`);
process.once('SIGTERM', () => void ingest.close().then(() => process.exit(0)));
