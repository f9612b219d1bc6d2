// The last-resort handler of the gateway process. Node ends the process on an
// unhandled rejection; here that would end every tenant's service for one run's
// bug, so the rejection is logged (with its stack, for the fix) and counted in
// service_unhandled_rejections_total instead. Uncaught exceptions still end the
// process: after one, no state in it can be trusted.
import type { Logger } from './log.ts';
import type { Metrics } from './metrics.ts';

export function survivePromiseBugs(log: Logger, metrics: Metrics): () => void {
  const onRejection = (reason: unknown) => {
    metrics.unhandledRejection();
    const err = reason instanceof Error ? { name: reason.name, message: reason.message, stack: reason.stack } : { value: String(reason).slice(0, 500) };
    log.error({ err }, 'unhandled promise rejection (survived; this is a bug)');
  };
  process.on('unhandledRejection', onRejection);
  return () => process.off('unhandledRejection', onRejection);
}
