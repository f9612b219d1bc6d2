// `npm run ingest`: the trace-ingest service on its own.
// TRACE_INGEST_PORT (8300), TRACE_INGEST_HOST (127.0.0.1), TRACE_DATA_DIR (.data/trace),
// TRACE_DATABASE_URL (PostgreSQL for the metadata; else SQLite in the data dir), TRACE_PUBLIC_URL, TRACE_SECURE_COOKIES, TRACE_TRUST_PROXY, TRACE_INGEST_QUEUE_LIMIT,
// TRACE_REDIS_URL (rate limits shared by replicas), TRACE_LOGIN_MAX_FAILURES (10), TRACE_RATE_LIMITS (per category: step=200/2000,...),
// TRACE_S3_ENDPOINT + TRACE_S3_BUCKET + TRACE_S3_ACCESS_KEY_ID + TRACE_S3_SECRET_ACCESS_KEY (+ TRACE_S3_REGION).
import path from 'node:path';
import { createIngestApp } from './app.ts';
import { optionsFromEnv } from './index.ts';

const ingest = await createIngestApp(optionsFromEnv(process.env));
const url = await ingest.listen(Number(process.env.TRACE_INGEST_PORT ?? 8300), process.env.TRACE_INGEST_HOST ?? '127.0.0.1');
process.stderr.write(`trace ingest listening on ${url} (data dir ${path.resolve(process.env.TRACE_DATA_DIR ?? '.data/trace')})\n`);
const stop = async () => {
  await ingest.close();
  process.exit(0);
};
process.once('SIGTERM', () => void stop());
process.once('SIGINT', () => void stop());
