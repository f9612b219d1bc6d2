// Recipes: runtime extraction schemas per tenant, kept in the store of record
// (SQLite by default, Redis when shared), with the recipes plugins registered (the shipped ones) resolved
// after the tenant's own. A write that fails to persist is reported and not applied.
import { ServiceError, notFound } from '../errors.ts';
import { unreachableDependency, type KeyedStore, type StateBackend } from '../state/backend.ts';
import { validator, describeError } from '../../schemas/index.ts';

import type { Recipe } from '../../schemas/types.gen.ts';

export type { Recipe };

export interface RecipeListing {
  name: string;
  source: 'tenant' | 'shipped';
}

const validateRecipe = validator<Recipe>('recipe.schema.json');
/** A name the schema would refuse names no recipe (and never reaches the store: PostgreSQL refuses NUL in a key). */
const validName = validator<string>('recipe.schema.json#/$defs/RecipeName');

export function checkRecipe(body: unknown): Recipe {
  if (!validateRecipe(body)) throw new ServiceError('bad_request', describeError('', validateRecipe.errors));
  return body;
}

/** The recipes plugins registered (the plugin host's registry). */
export interface ShippedRecipes {
  recipe(name: string): Recipe | undefined;
  recipeNames(): string[];
}

export class RecipeStore {
  constructor(
    private readonly backend: StateBackend,
    private readonly shipped: ShippedRecipes,
    private readonly maxPerTenant: number,
  ) {}

  private store(tenantId: string): KeyedStore<Recipe> {
    return this.backend.store<Recipe>(`recipes:${tenantId}`);
  }

  private async tenantNames(tenantId: string): Promise<string[]> {
    return this.store(tenantId).keys();
  }

  async list(tenantId: string): Promise<RecipeListing[]> {
    const own = await this.tenantNames(tenantId);
    const ownSet = new Set(own);
    return [
      ...own.map((name) => ({ name, source: 'tenant' as const })),
      ...this.shipped.recipeNames().filter((n) => !ownSet.has(n)).map((name) => ({ name, source: 'shipped' as const })),
    ];
  }

  /** The tenant's recipe of that name, else the shipped one, else 404. */
  async resolve(tenantId: string, name: string): Promise<Recipe> {
    if (!validName(name)) throw notFound('recipe not found');
    const own = await this.store(tenantId).get(name);
    if (own) return own;
    const shipped = this.shipped.recipe(name);
    if (shipped) return shipped;
    throw notFound(`recipe '${name}' not found`);
  }

  async put(tenantId: string, recipe: Recipe): Promise<Recipe> {
    const s = this.store(tenantId);
    const exists = (await s.get(recipe.name)) !== undefined;
    if (!exists && (await this.tenantNames(tenantId)).length >= this.maxPerTenant) {
      throw new ServiceError('conflict', `recipe limit reached: a tenant may store at most ${this.maxPerTenant} recipes; delete one first`);
    }
    const stored: Recipe = { name: recipe.name, schema: recipe.schema };
    try {
      await s.set(recipe.name, stored);
    } catch (err) {
      // a store that cannot be reached is 503 (retry later), not a failed write
      if (unreachableDependency(err)) throw err;
      throw new ServiceError('persist_failed', `recipe '${recipe.name}' could not be stored and was not applied`);
    }
    return stored;
  }

  async delete(tenantId: string, name: string): Promise<{ name: string; deleted: boolean }> {
    const s = this.store(tenantId);
    if (!validName(name)) throw notFound('recipe not found');
    if ((await s.get(name)) === undefined) throw notFound(`recipe '${name}' not found`);
    let deleted: boolean;
    try {
      deleted = await s.delete(name);
    } catch (err) {
      if (unreachableDependency(err)) throw err;
      throw new ServiceError('persist_failed', `recipe '${name}' could not be deleted`);
    }
    return { name, deleted };
  }
}
