/**
 * Shared cache and watermarks (DESIGN 2): in-process in embedded mode, Redis in distributed mode.
 * Values are strings (encoded JSON) so both adapters hold the same bytes.
 */
export interface Cache {
  get(key: string): Promise<string | undefined>;
  set(key: string, value: string, ttlMs: number): Promise<void>;
  /** Drops every key with this prefix (e.g. all auth answers when the projector commits). */
  clear(prefix: string): Promise<void>;
}

/** The watermark of committed projector batches: it changes exactly when a read's answer may change. */
export const DATA_VERSION = 'data-version';

export interface Watermarks {
  /** The current value of a named watermark (0 when never set). */
  get(name: string): Promise<number>;
  /** Raises a watermark; a lower value than the stored one is ignored (watermarks never go back). */
  advance(name: string, value: number): Promise<number>;
}
