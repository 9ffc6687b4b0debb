/**
 * A table (or view) of the read models, as SQL names it: `${EVENTS}` in a statement is
 * `$db.events`, which the store binds to its database (storage/port.ts, bindDatabase). Each table
 * is declared once, in its module under storage/tables/; nothing else writes a table's name.
 */
export interface Table {
  /** The table's own name (what `insert` and system.tables take). */
  readonly name: string;
  /**
   * The columns whose values a change of this table is tracked by (storage/changes.ts): only for
   * tables where the rows written name every owner a write touches: statement tables with these
   * columns in their sorting key (a row that moves to another trader or asset leaves a tombstone at
   * its old one), or tables whose key holds them (a row never moves: prices by asset). `time`: a
   * column of the sorting key in ms or ISO date-time, whose range over the rows written a change
   * records too (a row that moves in time leaves its tombstone at the old time). `source`: the
   * columns (platform, sourceIdentityId) of a table whose rows belong to a source, not a trader
   * (messages: a trader's are its assigned source's).
   */
  readonly changes?: {
    readonly trader?: string;
    readonly asset?: string;
    readonly time?: string;
    /** Columns whose written values only grow (sequences): a change says the highest of each written. */
    readonly marks?: readonly string[];
    readonly source?: readonly [platform: string, sourceIdentityId: string];
  };
  /** `$db.<name>`, for SQL. */
  toString(): string;
}

const byName = new Map<string, Table>();

export function table(name: string, opts: { changes?: Table['changes'] } = {}): Table {
  const ref = `$db.${name}`;
  const t: Table = { name, ...(opts.changes ? { changes: opts.changes } : {}), toString: () => ref };
  byName.set(name, t);
  return t;
}

/** The table declared with this name, if any (a change records rows by the table's own columns). */
export const tableNamed = (name: string): Table | undefined => byName.get(name);
