// Example recipe plugin: registers every *.json recipe beside this file. A plan
// uses one with `"_recipe": "example-cards"` on an extract_data step; a tenant's
// own recipe of the same name (POST /v1/recipes) wins for that tenant.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { PluginDefinition } from '../../../gateway/plugins/contract.ts';

const plugin: PluginDefinition = {
  name: 'example-recipes',
  version: '1.0.0',
  apiVersion: 1,
  description: 'Example recipe: example-cards',
  register(host) {
    for (const file of readdirSync(import.meta.dirname).filter((f) => f.endsWith('.json'))) {
      host.recipe(JSON.parse(readFileSync(path.join(import.meta.dirname, file), 'utf8')) as { name: string; schema: Record<string, unknown> });
    }
  },
};

export default plugin;
