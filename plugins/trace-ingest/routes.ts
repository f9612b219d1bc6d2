// Every route of the ingest service under /api/v1, declared once: method,
// path, credential, body kind, schema and handler. The HTTP layer (app.ts),
// the batch route and the OpenAPI document all read this table. The ingest
// routes (DSN) live in routes-ingest.ts, the read and admin routes (cookie) in
// routes-read.ts, their shared shapes and helpers in route-kit.ts.
import type { RouteDef } from './route-kit.ts';
import { INGEST_ROUTES } from './routes-ingest.ts';
import { READ_ROUTES } from './routes-read.ts';

export type { AuthKind, Reply, RouteCtx, RouteDef } from './route-kit.ts';

export const ROUTES: RouteDef[] = [...INGEST_ROUTES, ...READ_ROUTES];
