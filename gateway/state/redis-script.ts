// A Lua script kept as its own file (named by what it does and how many keys it
// takes, `run-write-7.lua`, as BullMQ names its scripts), run with EVALSHA so
// only its SHA1 travels per call. When Redis does not know the script (a
// restart, SCRIPT FLUSH, another server behind the same URL) it is loaded with
// SCRIPT LOAD and the call is made again, once.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { RedisClient } from './redis-client.ts';

export class RedisScript {
  readonly name: string;
  readonly numberOfKeys: number;
  readonly sha1: string;
  private readonly source: string;

  /** `file` is the script's path; its name must end in `-<number of keys>.lua`. */
  constructor(file: string) {
    const m = /^(.+)-(\d+)\.lua$/.exec(path.basename(file));
    if (!m) throw new Error(`a Redis script file is named <what-it-does>-<number of keys>.lua: ${file}`);
    this.name = m[1]!;
    this.numberOfKeys = Number(m[2]);
    this.source = readFileSync(file, 'utf8');
    this.sha1 = createHash('sha1').update(this.source).digest('hex');
  }

  async run(client: RedisClient, keys: string[], args: string[]): Promise<unknown> {
    if (keys.length !== this.numberOfKeys) throw new Error(`${this.name} takes ${this.numberOfKeys} keys, got ${keys.length}`);
    try {
      return await client.evalSha(this.sha1, { keys, arguments: args });
    } catch (err) {
      if (!String((err as Error)?.message).startsWith('NOSCRIPT')) throw err;
      await client.scriptLoad(this.source);
      return await client.evalSha(this.sha1, { keys, arguments: args });
    }
  }
}
