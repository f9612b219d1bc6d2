// The runtime version snapshot of GET /v1/version. The deploy time is
// SERVICE_DEPLOYED_AT when set, else the commit time of the checked-out code,
// else the process start; deploy_age_days counts from it.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../shared/build.mjs';

export interface VersionInfo {
  version: string;
  git_sha: string | null;
  node_version: string;
  started_at: string;
  deployed_at: string;
}

const root = REPO_ROOT;

/** HEAD's sha and commit time, from one git process (it runs while the rest of the start goes on). */
async function head(): Promise<{ sha: string; at: string } | null> {
  try {
    const { stdout } = await promisify(execFile)('git', ['log', '-1', '--format=%H %cI'], { cwd: root, timeout: 2000 });
    const [sha, at] = stdout.trim().split(' ');
    return sha && at ? { sha, at } : null;
  } catch {
    return null;
  }
}

export async function readVersionInfo(gitSha?: string, deployedAt?: string): Promise<VersionInfo> {
  const started = new Date();
  const knownDeploy = deployedAt && !Number.isNaN(Date.parse(deployedAt));
  const [pkg, commit] = await Promise.all([
    readFile(path.join(root, 'package.json'), 'utf8').then((t) => JSON.parse(t) as { version: string }),
    gitSha && knownDeploy ? null : head(),
  ]);
  const deployed = knownDeploy ? new Date(deployedAt) : commit ? new Date(commit.at) : started;
  return {
    version: pkg.version,
    git_sha: gitSha ?? commit?.sha ?? null,
    node_version: process.version,
    started_at: started.toISOString(),
    deployed_at: deployed.toISOString(),
  };
}

export function versionBody(v: VersionInfo, now = Date.now()) {
  const ageDays = Math.max(0, (now - Date.parse(v.deployed_at)) / 86_400_000);
  return { ...v, uptime_seconds: Math.round((now - Date.parse(v.started_at)) / 1000), deploy_age_days: Math.round(ageDays * 100) / 100 };
}
