import { appendFileSync, existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';

/**
 * Keyed records of the dev authorization server (registered clients, refresh tokens) as an
 * append-only journal under DATA_DIR/auth: one NDJSON line per change (`{"k", "v"}` sets a record,
 * `{"k", "d": 1}` deletes it), replayed on open. A change costs one short append, not a rewrite of
 * every record; the file is rewritten with the live records only (atomically: a temporary file
 * renamed over it) once it holds `compactFactor` times as many lines as there are live records.
 * Files are mode 0600.
 */
export class Journal<T> {
  private readonly data = new Map<string, T>();
  private lines = 0;
  private readonly compactFactor: number;
  private readonly minLines: number;

  constructor(
    private readonly file: string,
    opts: {
      /** A JSON object of records in the former whole-file format: imported once, then removed. */
      legacyJson?: string;
      /** Compact when the journal has this many times more lines than live records (default 4). */
      compactFactor?: number;
      /** ... and at least this many lines (default 256): a small journal is left alone. */
      minLines?: number;
    } = {},
  ) {
    this.compactFactor = opts.compactFactor ?? 4;
    this.minLines = opts.minLines ?? 256;
    if (existsSync(file)) {
      const text = readFileSync(file, 'utf8');
      for (const line of text.split('\n')) {
        if (!line) continue;
        this.lines++;
        let rec: { k?: unknown; v?: T; d?: unknown };
        try {
          rec = JSON.parse(line);
        } catch {
          continue;
        } // a line torn by a crash mid-append: that change is lost, the rest stands
        if (typeof rec.k !== 'string') continue;
        if (rec.d) this.data.delete(rec.k);
        else if (rec.v !== undefined) this.data.set(rec.k, rec.v);
      }
      // A torn last line is rewritten away now, so that the next append starts a line of its own.
      if (text.length && !text.endsWith('\n')) this.compact();
    } else if (opts.legacyJson && existsSync(opts.legacyJson)) {
      for (const [k, v] of Object.entries(JSON.parse(readFileSync(opts.legacyJson, 'utf8')) as Record<string, T>)) this.data.set(k, v);
      this.compact();
      rmSync(opts.legacyJson, { force: true });
    }
  }

  get size(): number {
    return this.data.size;
  }
  get(k: string): T | undefined {
    return this.data.get(k);
  }
  entries(): [string, T][] {
    return [...this.data];
  }

  set(k: string, v: T): void {
    this.data.set(k, v);
    this.append(JSON.stringify({ k, v }) + '\n', 1);
  }

  delete(...ks: string[]): void {
    const gone = ks.filter((k) => this.data.delete(k));
    if (gone.length) this.append(gone.map((k) => JSON.stringify({ k, d: 1 })).join('\n') + '\n', gone.length);
  }

  /** Lines in the journal file (tests read it to see that changes append). */
  get journalLines(): number {
    return this.lines;
  }

  private append(text: string, lines: number): void {
    appendFileSync(this.file, text, { mode: 0o600 });
    this.lines += lines;
    if (this.lines >= Math.max(this.minLines, this.compactFactor * this.data.size)) this.compact();
  }

  private compact(): void {
    const tmp = `${this.file}.${process.pid}.tmp`;
    let text = '';
    for (const [k, v] of this.data) text += JSON.stringify({ k, v }) + '\n';
    writeFileSync(tmp, text, { mode: 0o600 });
    renameSync(tmp, this.file);
    this.lines = this.data.size;
  }
}
