// Which brain a request gets, and brains bound to a tenant. Single-brain
// deployments (SERVICE_MODEL) fix the brain and ignore cua_model; multi-backend
// ones honour cua_model (absent: default-cua). A brain handed to a step or a
// route is bound to the caller's tenant: its model-provider key (the secret
// file named by model_provider_secret_name under SERVICE_SECRETS_DIR) reaches
// the plugin through ThinkOptions, never through the plugin reading gateway
// state.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { badRequest, modelNotFound, modelNotServed } from '../errors.ts';
import type { Brain, ThinkOptions } from '../plugins/contract.ts';
import type { PluginRegistry } from '../plugins/registry.ts';
import type { TenantResolver } from '../http/tenants.ts';
import { DEFAULT_MODEL, acceptedModels, configuredModels } from './model-ids.ts';

export class BrainDirectory {
  constructor(
    private readonly plugins: PluginRegistry,
    private readonly tenants: TenantResolver,
    private readonly secretsDir: string,
    private readonly singleModel?: string,
  ) {}

  /** The brain id of a request: SERVICE_MODEL when set, else cua_model (default-cua); an id nobody accepts is 400. */
  select(requested: string | undefined): string {
    if (this.singleModel) return this.singleModel;
    const id = requested ?? DEFAULT_MODEL;
    if (!this.accepted().includes(id)) {
      throw badRequest(`cua_model: unknown brain '${id.slice(0, 64)}'; GET /v1/models lists the accepted ids`);
    }
    return id;
  }

  /** The brain id of an OpenAI-style request: like select, but an id no backend serves here is 404 model_not_found. */
  selectServed(requested: string | undefined): string {
    const id = this.singleModel ?? requested ?? DEFAULT_MODEL;
    this.mustServe(id);
    return id;
  }

  /** Throws 404 model_not_found, saying whether the id is accepted at all, unless a backend serves it here. */
  mustServe(id: string, param: string | null = 'model', why = ''): void {
    if (this.configured().includes(id)) return;
    throw this.accepted().includes(id) ? modelNotServed(id, param, why) : modelNotFound(id, param);
  }

  /** The ids the service accepts (GET /v1/models), served here or not. */
  accepted(): string[] {
    return acceptedModels(this.plugins.brainIds());
  }

  /** The ids a backend serves on this deployment (`served: true` on GET /v1/models). */
  configured(): string[] {
    return configuredModels(this.singleModel, this.plugins.brainIds());
  }

  /** A registered brain can answer questions about a screen (ask): model extraction and verify need one. */
  canRead(id: string): boolean {
    return typeof this.plugins.brain(id)?.ask === 'function';
  }

  /** The tenant's hosted-model key, or undefined when its secret file is missing or empty. */
  async providerKey(tenantId: string): Promise<string | undefined> {
    const tenant = await this.tenants.resolveById(tenantId);
    const name = tenant?.model_provider_secret_name ?? 'model_provider_api_key';
    // the name is schema-checked (no slashes, no leading dot): it stays inside the secrets directory
    const key = await readFile(path.join(this.secretsDir, name), 'utf8').catch(() => '');
    return key.trim() || undefined;
  }

  /** A registered brain whose calls carry the tenant (its key and prompts); undefined when no plugin serves the id. */
  forTenant(id: string, tenantId: string): Brain | undefined {
    const brain = this.plugins.brain(id);
    if (!brain) return undefined;
    const opts: ThinkOptions = { tenantId, providerKey: () => this.providerKey(tenantId) };
    const ask = brain.ask;
    return {
      id: brain.id,
      description: brain.description,
      think: (frames, task, history, screen, signal, asked) => brain.think(frames, task, history, screen, signal, { ...asked, ...opts }),
      ...(ask ? { ask: (frames: Parameters<NonNullable<Brain['ask']>>[0], prompt: string, signal?: AbortSignal) => ask.call(brain, frames, prompt, signal, opts) } : {}),
    };
  }
}
