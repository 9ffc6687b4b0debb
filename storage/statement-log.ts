import { appendFile } from 'node:fs/promises';

/** Characters of a statement's text a line keeps. */
const STATEMENT_CHARS = 200;
/** How often held lines are appended to the file (ms). */
const FLUSH_MS = 500;

/**
 * A log of the store's statements (STATEMENT_LOG), to see where the store's time goes under a
 * load: one tab-separated line per statement, appended to a file every FLUSH_MS:
 *
 *   ISO time it ended \t session (projector, reads, maintenance) \t ms it waited for its session \t
 *   ms it ran \t ok|failed \t its text (whitespace folded, the first 200 characters)
 *
 * Parameters are bound apart from the text (storage/chdb.ts), so no value of a caller's is in a line.
 */
export class StatementLog {
  private lines: string[] = [];
  private writing: Promise<void> = Promise.resolve();
  private readonly timer: NodeJS.Timeout;
  private failed = false;

  constructor(
    readonly path: string,
    private readonly onError: (err: Error) => void = () => {},
  ) {
    this.timer = setInterval(() => void this.flush(), FLUSH_MS);
    this.timer.unref();
  }

  note(session: string, waitedMs: number, ranMs: number, ok: boolean, statement: string): void {
    const text = statement.replace(/\s+/g, ' ').trim().slice(0, STATEMENT_CHARS);
    this.lines.push(
      `${new Date().toISOString()}\t${session}\t${waitedMs.toFixed(1)}\t${ranMs.toFixed(1)}\t${ok ? 'ok' : 'failed'}\t${text}\n`,
    );
  }

  /** Appends what is held; resolves when it is written. */
  flush(): Promise<void> {
    if (this.lines.length) {
      const text = this.lines.join('');
      this.lines = [];
      this.writing = this.writing.then(() =>
        appendFile(this.path, text, { mode: 0o600 }).catch((err: Error) => {
          // Said once: the lines are dropped while the file cannot be written.
          if (!this.failed) this.onError(err);
          this.failed = true;
        }),
      );
    }
    return this.writing;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
