// The runtime version snapshot of GET /v1/version. The deploy time is
// SERVICE_DEPLOYED_AT when set, else the commit time of the checked-out code,
// else the process start; deploy_age_days counts from it.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../shared/build.mjs';

export interface VersionInfo {
  version: string;
  git_sha: string | null;
  node_version: string;
  started_at: string;
  deployed_at: string;
}

const root = REPO_ROOT;

function git(args: string[]): string | null {
  try {
    return execFileSync('git', args, { cwd: root, stdio: ['ignore', 'pipe', 'ignore'], timeout: 2000 }).toString().trim() || null;
  } catch {
    return null;
  }
}

export function readVersionInfo(gitSha?: string, deployedAt?: string): VersionInfo {
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
  const started = new Date();
  const deployed = deployedAt && !Number.isNaN(Date.parse(deployedAt)) ? new Date(deployedAt) : (() => {
    const t = git(['log', '-1', '--format=%cI']);
    return t ? new Date(t) : started;
  })();
  return {
    version: pkg.version,
    git_sha: gitSha ?? git(['rev-parse', 'HEAD']),
    node_version: process.version,
    started_at: started.toISOString(),
    deployed_at: deployed.toISOString(),
  };
}

export function versionBody(v: VersionInfo, now = Date.now()) {
  const ageDays = Math.max(0, (now - Date.parse(v.deployed_at)) / 86_400_000);
  return { ...v, uptime_seconds: Math.round((now - Date.parse(v.started_at)) / 1000), deploy_age_days: Math.round(ageDays * 100) / 100 };
}
