// The brain ids the service accepts (GET /v1/models). Which backend serves each
// id is configuration (the brains issue); this list is the contract.
export const MODEL_IDS = ['default-cua', 'compact-cua', 'tuned-cua', 'mid-cua-8b', 'mid-cua-32b', 'large-cua-32b', 'large-cua-72b', 'hosted-api'] as const;
export const DEFAULT_MODEL = 'default-cua';

/** The accepted ids (GET /v1/models): the spec's eight, then the new ids plugins registered brains under. */
export function acceptedModels(pluginBrains: string[] = []): string[] {
  return [...new Set([...MODEL_IDS, ...pluginBrains])];
}

/**
 * The ids this deployment serves (`served: true` on GET /v1/models): those a
 * backend is configured for (SERVICE_BRAINS_PATH, or a plugin's brain); in
 * single-brain mode only SERVICE_MODEL, and only when a backend serves it.
 */
export function configuredModels(singleModel: string | undefined, configured: string[]): string[] {
  return singleModel ? configured.filter((id) => id === singleModel) : [...configured];
}
