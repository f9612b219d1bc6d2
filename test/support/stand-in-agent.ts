// A local plane agent without its process, for the agent pool's policy tests: kill()
// marks it exited, as the real child's exit would.
import { EventEmitter } from 'node:events';
import type { Agent } from '../../gateway/runner/agent-pool.ts';

export function standIn(name: string, affinity?: string): Agent {
  let exit: (reason: string) => void = () => undefined;
  const exited = new Promise<string>((resolve) => (exit = resolve));
  const child = Object.assign(new EventEmitter(), { exitCode: null as number | null, signalCode: null, pid: 0 });
  const kill = () => {
    child.exitCode = 0;
    exit('stopped');
    return true;
  };
  return {
    backend: 'dom_plane',
    child: Object.assign(child, { kill }) as unknown as Agent['child'],
    url: `grpc://${name}`,
    secret: name,
    exited,
    onExit: () => () => undefined,
    sessions: 0,
    idleSince: 0,
    ...(affinity ? { affinities: [affinity] } : {}),
  };
}
