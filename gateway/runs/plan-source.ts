// Resolves `micro` plan references inside the configured plans directory. The
// reference must stay inside it: `..`, absolute paths and symlinks that lead
// out are refused with 400, as is anything that is not a regular JSON file.
import { realpath, stat, readFile } from 'node:fs/promises';
import path from 'node:path';
import { badRequest } from '../errors.ts';

export async function loadMicroPlan(plansDir: string, ref: string, maxBytes: number): Promise<unknown> {
  if (ref.includes('\0') || path.isAbsolute(ref) || ref.split(/[\\/]/).includes('..')) {
    throw badRequest('micro: must be a relative path inside the plans directory');
  }
  let root: string;
  try {
    root = await realpath(plansDir);
  } catch {
    throw badRequest('micro: no plans directory is configured on this service');
  }
  const candidates = ref.endsWith('.json') ? [ref] : [ref, `${ref}.json`];
  for (const c of candidates) {
    let real: string;
    try {
      real = await realpath(path.join(root, c));
    } catch {
      continue;
    }
    if (!real.startsWith(root + path.sep)) throw badRequest('micro: must be a relative path inside the plans directory');
    const st = await stat(real);
    if (!st.isFile()) continue;
    if (st.size > maxBytes) throw badRequest(`micro: plan file exceeds ${maxBytes} bytes`);
    try {
      return JSON.parse(await readFile(real, 'utf8'));
    } catch {
      throw badRequest(`micro: plan '${ref}' is not valid JSON`);
    }
  }
  throw badRequest(`micro: plan '${ref}' not found`);
}
