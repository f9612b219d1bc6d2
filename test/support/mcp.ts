// What the MCP tests share: the tool names, reading a tool's answer, a PNG's magic.
import { expect } from 'chai';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

export type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export const TOOLS = ['session_open', 'navigate', 'click', 'type', 'press_key', 'scroll', 'snapshot', 'screenshot', 'extract', 'session_close', 'run_submit', 'run_status', 'run_result', 'run_cancel', 'run_events'];
export const PNG_MAGIC = '89504e470d0a1a0a';
/** A tool call's timeout: a browser start on a loaded host takes longer than the SDK's 60 s default allows for. */
export const CALL = { timeout: 180_000 };

/** The message a promise is rejected with (it must be rejected). */
export async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('expected a refusal');
}

export const textOf = (r: CallToolResult): string => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');

/** The JSON a tool answered (it must not be an error). */
export const bodyOf = (r: CallToolResult): Body => {
  expect(r.isError, textOf(r)).to.not.equal(true);
  return JSON.parse(textOf(r)) as Body;
};
