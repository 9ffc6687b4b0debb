/**
 * Sets `key` in `kept` as its newest entry, forgetting the oldest past `max`: the bounded memory of
 * what was read or written last, kept by projections (their state in a projector session) and by
 * reads (their memos), newest last.
 */
export function remember<K, V>(kept: Map<K, V>, key: K, value: V, max: number): void {
  kept.delete(key);
  kept.set(key, value);
  if (kept.size > max) kept.delete(kept.keys().next().value!);
}
