// Built-in plugin: the brain backends of SERVICE_BRAINS_PATH (default
// config/brains.json), one brain per model id. The step handlers that drive
// brains (default-cua, hosted-api, unknown types, model extraction) are
// steps-core's: they see brains through the contract only, so an operator can
// replace the backends without losing them. Settings come from host.env.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { REPO_ROOT } from '../../shared/build.mjs';
import { PLUGIN_API_VERSION, type Brain, type PluginDefinition } from '../../gateway/plugins/contract.ts';
import { describeError, validator } from '../../schemas/index.ts';
import type { BrainBackend, BrainsConfig } from '../../schemas/types.gen.ts';
import { ChatBrain, type BrainEnv } from './chat-brain.ts';
import { CompactCuaBrain, parseWH } from './compact-cua.ts';
import { AnthropicComputerBrain } from './anthropic-computer.ts';
import { OpenAiComputerBrain } from './openai-computer.ts';

const validate = validator<BrainsConfig>('brains.schema.json');

type Env = Readonly<Record<string, string | undefined>>;
const val = (env: Env, k: string) => (env[k] === undefined || env[k] === '' ? undefined : env[k]);

export function brainEnv(env: Env, cwd = process.cwd()): BrainEnv {
  const prompts = val(env, 'SERVICE_PROMPTS_DIR');
  return {
    secretsDir: path.resolve(cwd, val(env, 'SERVICE_SECRETS_DIR') ?? path.join(val(env, 'SERVICE_DATA_DIR') ?? '.data', 'secrets')),
    ...(prompts ? { promptsDir: path.resolve(cwd, prompts) } : {}),
  };
}

/** A brain for one configured backend. */
export function makeBrain(id: string, backend: BrainBackend, env: BrainEnv, compactInput?: { width: number; height: number }): Brain {
  if (backend.protocol === 'compact-cua') return new CompactCuaBrain(id, backend, env, backend.input_wh ? undefined : compactInput);
  if (backend.protocol === 'anthropic-computer') return new AnthropicComputerBrain(id, backend, env);
  if (backend.protocol === 'openai-computer') return new OpenAiComputerBrain(id, backend, env);
  return new ChatBrain(id, backend, env);
}

/** The backends file: absent at the default path means no brains; absent at an explicit path, or invalid, refuses the plugin. */
export async function readBrainsConfig(env: Env, cwd = process.cwd()): Promise<{ file: string; config?: BrainsConfig }> {
  const explicit = val(env, 'SERVICE_BRAINS_PATH');
  const file = path.resolve(cwd, explicit ?? path.join(REPO_ROOT, 'config/brains.json'));
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if (!explicit && (err as NodeJS.ErrnoException).code === 'ENOENT') return { file };
    throw new Error(`SERVICE_BRAINS_PATH ${file} cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new Error(`${file} is not JSON`);
  }
  if (!validate(raw)) throw new Error(`${file}: ${describeError('', validate.errors)}`);
  return { file, config: raw };
}

const plugin: PluginDefinition = {
  name: 'brains',
  version: '0.1.0',
  apiVersion: PLUGIN_API_VERSION,
  description: 'Brain backends (openai-chat, compact-cua, hosted-api, anthropic-computer, openai-computer) from SERVICE_BRAINS_PATH',
  async register(host) {
    const env = host.env ?? process.env;
    const compactInput = parseWH(val(env, 'SERVICE_COMPACT_INPUT_WH'), 'SERVICE_COMPACT_INPUT_WH');
    const { file, config } = await readBrainsConfig(env);
    const benv = brainEnv(env);
    const ids = Object.keys(config?.brains ?? {});
    for (const id of ids) host.brain(makeBrain(id, config!.brains[id]!, benv, compactInput));
    if (ids.length === 0) host.log.warn('no brain backends configured; brain steps fail until SERVICE_BRAINS_PATH names a backends file', { file });
    else host.log.info('brain backends', { file, brains: ids.map((id) => `${id}=${config!.brains[id]!.protocol}`) });
  },
};

export default plugin;
