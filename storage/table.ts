/**
 * A table (or view) of the read models, as SQL names it: `${EVENTS}` in a statement is
 * `$db.events`, which the store binds to its database (storage/port.ts, bindDatabase). Each table
 * is declared once, in its module under storage/tables/; nothing else writes a table's name.
 */
export interface Table {
  /** The table's own name (what `insert` and system.tables take). */
  readonly name: string;
  /** `$db.<name>`, for SQL. */
  toString(): string;
}

export function table(name: string): Table {
  const ref = `$db.${name}`;
  return { name, toString: () => ref };
}
