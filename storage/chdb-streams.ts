import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { StreamChunk } from './port.ts';

/**
 * The chdb streams of this process, run on a thread of their own (issue 28). chdb starts a stream
 * synchronously: the engine parses the statement and binds its parameters (an export's thousands
 * of ids, names and keys) on the calling thread, and formatting those parameters is work of its
 * own; on the service's event loop both held every other request at each export's start. Here a
 * worker thread holds the stream sessions (on the same data directory: one engine per process),
 * formats the parameters, starts each stream, fetches each chunk when the reader asks for the
 * next one (the reader's pace: backpressure), and hands it over to the service's thread.
 */

/**
 * What a stream's SET gives its session first: settings as SET parts, and the statement's
 * parameters as `param_name` values (their names checked identifiers), formatted on the worker.
 */
export interface StreamSet {
  settings: string[];
  params: [string, unknown][];
}

/**
 * A parameter's value as the SET of its `param_name` takes it: in the text form of the HTTP
 * interface's `param_name` (@clickhouse/client's own formatter, `format`), quoted as a string
 * literal by the same formatter. Both threads bind with this function (the worker gets its text).
 */
export function paramLiteral(
  value: unknown,
  format: (p: { value: unknown; wrapStringInQuotes?: boolean; printNullAsKeyword?: boolean }) => string,
): string {
  const text = format({ value });
  // A NUL would end the statement's text in the engine: written as its escape.
  return format({ value: text, wrapStringInQuotes: true }).replaceAll('\0', '\\0');
}

/** What the service's thread asks of a stream session (`sid`): in order per session. */
type Ask =
  | { op: 'open'; sid: number; path: string; set: string }
  | { op: 'start'; sid: number; set: StreamSet; sql: string; format: string }
  | { op: 'next'; sid: number }
  | { op: 'end'; sid: number }
  | { op: 'close'; sid: number };

/** What the worker says of a session: a chunk, the stream's end, its failure, or that an `end` or `close` is done. */
type Said =
  | { sid: number; kind: 'chunk'; bytes: Uint8Array; rows: number }
  | { sid: number; kind: 'done' }
  | { sid: number; kind: 'error'; error: { message: string; name?: string; code?: unknown; clickhouseCode?: unknown } }
  | { sid: number; kind: 'ended' };

/**
 * The worker's code (CommonJS, run with `eval`: it needs no loader for TypeScript, in a build, in
 * tsx or under vitest). One chain of steps per session keeps each session's asks in order.
 */
const WORKER = () => `
const { parentPort, workerData } = require('node:worker_threads');
const { Session } = require(workerData.chdb);
const { formatQueryParams } = require(workerData.clientCommon);
const paramLiteral = ${paramLiteral.toString()};
const setOf = (set) => {
  const parts = [...set.settings, ...set.params.map(([name, value]) => 'param_' + name + ' = ' + paramLiteral(value, formatQueryParams))];
  return parts.length ? 'SET ' + parts.join(', ') : '';
};
const sessions = new Map();
const say = (m, moved) => parentPort.postMessage(m, moved);
const failure = (err) => ({ message: String((err && err.message) || err), name: err && err.name, code: err && err.code, clickhouseCode: err && err.clickhouseCode });
async function step(s, m) {
  switch (m.op) {
    case 'open':
      s.session = new Session(m.path);
      await s.session.queryAsync(m.set, { format: 'Null' });
      return;
    case 'start':
      try {
        const set = setOf(m.set);
        if (set) await s.session.queryAsync(set, { format: 'Null' });
        s.it = s.session.queryStream(m.sql, { format: m.format })[Symbol.asyncIterator]();
      } catch (err) {
        s.it = null;
        if (s.session) await s.session.queryAsync('SELECT 1', { format: 'Null' }).catch(() => {});
        say({ sid: m.sid, kind: 'error', error: failure(err) });
        return;
      }
      return step(s, { op: 'next', sid: m.sid });
    case 'next': {
      if (!s.it) return;
      let r;
      try {
        r = await s.it.next();
      } catch (err) {
        s.it = null;
        // What a failed statement wrote of its answer is taken, not handed to the next.
        await s.session.queryAsync('SELECT 1', { format: 'Null' }).catch(() => {});
        say({ sid: m.sid, kind: 'error', error: failure(err) });
        return;
      }
      if (r.done) {
        s.it = null;
        say({ sid: m.sid, kind: 'done' });
        return;
      }
      // The chunk's bytes copied into a buffer of their own, then moved to the service's thread (the
      // chunk's own memory is chdb's, freed with the chunk: moving it crashes the process).
      const bytes = new Uint8Array(r.value.raw());
      say({ sid: m.sid, kind: 'chunk', bytes, rows: r.value.numRows }, [bytes.buffer]);
      return;
    }
    case 'end':
      if (s.it) {
        const it = s.it;
        s.it = null;
        await it.return().catch(() => {});
      }
      say({ sid: m.sid, kind: 'ended' });
      return;
    case 'close':
      if (s.it) await s.it.return().catch(() => {});
      if (s.session) s.session.close();
      sessions.delete(m.sid);
      say({ sid: m.sid, kind: 'ended' });
      return;
  }
}
parentPort.on('message', (m) => {
  let s = sessions.get(m.sid);
  if (!s) sessions.set(m.sid, (s = { session: null, it: null, tail: Promise.resolve() }));
  s.tail = s.tail.then(() => step(s, m)).catch((err) => say({ sid: m.sid, kind: 'error', error: failure(err) }));
});
`;

/** A failure the worker reported, as the store's callers read one (message, codes: storage/port.ts storeFailure). */
function asError(e: Extract<Said, { kind: 'error' }>['error']): Error {
  const err = new Error(e.message) as Error & { code?: unknown; clickhouseCode?: unknown };
  if (e.name) err.name = e.name;
  if (e.code !== undefined) err.code = e.code;
  if (e.clickhouseCode !== undefined) err.clickhouseCode = e.clickhouseCode;
  return err;
}

/** What a session was told, waiting for its reader. */
class Inbox {
  private readonly said: Said[] = [];
  private waiting: ((m: Said) => void) | undefined;
  put(m: Said): void {
    const w = this.waiting;
    this.waiting = undefined;
    if (w) w(m);
    else this.said.push(m);
  }
  take(): Promise<Said> {
    const m = this.said.shift();
    return m ? Promise.resolve(m) : new Promise((resolve) => (this.waiting = resolve));
  }
}

/** Waits for the worker to say that an `end` or `close` is done (or that it failed, or is gone). */
async function ended(inbox: Inbox): Promise<void> {
  for (let m = await inbox.take(); m.kind !== 'ended' && m.kind !== 'error'; m = await inbox.take());
}

let worker: Worker | undefined;
const inboxes = new Map<number, Inbox>();
let nextSid = 1;
/** Streams under way: while there is one the worker keeps the process alive; else it does not. */
let active = 0;

function theWorker(): Worker {
  if (worker) return worker;
  const resolve = createRequire(import.meta.url).resolve;
  const w = new Worker(WORKER(), {
    eval: true,
    workerData: { chdb: resolve('chdb'), clientCommon: resolve('@clickhouse/client-common') },
  });
  w.unref();
  w.on('message', (m: Said) => inboxes.get(m.sid)?.put(m));
  // A worker gone (it failed, or the process is ending): every session's reader hears it, and the next stream starts another.
  const gone = (err: unknown) => {
    if (worker === w) worker = undefined;
    for (const [sid, inbox] of inboxes) inbox.put({ sid, kind: 'error', error: { message: `the stream worker stopped: ${String(err)}` } });
  };
  w.on('error', gone);
  w.on('exit', (code) => gone(`exit ${code}`));
  worker = w;
  return w;
}

const ask = (m: Ask): void => theWorker().postMessage(m);

/** A stream session on the worker: its own chdb session on `path`, `set` (a SET statement) run on it first. */
export function openStreamSession(path: string, set: string): number {
  const sid = nextSid++;
  inboxes.set(sid, new Inbox());
  ask({ op: 'open', sid, path, set });
  return sid;
}

/** Closes a stream session (its stream, if one is under way, first). */
export async function closeStreamSession(sid: number): Promise<void> {
  const inbox = inboxes.get(sid);
  if (!inbox) return;
  // A worker gone took its sessions with it.
  if (!worker) {
    inboxes.delete(sid);
    return;
  }
  ask({ op: 'close', sid });
  await ended(inbox);
  inboxes.delete(sid);
}

/**
 * The answer of `sql` on session `sid` chunk by chunk, `set` given its session before it: each
 * chunk fetched when the reader asks for it; a reader that stops early ends the stream.
 */
export async function* streamOn(sid: number, set: StreamSet, sql: string, format: string): AsyncGenerator<StreamChunk> {
  const inbox = inboxes.get(sid);
  if (!inbox) throw new Error(`no stream session ${sid}`);
  if (active++ === 0) theWorker().ref();
  let over = false;
  try {
    ask({ op: 'start', sid, set, sql, format });
    for (;;) {
      const m = await inbox.take();
      if (m.kind === 'done') {
        over = true;
        return;
      }
      if (m.kind === 'error') {
        over = true;
        throw asError(m.error);
      }
      if (m.kind !== 'chunk') continue;
      yield { bytes: m.bytes, rows: m.rows };
      ask({ op: 'next', sid });
    }
  } finally {
    if (!over && worker) {
      ask({ op: 'end', sid });
      await ended(inbox);
    }
    if (--active === 0) worker?.unref();
  }
}
