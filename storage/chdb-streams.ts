import { execFile } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Worker } from 'node:worker_threads';
import { formatQueryParams } from '@clickhouse/client-common';
import type { StreamChunk } from './port.ts';

/**
 * The chdb streams of this process (issue 28): the store writes each answer with its own writer
 * (`INTO OUTFILE`, formatted on its threads, in parallel) into a named pipe that this thread reads
 * as the export's reader asks for more: a reader that stops reading stops the writer when the
 * pipe is full (backpressure), and one that leaves has the statement cancelled. A
 * worker thread formats each statement's parameters (an export's thousands of ids, names and keys)
 * and starts it on a session of its own (on the same data directory: one engine per process): on
 * the service's event loop that formatting held every other request at each export's start.
 */

/**
 * Where this process's pipes are (made on the first stream, removed at exit). A process killed
 * before its exit left its directory: those of processes that are gone are removed here.
 */
let pipeDir: string | undefined;
const PIPES_PREFIX = 'signalbase-streams-';
const PIPES_NAME = /^signalbase-streams-(\d+)-/;
function pipesDir(): string {
  if (pipeDir) return pipeDir;
  const base = tmpdir();
  for (const name of readdirSync(base)) {
    const pid = PIPES_NAME.exec(name)?.[1];
    if (pid && !alive(Number(pid))) rmSync(join(base, name), { recursive: true, force: true });
  }
  const dir = mkdtempSync(join(base, `${PIPES_PREFIX}${process.pid}-`));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  pipeDir = dir;
  return dir;
}
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
const run = promisify(execFile);

/** How much of a pipe's bytes the reader takes at once (the pipe holds 64 KiB): fewer, larger chunks. */
const CHUNK_BYTES = 1024 * 1024;

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
  | { op: 'start'; sid: number; set: StreamSet; sql: string; mark: string }
  | { op: 'stop'; sid: number; mark: string }
  | { op: 'close'; sid: number };

/** What the worker says of a session: the statement's end, its failure, or that a `close` is done. */
type Said =
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
const setOf = (set, mark) =>
  'SET ' + [...set.settings, ...set.params.map(([name, value]) => 'param_' + name + ' = ' + paramLiteral(value, formatQueryParams)), 'log_comment = ' + mark].join(', ');
const sessions = new Map();
const say = (m, moved) => parentPort.postMessage(m, moved);
const failure = (err) => ({ message: String((err && err.message) || err), name: err && err.name, code: err && err.code, clickhouseCode: err && err.clickhouseCode });
async function step(s, m) {
  switch (m.op) {
    case 'open':
      s.path = m.path;
      s.session = new Session(m.path);
      await s.session.queryAsync(m.set, { format: 'Null' });
      return;
    case 'start':
      try {
        await s.session.queryAsync(setOf(m.set, m.mark), { format: 'Null' });
        await s.session.queryAsync(m.sql, { format: 'Null' });
      } catch (err) {
        say({ sid: m.sid, kind: 'error', error: failure(err) });
        return;
      }
      say({ sid: m.sid, kind: 'done' });
      return;
    case 'close':
      if (s.session) s.session.close();
      if (killer && sessions.size === 1) {
        await killing;
        killer.close();
        killer = null;
      }
      sessions.delete(m.sid);
      say({ sid: m.sid, kind: 'ended' });
      return;
  }
}
// A statement whose reader left is cancelled, by its mark (its log_comment), from a session of its
// own (the statement's is busy with it): the store goes on past a broken pipe.
let killer = null;
let killing = Promise.resolve();
async function stop(m) {
  const s = sessions.get(m.sid);
  if (!s || !s.path) return;
  killer ??= new Session(s.path);
  await killer.queryAsync("KILL QUERY WHERE Settings['log_comment'] = " + m.mark + " ASYNC", { format: 'Null' });
}
parentPort.on('message', (m) => {
  if (m.op === 'stop') {
    // Failed: the statement ends at its own bounds.
    killing = killing.then(() => stop(m)).catch(() => {});
    return;
  }
  let s = sessions.get(m.sid);
  if (!s) sessions.set(m.sid, (s = { session: null, tail: Promise.resolve() }));
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

/** Waits for the worker to say that a `close` is done (or that it failed, or is gone). */
async function ended(inbox: Inbox): Promise<void> {
  for (let m = await inbox.take(); m.kind !== 'ended' && m.kind !== 'error'; m = await inbox.take());
}

let worker: Worker | undefined;
const inboxes = new Map<number, Inbox>();
let nextSid = 1;
let nextStatement = 1;
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

/** The stream sessions' pipes (made when the session opens). */
const pipes = new Map<number, Promise<string>>();

/** A stream session on the worker: its own chdb session on `path`, `set` (a SET statement) run on it first, and its pipe. */
export function openStreamSession(path: string, set: string): number {
  const sid = nextSid++;
  inboxes.set(sid, new Inbox());
  const pipe = join(pipesDir(), `${sid}.pipe`);
  const made = run('mkfifo', ['-m', '600', pipe]).then(() => pipe);
  made.catch(() => {}); // met by the session's first stream
  pipes.set(sid, made);
  ask({ op: 'open', sid, path, set });
  return sid;
}

/** Closes a stream session (after its stream: streamOn waits for its statement's end). */
export async function closeStreamSession(sid: number): Promise<void> {
  const inbox = inboxes.get(sid);
  if (!inbox) return;
  const pipe = pipes.get(sid);
  pipes.delete(sid);
  void pipe?.then((p) => rmSync(p, { force: true })).catch(() => {});
  // A worker gone took its sessions with it.
  if (!worker) {
    inboxes.delete(sid);
    return;
  }
  ask({ op: 'close', sid });
  await ended(inbox);
  inboxes.delete(sid);
}

/** Waits for the statement's end (or failure, or the worker's). */
async function outcome(inbox: Inbox): Promise<Extract<Said, { kind: 'done' | 'error' }>> {
  for (;;) {
    const m = await inbox.take();
    if (m.kind === 'done' || m.kind === 'error') return m;
  }
}

/**
 * The answer of `sql` in `format` on session `sid`, `set` given its session before it, chunk by
 * chunk as the store writes it into the session's pipe, read as the reader asks for more. A
 * chunk may end within a row (StreamChunk without `rows`); a Parquet answer is one file. A reader
 * that stops early cancels the statement; the stream ends once it has.
 */
export async function* streamOn(sid: number, set: StreamSet, sql: string, format: string): AsyncGenerator<StreamChunk> {
  const inbox = inboxes.get(sid);
  const made = pipes.get(sid);
  if (!inbox || !made) throw new Error(`no stream session ${sid}`);
  const path = await made;
  // This thread holds a writing end too until the statement is over: the pipe's end of file is
  // then the end of the answer, not the statement's opening or closing of its own end.
  const readFd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  let writeFd: number | undefined = openSync(path, constants.O_WRONLY | constants.O_NONBLOCK);
  const closeWriter = () => {
    if (writeFd === undefined) return;
    closeSync(writeFd);
    writeFd = undefined;
  };
  const pipe = new Socket({ fd: readFd, readable: true, writable: false, readableHighWaterMark: CHUNK_BYTES } as never);
  let failed: Error | undefined;
  pipe.on('error', (err) => (failed ??= err));
  let ended = false;
  pipe.once('end', () => (ended = true));
  /** Until the pipe has news: bytes, its end, a failure. */
  const news = () =>
    new Promise<void>((resolve) => {
      const go = () => {
        pipe.off('readable', go).off('end', go).off('error', go).off('close', go);
        resolve();
      };
      pipe.on('readable', go).on('end', go).on('error', go).on('close', go);
    });
  if (active++ === 0) theWorker().ref();
  let settled = false;
  const over = outcome(inbox).then((m) => {
    settled = true;
    closeWriter();
    return m;
  });
  // The statement's mark (its log_comment), by which it is cancelled (and no other).
  const mark = formatQueryParams({ value: `signalbase stream ${nextStatement++}`, wrapStringInQuotes: true });
  try {
    const into = formatQueryParams({ value: path, wrapStringInQuotes: true });
    ask({ op: 'start', sid, set, mark, sql: `${sql} INTO OUTFILE ${into} TRUNCATE FORMAT ${format}` });
    for (;;) {
      const bytes = pipe.read() as Buffer | null;
      if (bytes) {
        yield { bytes };
        continue;
      }
      if (ended || failed) break;
      await news();
    }
    if (failed) throw failed;
    const m = await over;
    if (m.kind === 'error') throw asError(m.error);
  } finally {
    if (!settled) {
      // The reader stopped early: the statement is cancelled, and its bytes meanwhile taken and
      // dropped (a pipe nobody reads would hold it at its next write, or at its opening).
      ask({ op: 'stop', sid, mark });
      pipe.on('data', () => {});
      pipe.resume();
    }
    // The session's next statement starts after this one is over.
    await over;
    pipe.destroy();
    closeWriter();
    if (--active === 0) worker?.unref();
  }
}
