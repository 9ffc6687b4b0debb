import type { Cache, Watermarks } from './port.ts';

/**
 * In-process adapter: a map bounded in entries and bytes, with per-entry expiry. When full, the
 * entries used least recently go first: answers asked once (stats of a random set of traders) do
 * not push out the ones asked again and again.
 */
export class MemoryCache implements Cache {
  private readonly map = new Map<string, { value: string; expires: number }>();
  private bytes = 0;
  constructor(
    private readonly maxEntries = 50_000,
    private readonly maxBytes = 256 << 20,
    private readonly clock: () => number = Date.now,
  ) {}

  private remove(key: string): void {
    const e = this.map.get(key);
    if (e) {
      this.bytes -= e.value.length * 2;
      this.map.delete(key);
    }
  }

  async get(key: string): Promise<string | undefined> {
    const e = this.map.get(key);
    if (!e) return undefined;
    if (e.expires <= this.clock()) {
      this.remove(key);
      return undefined;
    }
    // Map order is the eviction order: a used entry moves to the back.
    this.map.delete(key);
    this.map.set(key, e);
    return e.value;
  }

  async set(key: string, value: string, ttlMs: number): Promise<void> {
    const size = value.length * 2; // UTF-16 code units
    if (size > this.maxBytes) return;
    this.remove(key); // re-inserted at the back of the eviction order
    while (this.map.size && (this.map.size >= this.maxEntries || this.bytes + size > this.maxBytes))
      this.remove(this.map.keys().next().value!);
    this.map.set(key, { value, expires: this.clock() + ttlMs });
    this.bytes += size;
  }

  async clear(prefix: string): Promise<void> {
    for (const k of [...this.map.keys()]) if (k.startsWith(prefix)) this.remove(k);
  }
}

export class MemoryWatermarks implements Watermarks {
  private readonly marks = new Map<string, number>();
  async get(name: string): Promise<number> {
    return this.marks.get(name) ?? 0;
  }
  async advance(name: string, value: number): Promise<number> {
    const next = Math.max(this.marks.get(name) ?? 0, value);
    this.marks.set(name, next);
    return next;
  }
}
