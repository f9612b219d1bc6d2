// The ingest's bundle files are written by one worker thread, so the event
// loop parses and answers requests while a file is made. A file made on this
// kind of host costs 50-80 us of kernel time (open, write, close) in the
// thread that makes it: on the loop, about half of a step's time at 1,600
// steps/s; through libuv's threadpool, three hops a file, each a wake of a
// worker and of the loop. Writes asked for in one turn go in one message;
// the worker answers each message once, in order (docs/decisions.md).
import { Worker } from 'node:worker_threads';
import type { FileWriter } from '../../sdk/store.ts';

interface Op {
  file: string;
  data: Uint8Array;
  /** append unless the file would pass this many bytes (null: no cap); absent: write the file whole */
  append?: number | null;
}
interface Result {
  ok: boolean;
  written?: boolean;
  code?: string;
  message?: string;
}
interface Waiting {
  resolve(written: boolean): void;
  reject(err: Error): void;
}

// plain JS, so the worker needs no TypeScript loader in whatever process hosts the ingest
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const fs = require('node:fs');
parentPort.on('message', (ops) => {
  parentPort.postMessage(ops.map((op) => {
    try {
      if (op.append === undefined) {
        fs.writeFileSync(op.file, op.data);
        return { ok: true, written: true };
      }
      if (op.append !== null) {
        const st = fs.statSync(op.file, { throwIfNoEntry: false });
        if ((st ? st.size : 0) + op.data.length > op.append) return { ok: true, written: false };
      }
      fs.appendFileSync(op.file, op.data);
      return { ok: true, written: true };
    } catch (err) {
      return { ok: false, code: err.code, message: err.message };
    }
  }));
});
`;

export class FileWriterThread implements FileWriter {
  private worker: Worker | null = null;
  private queued: Array<{ op: Op; w: Waiting }> = [];
  /** the waiters of each message posted, in order */
  private readonly sent: Waiting[][] = [];
  private scheduled = false;
  private closed = false;

  write(file: string, data: Uint8Array): Promise<void> {
    return this.ask({ file, data }).then(() => undefined);
  }

  append(file: string, data: Uint8Array, limit = Infinity): Promise<boolean> {
    return this.ask({ file, data, append: Number.isFinite(limit) ? limit : null });
  }

  /** Stops the worker once the writes asked for have landed. */
  async close(): Promise<void> {
    this.closed = true;
    while (this.queued.length || this.sent.length) await new Promise((r) => setImmediate(r));
    await this.worker?.terminate();
    this.worker = null;
  }

  private ask(op: Op): Promise<boolean> {
    if (this.closed) return Promise.reject(new Error('the ingest file writer is closed'));
    return new Promise<boolean>((resolve, reject) => {
      this.queued.push({ op, w: { resolve, reject } });
      if (!this.scheduled) {
        this.scheduled = true;
        queueMicrotask(() => this.post());
      }
    });
  }

  private post(): void {
    this.scheduled = false;
    const batch = this.queued;
    this.queued = [];
    if (!batch.length) return;
    let worker: Worker;
    try {
      worker = this.worker ?? this.start();
    } catch (err) {
      // no thread could be made (a process at its limits): these writes fail, the next ones try again
      for (const b of batch) b.w.reject(err as Error);
      return;
    }
    this.sent.push(batch.map((b) => b.w));
    // kept alive while a write is on its way: a process must not end with one half-done
    worker.ref();
    worker.postMessage(batch.map((b) => b.op));
  }

  private start(): Worker {
    const worker = new Worker(WORKER_SOURCE, { eval: true });
    worker.on('message', (results: Result[]) => {
      const waiting = this.sent.shift() ?? [];
      waiting.forEach((w, i) => {
        const r = results[i];
        if (r?.ok) w.resolve(r.written ?? true);
        else w.reject(Object.assign(new Error(r?.message ?? 'file write failed'), { code: r?.code }));
      });
      if (!this.sent.length) worker.unref();
    });
    // a worker that died fails what it held; the next write starts another
    const fail = (err: Error) => {
      if (this.worker !== worker) return;
      this.worker = null;
      for (const waiting of this.sent.splice(0)) for (const w of waiting) w.reject(err);
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`the ingest file writer exited (${code})`)));
    worker.unref();
    this.worker = worker;
    return worker;
  }
}
