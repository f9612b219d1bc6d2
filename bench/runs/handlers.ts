// The step handlers of steps-core, registered on a bare plugin host: what the benches
// run straight on an agent session, without a gateway.
import path from 'node:path';
import type { PluginHost, StepHandler } from '../../gateway/plugins/contract.ts';
import stepsCore from '../../plugins/steps-core/index.ts';

/** steps-core's handlers by step type, its data under `dir`. */
export async function coreHandlers(dir: string): Promise<Map<string, StepHandler>> {
  const handlers = new Map<string, StepHandler>();
  const host: PluginHost = {
    apiVersion: stepsCore.apiVersion,
    log: { info() {}, warn() {}, error() {} },
    dataDir: path.join(dir, 'plugins', stepsCore.name),
    stepHandler: (h) => h.types.forEach((t) => handlers.set(t, h)),
    brain() {},
    recipe() {},
    hostTool() {},
    traceSink() {},
    routes() {},
  };
  await stepsCore.register(host);
  return handlers;
}
