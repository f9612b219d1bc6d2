// Built-in plugin: the mechanical step handlers.
import { PLUGIN_API_VERSION, type PluginDefinition } from '../../gateway/plugins/contract.ts';
import { ALL_HANDLERS } from './handlers.ts';

const plugin: PluginDefinition = {
  name: 'steps-core',
  version: '0.1.0',
  apiVersion: PLUGIN_API_VERSION,
  description: 'Step handlers: navigate, clicks, typing, forms, pagination, extraction, tabs, tools, done, and the brain loop (default-cua, hosted-api, unknown types)',
  register(host) {
    for (const h of ALL_HANDLERS) host.stepHandler(h);
  },
};

export default plugin;
