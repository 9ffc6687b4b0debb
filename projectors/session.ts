import type { Store } from '../storage/port.ts';
import { PROJECTIONS } from './index.ts';
import type { Projection, ProjectionContext } from './projection.ts';

/**
 * The projector's session with one store: the projections it applies, and what each of them keeps
 * in memory of that store between batches (each projection's declared `state`, made when first
 * asked for). One session per projector and store; `reset` forgets every projection's state at
 * once (a take-over: another writer may have written the store since), so each reads again from
 * the store what it needs.
 */
export class ProjectorSession implements ProjectionContext {
  private readonly states = new Map<Projection, unknown>();
  /** Work put off by `settle`, by name (one pending run per name covers every batch before it). */
  private readonly pending = new Map<string, () => Promise<void>>();
  /**
   * When set (the live projector, runProjector with a cadence), `settle` puts work off and calls
   * this; the runner runs `settlePending` soon after, and before a caught-up resolves.
   */
  onPending?: () => void;

  constructor(
    readonly store: Store,
    readonly projections: readonly Projection[] = PROJECTIONS,
  ) {}

  stateOf<S>(projection: Projection<S>): S {
    if (!projection.state) throw new Error(`the ${projection.name} projection keeps no state`);
    if (!this.states.has(projection)) this.states.set(projection, projection.state.init());
    return this.states.get(projection) as S;
  }

  /**
   * Runs `work` (derived models that may lag a live batch, such as the activity roll-ups) now, or,
   * live, puts it off: the runner runs the pending work at most every so often, so a trickle of
   * small batches does not pay it per batch (issue 26). `work` must cover everything before it.
   */
  async settle(name: string, work: () => Promise<void>): Promise<void> {
    if (!this.onPending) return work();
    this.pending.set(name, work);
    this.onPending();
  }

  /** Runs the work `settle` put off, one after the other; false when there was none. */
  async settlePending(): Promise<boolean> {
    if (!this.pending.size) return false;
    const work = [...this.pending];
    this.pending.clear();
    for (let i = 0; i < work.length; i++) {
      try {
        await work[i]![1]();
      } catch (err) {
        // Pending again (unless a newer run of the same name is), to be retried.
        for (const [name, w] of work.slice(i)) if (!this.pending.has(name)) this.pending.set(name, w);
        throw err;
      }
    }
    return true;
  }

  /** Runs every projection's `resume` (what a stopped projector left undone), as settled work of its own. */
  resume(): Promise<void> {
    return this.settle('resume', async () => {
      for (const p of this.projections) await p.resume?.(this);
    });
  }

  /** Whether work put off by `settle` is waiting. */
  get unsettled(): boolean {
    return this.pending.size > 0;
  }

  /** Forgets what every projection keeps of the store: each clears it in place (`state.reset`) or it is made again when next asked for. */
  reset(): void {
    for (const [projection, state] of this.states) {
      if (projection.state?.reset) projection.state.reset(state);
      else this.states.delete(projection);
    }
  }
}
