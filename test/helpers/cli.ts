import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

/** The repository root (where bin/signalbase.cjs lives). */
export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = 'bin/signalbase.cjs';

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs `signalbase ARGS` to completion as a real process (with `stdin` as its input, if given); never throws on a non-zero exit. */
export function runCli(args: readonly string[], env: Record<string, string> = {}, timeoutMs = 60_000, stdin?: string): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: REPO_ROOT,
      env: { ...process.env, LOG_LEVEL: 'warn', ...env },
      stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    if (stdin !== undefined) child.stdin!.end(stdin);
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
    });
    child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`signalbase ${args.join(' ')} timed out after ${timeoutMs} ms\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** A TCP port that was free a moment ago (listen(0), read the port, close). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

export interface ServerProcess {
  child: ChildProcess;
  /** Everything printed so far. */
  stdout(): string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM, then SIGKILL if it has not exited after `graceMs`; resolves with the exit. */
  stop(graceMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Spawns `signalbase ARGS` and resolves once its stdout matches `ready` (it fails when the process exits first). */
export async function startProcess(
  args: readonly string[],
  env: Record<string, string>,
  ready: RegExp,
  timeoutMs = 60_000,
): Promise<ServerProcess> {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    out += d;
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    err += d;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal }));
  });
  const server: ServerProcess = {
    child,
    exited,
    stdout: () => out,
    stderr: () => err,
    async stop(graceMs = 15_000) {
      if (child.exitCode !== null || child.signalCode !== null) return exited;
      child.kill('SIGTERM');
      const timer = setTimeout(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      }, graceMs);
      const r = await exited;
      clearTimeout(timer);
      return r;
    },
  };
  const deadline = Date.now() + timeoutMs;
  while (!ready.test(out)) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(
        `signalbase ${args.join(' ')} exited early (${child.exitCode ?? child.signalCode})\nstdout:\n${out}\nstderr:\n${err}`,
      );
    }
    if (Date.now() > deadline) {
      await server.stop(2000);
      throw new Error(
        `signalbase ${args.join(' ')} printed nothing matching ${ready} within ${timeoutMs} ms\nstdout:\n${out}\nstderr:\n${err}`,
      );
    }
    await sleep(100);
  }
  return server;
}

/** Spawns `signalbase start` and resolves once its stdout prints the `REST v2:` line and healthz says ok. */
export async function startServer(env: Record<string, string>, timeoutMs = 120_000): Promise<ServerProcess> {
  const deadline = Date.now() + timeoutMs;
  const server = await startProcess(['start'], env, /REST v2:/, timeoutMs);
  const out = server.stdout;
  // Let the rest of the banner (key line) arrive.
  const keyDeadline = Date.now() + 2000;
  while (!/\btry: /.test(out()) && Date.now() < keyDeadline) await sleep(50);
  // `start` listens before it has caught up with the log; the tests want the read models current.
  const url = /REST v2:\s+(\S+)\/v2/.exec(out())![1];
  while (
    (await fetch(`${url}/healthz`).then(
      (r) => r.status,
      () => 0,
    )) !== 200
  ) {
    if (Date.now() > deadline) {
      await server.stop(2000);
      throw new Error(`healthz never turned ok within ${timeoutMs} ms\n${out()}\n${server.stderr()}`);
    }
    await sleep(100);
  }
  return server;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `probe` every `intervalMs` until it returns true or `timeoutMs` passes; returns the last value seen. */
export async function pollUntil<T>(
  probe: () => Promise<T>,
  done: (v: T) => boolean,
  timeoutMs = 5000,
  intervalMs = 200,
): Promise<{ value: T; ok: boolean; ms: number }> {
  const t0 = Date.now();
  for (;;) {
    const value = await probe();
    if (done(value)) return { value, ok: true, ms: Date.now() - t0 };
    if (Date.now() - t0 >= timeoutMs) return { value, ok: false, ms: Date.now() - t0 };
    await sleep(intervalMs);
  }
}
