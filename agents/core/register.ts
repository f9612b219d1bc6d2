// An agent that announces itself: with PLANE_REGISTER_URL (a gateway's base URL)
// the agent posts what it is and where to reach it to POST /v1/planes/register
// every PLANE_HEARTBEAT_SECONDS, with its agent secret as the bearer; the gateway
// keeps the entry in its shared store for three heartbeats (10 s at least), so an agent that stops
// (crash, network cut) leaves placement on its own. A clean stop deregisters at once.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../../shared/build.mjs';
import type { Backend } from './types.ts';

export interface Registration {
  agent_id: string;
  plane: Backend;
  /** one URL per session slot, as the gateway reaches it */
  slots: string[];
  /** slots with a session bound now (for the operator's view; the gateway's slot claims decide placement) */
  busy: number;
  labels: Record<string, string>;
  capabilities: { dom_aware: boolean; stealth: boolean; gpu: boolean };
  version: string;
  ttl_seconds: number;
}

export interface RegisterSettings {
  gateway: string;
  secret: string;
  intervalMs: number;
  labels: Record<string, string>;
  advertiseHost: string;
  agentId: string | undefined;
  gpu: boolean;
}

const LABEL = /^[a-z][a-z0-9_.-]{0,31}=[A-Za-z0-9_.:-]{1,64}$/;

/** PLANE_LABELS `region=eu-west,pool=resi` */
export function parseLabels(raw: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (raw ?? '').split(',').map((s) => s.trim()).filter(Boolean)) {
    if (!LABEL.test(part)) throw new Error(`PLANE_LABELS: expected name=value pairs (name [a-z][a-z0-9_.-]*, value [A-Za-z0-9_.:-]+), got ${JSON.stringify(part.slice(0, 100))}`);
    const [k, v] = part.split('=', 2) as [string, string];
    out[k] = v;
  }
  // the 16th is the agent's own `browser` label (serve.ts), which a run can ask for as any other
  if (Object.keys(out).length > 15) throw new Error('PLANE_LABELS: at most 15 labels');
  if ('browser' in out) throw new Error('PLANE_LABELS: `browser` is the agent\'s own label (chromium, or headless-shell with PLANE_DOM_BROWSER on dom_plane)');
  return out;
}

export function registerSettingsFromEnv(env: NodeJS.ProcessEnv, host: string, secret: string | undefined): RegisterSettings | undefined {
  const gateway = env.PLANE_REGISTER_URL;
  if (!gateway) return undefined;
  if (!/^https?:\/\/[^/]+/.test(gateway)) throw new Error('PLANE_REGISTER_URL must be the gateway base URL (http:// or https://)');
  if (!secret) throw new Error('PLANE_REGISTER_URL needs PLANE_AGENT_SECRET: the gateway takes registrations only from agents that hold it');
  const seconds = Number(env.PLANE_HEARTBEAT_SECONDS || 5);
  if (!(seconds >= 1 && seconds <= 60)) throw new Error('PLANE_HEARTBEAT_SECONDS must be in [1, 60]');
  const agentId = env.PLANE_AGENT_ID || undefined;
  if (agentId !== undefined && !/^[0-9a-f]{12}$/.test(agentId)) throw new Error('PLANE_AGENT_ID must be 12 lower-case hex digits');
  const advertiseHost = env.PLANE_ADVERTISE_HOST || (host === '0.0.0.0' || host === '::' ? '' : host);
  if (!advertiseHost) throw new Error('PLANE_ADVERTISE_HOST: the address the gateway reaches this agent at (PLANE_HOST binds every interface)');
  return { gateway: gateway.replace(/\/+$/, ''), secret, intervalMs: seconds * 1000, labels: parseLabels(env.PLANE_LABELS), advertiseHost, agentId, gpu: env.PLANE_GPU === '1' };
}

/** The id the gateway knows a static agent by: 12 hex digits of sha256 of its (first) URL. */
export const agentIdOf = (url: string): string => createHash('sha256').update(url).digest('hex').slice(0, 12);

let version: string | undefined;
function agentVersion(): string {
  try {
    version ??= String((JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { version?: string }).version ?? '0');
  } catch {
    version = '0';
  }
  return version;
}

/** Heartbeats until stopped; stop() deregisters (best effort: the entry also expires). */
export function startRegistration(s: RegisterSettings, describe: () => Omit<Registration, 'agent_id' | 'version' | 'ttl_seconds'>, log: (msg: string, fields?: Record<string, unknown>) => void) {
  const first = describe();
  const agentId = s.agentId ?? agentIdOf(first.slots[0]!);
  const headers = { authorization: `Bearer ${s.secret}`, 'content-type': 'application/json' };
  let failing = false;
  const beat = async (): Promise<void> => {
    const body: Registration = { agent_id: agentId, version: agentVersion(), ttl_seconds: Math.max(10, Math.ceil((3 * s.intervalMs) / 1000)), ...describe() };
    try {
      const r = await fetch(`${s.gateway}/v1/planes/register`, { method: 'POST', headers, body: JSON.stringify(body), signal: AbortSignal.timeout(Math.min(5000, s.intervalMs)) });
      if (!r.ok) throw new Error(`HTTP ${r.status}: ${(await r.text()).slice(0, 200)}`);
      if (failing) log('registered with the gateway again', { agent_id: agentId });
      failing = false;
    } catch (err) {
      // said once per outage, not every heartbeat
      if (!failing) log('could not register with the gateway; retrying every heartbeat', { agent_id: agentId, err: (err as Error).message });
      failing = true;
    }
  };
  void beat();
  const timer = setInterval(() => void beat(), s.intervalMs);
  timer.unref();
  return {
    agentId,
    async stop(): Promise<void> {
      clearInterval(timer);
      await fetch(`${s.gateway}/v1/planes/${agentId}/deregister`, { method: 'POST', headers, body: '{}', signal: AbortSignal.timeout(2000) }).catch(() => undefined);
    },
  };
}
