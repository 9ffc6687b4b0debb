import type { Cache, Watermarks } from './port.ts';

/** In-process adapter: a bounded map with per-entry expiry (oldest entries go first when full). */
export class MemoryCache implements Cache {
  private readonly map = new Map<string, { value: string; expires: number }>();
  constructor(private readonly maxEntries = 50_000) {}

  async get(key: string): Promise<string | undefined> {
    const e = this.map.get(key);
    if (!e) return undefined;
    if (e.expires <= Date.now()) { this.map.delete(key); return undefined; }
    return e.value;
  }

  async set(key: string, value: string, ttlMs: number): Promise<void> {
    if (this.map.size >= this.maxEntries) this.map.delete(this.map.keys().next().value!);
    this.map.delete(key); // re-insert so Map order stays oldest-first
    this.map.set(key, { value, expires: Date.now() + ttlMs });
  }

  async clear(prefix: string): Promise<void> {
    for (const k of this.map.keys()) if (k.startsWith(prefix)) this.map.delete(k);
  }
}

export class MemoryWatermarks implements Watermarks {
  private readonly marks = new Map<string, number>();
  async get(name: string): Promise<number> { return this.marks.get(name) ?? 0; }
  async advance(name: string, value: number): Promise<number> {
    const next = Math.max(this.marks.get(name) ?? 0, value);
    this.marks.set(name, next);
    return next;
  }
}
