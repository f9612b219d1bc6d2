// /v1/recipes: tenant-scoped extraction schemas. Writes need the run scope,
// reads the status scope (docs/decisions.md).
import { checkRecipe } from '../recipes/store.ts';
import type { Ctx } from '../context.ts';
import { param, type RouteSpec } from './route.ts';

const nameParam = (ctx: Ctx): string => param(ctx, 'name');

export const recipeRoutes: RouteSpec[] = [
  {
    method: 'POST',
    path: '/v1/recipes',
    ok: 'responses.schema.json#/$defs/StoredRecipe',
    summary: 'Register or overwrite a recipe {name, schema}',
    tags: ['recipes'],
    auth: true,
    scope: 'run',
    body: { schema: 'recipe.schema.json' },
    async handler(ctx, s) {
      ctx.body = await s.recipes.put(ctx.state.tenant!.tenant_id, checkRecipe(ctx.state.body));
    },
  },
  {
    method: 'GET',
    path: '/v1/recipes',
    ok: 'responses.schema.json#/$defs/RecipeNames',
    summary: "List the tenant's recipes and the shipped ones it has not overridden",
    tags: ['recipes'],
    auth: true,
    scope: 'status',
    async handler(ctx, s) {
      ctx.body = { recipes: await s.recipes.list(ctx.state.tenant!.tenant_id) };
    },
  },
  {
    method: 'GET',
    path: '/v1/recipes/:name',
    ok: 'responses.schema.json#/$defs/StoredRecipe',
    summary: "A recipe by name: the tenant's own, else the shipped one",
    tags: ['recipes'],
    auth: true,
    scope: 'status',
    async handler(ctx, s) {
      ctx.body = await s.recipes.resolve(ctx.state.tenant!.tenant_id, nameParam(ctx));
    },
  },
  {
    method: 'DELETE',
    path: '/v1/recipes/:name',
    ok: 'responses.schema.json#/$defs/RecipeDeleted',
    summary: "Delete one of the tenant's recipes",
    tags: ['recipes'],
    auth: true,
    scope: 'run',
    async handler(ctx, s) {
      ctx.body = await s.recipes.delete(ctx.state.tenant!.tenant_id, nameParam(ctx));
    },
  },
];
