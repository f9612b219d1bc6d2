// Built-in plugin: the shipped extraction recipes, one JSON file each beside
// this module. A tenant's own recipe of the same name wins for that tenant.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { PLUGIN_API_VERSION, type PluginDefinition } from '../../gateway/plugins/contract.ts';

const plugin: PluginDefinition = {
  name: 'recipes',
  version: '0.1.0',
  apiVersion: PLUGIN_API_VERSION,
  description: 'Shipped extraction recipes (plugins/recipes/*.json)',
  register(host) {
    const dir = import.meta.dirname;
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.json')).sort()) {
      host.recipe(JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as { name: string; schema: Record<string, unknown> });
    }
  },
};

export default plugin;
