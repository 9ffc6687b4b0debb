import { setFlagsFromString } from 'node:v8';

/**
 * V8's heap as a service process wants it, set when the service starts. The store hands streamed
 * answers (exports) over in chunks of several MB of native memory, which V8 counts as external and
 * frees only in a garbage collection; with the growing factor V8 picks for a heap of this size
 * (close to 1), a large export set off a full collection of the whole heap every few chunks, each
 * holding the event loop for tens of ms (issue 28). The old generation may now grow to twice what
 * a full collection leaves before the next one.
 */
export function tuneServiceHeap(): void {
  setFlagsFromString('--heap-growing-percent=100');
}
