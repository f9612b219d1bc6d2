// Prometheus metrics of the spec plus process defaults and an HTTP duration
// histogram, on a registry of this gateway's own (tests run several gateways
// in one process). prom-client is loaded dynamically: without it /metrics is
// 503 and every recorder is a no-op.
export type PromModule = typeof import('prom-client');

export interface Metrics {
  readonly available: boolean;
  predictRequest(tenantId: string, mode: string, outcome: string): void;
  rateLimitRejection(tenantId: string, kind: 'rate' | 'concurrent'): void;
  concurrentRuns(tenantId: string, value: number): void;
  loopTermination(reason: string): void;
  httpRequest(route: string, method: string, status: number, seconds: number): void;
  unhandledRejection(): void;
  /** a run placed on a remote plane agent (with how long the session took to start), or refused by it */
  planePlacement(agent: string, outcome: 'placed' | 'refused', seconds?: number): void;
  /** the agent's slots this replica's runs hold: up while a run holds one, down when it lets go */
  planeBusy(agent: string, busy: boolean): void;
  render(): Promise<{ contentType: string; body: string }>;
}

const noop: Metrics = {
  available: false,
  predictRequest() {},
  rateLimitRejection() {},
  concurrentRuns() {},
  loopTermination() {},
  httpRequest() {},
  unhandledRejection() {},
  planePlacement() {},
  planeBusy() {},
  async render() {
    throw new Error('metrics unavailable');
  },
};

export async function createMetrics(load: () => Promise<PromModule> = () => import('prom-client')): Promise<Metrics> {
  let prom: PromModule;
  try {
    prom = await load();
  } catch {
    return noop;
  }
  const registry = new prom.Registry();
  prom.collectDefaultMetrics({ register: registry });
  const predict = new prom.Counter({
    name: 'service_predict_requests_total',
    help: 'POST /v1/predict requests by tenant, action and outcome',
    labelNames: ['tenant_id', 'mode', 'outcome'] as const,
    registers: [registry],
  });
  const rejections = new prom.Counter({
    name: 'service_rate_limit_rejections_total',
    help: 'Requests refused by the rate or concurrency limiter',
    labelNames: ['tenant_id', 'kind'] as const,
    registers: [registry],
  });
  const concurrent = new prom.Gauge({
    name: 'service_concurrent_runs',
    help: 'Runs holding a concurrency slot, per tenant',
    labelNames: ['tenant_id'] as const,
    registers: [registry],
  });
  const loops = new prom.Counter({
    name: 'service_loop_termination_total',
    help: 'Loop steps ended, by reason',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  const http = new prom.Histogram({
    name: 'service_http_request_duration_seconds',
    help: 'HTTP request duration by route, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const unhandled = new prom.Counter({
    name: 'service_unhandled_rejections_total',
    help: 'Promise rejections nothing handled, logged and survived by the last-resort handler (each one is a bug)',
    registers: [registry],
  });
  const placements = new prom.Counter({
    name: 'service_plane_placements_total',
    help: 'Runs placed on a remote plane agent, or refused by it, per agent id',
    labelNames: ['agent', 'outcome'] as const,
    registers: [registry],
  });
  const sessionStart = new prom.Histogram({
    name: 'service_plane_session_start_seconds',
    help: 'Time from a slot claim to a bound session on a remote plane agent',
    labelNames: ['agent'] as const,
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const busy = new prom.Gauge({
    name: 'service_plane_agent_busy',
    help: 'Session slots of a remote plane agent that runs of this replica hold now',
    labelNames: ['agent'] as const,
    registers: [registry],
  });
  return {
    available: true,
    planePlacement: (agent, outcome, seconds) => {
      placements.inc({ agent, outcome });
      if (seconds !== undefined) sessionStart.observe({ agent }, seconds);
    },
    planeBusy: (agent, b) => (b ? busy.inc({ agent }) : busy.dec({ agent })),
    predictRequest: (tenant_id, mode, outcome) => predict.inc({ tenant_id, mode, outcome }),
    rateLimitRejection: (tenant_id, kind) => rejections.inc({ tenant_id, kind }),
    concurrentRuns: (tenant_id, value) => concurrent.set({ tenant_id }, value),
    loopTermination: (reason) => loops.inc({ reason }),
    httpRequest: (route, method, status, seconds) => http.observe({ route, method, status: String(status) }, seconds),
    unhandledRejection: () => unhandled.inc(),
    render: async () => ({ contentType: registry.contentType, body: await registry.metrics() }),
  };
}
