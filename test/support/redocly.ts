// `redocly lint` (@redocly/cli) on an OpenAPI document, for the tests that hold
// the gateway's and the ingest's documents to a linter we did not write.
import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const ROOT = path.resolve(import.meta.dirname, '../..');
const CLI = path.join(ROOT, 'node_modules/@redocly/cli/bin/cli.js');

export interface LintProblem {
  ruleId: string;
  severity: 'error' | 'warn' | 'warning';
  message: string;
  location?: Array<{ pointer: string }>;
}
export interface LintReport {
  totals: { errors: number; warnings: number };
  problems: LintProblem[];
}

/** redocly lint of `doc` (with `config`, else the recommended rules): its exit code and JSON report. */
export async function redoclyLint(doc: unknown, config?: string): Promise<{ code: number; report: LintReport }> {
  const file = path.join(await mkdtemp(path.join(tmpdir(), 'runplane-openapi-')), 'openapi.json');
  await writeFile(file, JSON.stringify(doc));
  // no telemetry or update check from the test (no network here)
  const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' };
  const args = [CLI, 'lint', file, ...(config ? ['--config', config] : []), '--format=json'];
  try {
    const { stdout } = await promisify(execFile)(process.execPath, args, { env, cwd: ROOT, maxBuffer: 32 << 20 });
    return { code: 0, report: JSON.parse(stdout.slice(stdout.indexOf('{'))) as LintReport };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    if (typeof e.code !== 'number' || !e.stdout) throw new Error(`redocly did not run: ${e.stderr ?? String(err)}`);
    return { code: e.code, report: JSON.parse(e.stdout.slice(e.stdout.indexOf('{'))) as LintReport };
  }
}
