// Operator commands (pause, resume, kill, hints, action overrides) reach the
// agent through a long-poll of the ingest service, dispatched to the adapter.
import { sleep } from '../shared/abort.ts';
import type { ActionOverrideCoords, Adapter } from './adapter.ts';
import type { SessionCore } from './session-core.ts';
import { abortPendingSideEffects } from './side-effects.ts';
import { recordEvent } from './step-recording.ts';

export function bindIntervention(core: SessionCore, adapter: Adapter, pollTimeout = 25.0): { stop(): Promise<void> } | null {
  if (!core.streamer) return null;
  if (core.intervention) throw new Error('bindIntervention: already bound');
  const stop = new AbortController();
  core.interventionStop = stop;
  const streamer = core.streamer;
  const seen = new Set<string>();
  let cursor = 0;
  const loop = async () => {
    while (!stop.signal.aborted) {
      try {
        const res = await streamer.request('GET', `${core.runPath}/commands?cursor=${cursor}&timeout=${Math.max(0, Math.min(60, pollTimeout))}`, stop.signal);
        const text = await res.text();
        if (res.status !== 200) {
          core.log.debug('command poll refused', { status: res.status, detail: text.slice(0, 200) });
          await backoff(1000, stop.signal);
          continue;
        }
        const body = JSON.parse(text) as { commands?: Array<Record<string, unknown>>; cursor?: number };
        for (const c of body.commands ?? []) {
          const id = String(c.command_id ?? '');
          if (!id || seen.has(id)) continue;
          seen.add(id);
          await dispatchCommand(core, adapter, c);
        }
        if (typeof body.cursor === 'number' && body.cursor > cursor) cursor = body.cursor;
      } catch (err) {
        if (stop.signal.aborted) break;
        core.log.debug('command poll failed', { error: (err as Error).message });
        await backoff(1000, stop.signal);
      }
    }
  };
  core.intervention = loop();
  return {
    stop: async () => {
      stop.abort();
      await core.intervention;
    },
  };
}

async function dispatchCommand(core: SessionCore, adapter: Adapter, c: Record<string, unknown>): Promise<void> {
  const type = String(c.type ?? '');
  const payload = (c.payload && typeof c.payload === 'object' ? c.payload : {}) as Record<string, unknown>;
  if (!core.manifest && !core.closing) {
    recordEvent(core, {
      layer: 'intervention',
      kind: 'command',
      step_index: null,
      command_id: String(c.command_id),
      operator_id: typeof c.operator_id === 'string' ? c.operator_id : null,
      summary: type,
      payload: { type, ...payload },
    });
  }
  try {
    switch (type) {
      case 'pause':
        await adapter.onPause?.();
        break;
      case 'resume':
        await adapter.onResume?.();
        break;
      case 'kill':
        abortPendingSideEffects(core, 'killed by operator');
        await adapter.onKill?.();
        break;
      case 'inject_hint':
        await adapter.onInjectHint?.(String(payload.text ?? ''));
        break;
      case 'override_action':
        await adapter.onActionOverride?.((payload.coords ?? {}) as ActionOverrideCoords, 'human_override');
        break;
      default:
        core.log.debug('unknown intervention command', { type });
    }
  } catch (err) {
    core.log.warn(`intervention hook for ${type} failed: ${(err as Error).message}`);
  }
}

// After a failed or refused poll. stop() must end the wait at once without
// failing the loop (it sees the abort and returns), hence the swallowed rejection.
// sleep's timer is unref'd, like the heartbeat: a session never holds its process up.
const backoff = (ms: number, signal: AbortSignal): Promise<void> => sleep(ms, signal).catch(() => undefined);
