// The plane a step acts on, when the run's tenant has a credential vault: a TYPE
// action naming a credential (`secret`) is resolved here, at the last moment,
// against the page that is about to receive it. The action the handler built,
// with its placeholder, is what every record of the step keeps (last_action,
// events, the trace); the value exists only in the call to the plane below.
import { SecretRefused, type Action, type ActResult, type Plane, type SecretRef, type StepContext } from '../plugins/contract.ts';

/** The vault's answer (gateway/vault reveal): the value, or why this page may not have it. */
export type Reveal = (ref: SecretRef, pageUrl: string) => Promise<{ value: string } | { refused: string }>;

/** The URL of the page a keystroke would land in now, as the plane knows it; '' when it cannot say. */
export async function activePageUrl(plane: Plane): Promise<string> {
  if (plane.dom) return plane.dom.currentUrl().catch(() => '');
  return ((await plane.facts?.().catch(() => null)) ?? null)?.url ?? '';
}

/** Why `ref` may not be typed into the active page now, or null when it may. */
export async function secretCheck(plane: Plane, reveal: Reveal, ref: SecretRef): Promise<string | null> {
  const url = await activePageUrl(plane);
  if (!url) return 'the active page cannot be told, so no credential is typed into it';
  let r: { value: string } | { refused: string };
  try {
    r = await reveal(ref, url);
  } catch {
    r = { refused: 'the credential vault could not be read' };
  }
  return 'refused' in r ? r.refused : null;
}

export function withSecrets(plane: Plane, reveal: Reveal): Plane {
  const wrapped: Plane = {
    capabilities: plane.capabilities,
    screenshot: (format) => plane.screenshot(format),
    async act(a: Action): Promise<ActResult> {
      if (a.type !== 'TYPE' || !a.secret) return plane.act(a);
      const url = await activePageUrl(plane);
      if (!url) throw new SecretRefused('the active page cannot be told, so no credential is typed into it');
      let r: { value: string } | { refused: string };
      try {
        r = await reveal(a.secret, url);
      } catch {
        throw new SecretRefused('the credential vault could not be read');
      }
      if ('refused' in r) throw new SecretRefused(r.refused);
      return plane.act({ type: 'TYPE', text: r.value });
    },
  };
  if (plane.dom) Object.assign(wrapped, { dom: plane.dom });
  if (plane.facts) Object.assign(wrapped, { facts: plane.facts.bind(plane) });
  return wrapped;
}

/** What a step's context gets of the vault: the plane that types credentials and the check; without a vault, the plane as it is. */
export function vaultSide(plane: Plane, reveal: Reveal | undefined): Pick<StepContext, 'plane' | 'secretCheck'> {
  if (!reveal) return { plane };
  return { plane: withSecrets(plane, reveal), secretCheck: (ref) => secretCheck(plane, reveal, ref) };
}
