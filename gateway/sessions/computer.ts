// The computer API of a session: one input on a computer_plane session's display,
// carried out by xdotool as a run's actions are (real input, in the session's video),
// for agents that act on pixels beside (or instead of) CDP; a screenshot on either plane.
import type { ComputerAction } from '../../schemas/types.gen.ts';
import { xdotoolArgv } from '../runner/plane-adapter.ts';
import type { Action } from '../plugins/contract.ts';

/** The xdotool argument vectors of one input (the schema has checked its fields); none for a screenshot. */
export function computerArgv(a: ComputerAction): string[][] {
  const act = ((): Action | undefined => {
    switch (a.action) {
      case 'click':
        return { type: 'CLICK', x: a.x, y: a.y };
      case 'double_click':
        return { type: 'DOUBLE_CLICK', x: a.x, y: a.y };
      case 'right_click':
        return { type: 'RIGHT_CLICK', x: a.x, y: a.y };
      case 'drag':
        return { type: 'DRAG', x: a.x, y: a.y, to_x: a.to_x, to_y: a.to_y };
      case 'type':
        return { type: 'TYPE', text: a.text };
      case 'key':
        return { type: 'KEY_PRESS', keys: a.keys };
      case 'scroll':
        return { type: 'SCROLL', direction: a.direction ?? 'down', amount: a.amount ?? 3, ...(a.x !== undefined && a.y !== undefined ? { x: a.x, y: a.y } : {}) };
      default:
        return undefined;
    }
  })();
  if (act) return xdotoolArgv(act);
  return a.action === 'move' ? [['mousemove', String(a.x), String(a.y)]] : [];
}
