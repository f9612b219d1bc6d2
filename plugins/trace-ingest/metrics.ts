// Prometheus metrics of the ingest service (GET /api/v1/metrics), with
// prom-client as the gateway does (gateway/metrics.ts): one registry per app
// (tests run several in one process), the queue and record counts read from
// the service when scraped, and every request counted under the route that
// served it, named by its router path so label values stay few and stable.
import client from 'prom-client';
import type { IngestService } from './service.ts';

/** the route label of a request no route matched: a fixed value, never the raw path (unbounded label values) */
export const UNMATCHED = 'unmatched';

export interface IngestMetrics {
  request(route: string, method: string, status: number, seconds: number): void;
  render(): Promise<{ contentType: string; body: string }>;
}

export function createIngestMetrics(service: IngestService): IngestMetrics {
  const registry = new client.Registry();
  const queue = service.queue;
  new client.Gauge({
    name: 'trace_ingest_queue_depth',
    help: 'Writes waiting in the ingest queue.',
    registers: [registry],
    collect() {
      this.set(queue.depth);
    },
  });
  new client.Gauge({
    name: 'trace_ingest_queue_limit',
    help: 'Writes the ingest queue holds before it answers 429 (TRACE_INGEST_QUEUE_LIMIT).',
    registers: [registry],
    collect() {
      this.set(queue.limit);
    },
  });
  // counters kept by the service; copied at scrape time so the service needs no prom-client
  new client.Counter({
    name: 'trace_ingest_queue_rejected_total',
    help: 'Writes refused with 429 because the ingest queue was full: by the category whose share was full (step, event, screenshot, modelio), or all.',
    labelNames: ['category'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [category, n] of queue.rejected) this.inc({ category }, n);
    },
  });
  new client.Counter({
    name: 'trace_ingest_rate_limited_total',
    help: 'Records refused with 429 by a tenant rate limit, by category (step, event, screenshot, modelio).',
    labelNames: ['category'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [category, n] of service.limits.refused) this.inc({ category }, n);
    },
  });
  new client.Counter({
    name: 'trace_ingest_writes_total',
    help: 'Writes the ingest queue finished (stored or failed).',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(queue.processed);
    },
  });
  new client.Counter({
    name: 'trace_ingest_records_total',
    help: 'Records accepted by kind (events, screenshots, modelio, batches ...).',
    labelNames: ['kind'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [kind, n] of service.counters) this.inc({ kind }, n);
    },
  });
  const requests = new client.Counter({
    name: 'trace_ingest_http_requests_total',
    help: 'HTTP requests by route (router path, or unmatched), method and status.',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [registry],
  });
  const duration = new client.Histogram({
    name: 'trace_ingest_http_request_duration_seconds',
    help: 'HTTP request duration by route (router path, or unmatched) and method.',
    labelNames: ['route', 'method'] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60],
    registers: [registry],
  });
  return {
    request(route, method, status, seconds) {
      requests.inc({ route, method, status: String(status) });
      duration.observe({ route, method }, seconds);
    },
    async render() {
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
  };
}
