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

  constructor(
    readonly store: Store,
    readonly projections: readonly Projection[] = PROJECTIONS,
  ) {}

  stateOf<S>(projection: Projection<S>): S {
    if (!projection.state) throw new Error(`the ${projection.name} projection keeps no state`);
    if (!this.states.has(projection)) this.states.set(projection, projection.state.init());
    return this.states.get(projection) as S;
  }

  /** Forgets what every projection keeps of the store: each clears it in place (`state.reset`) or it is made again when next asked for. */
  reset(): void {
    for (const [projection, state] of this.states) {
      if (projection.state?.reset) projection.state.reset(state);
      else this.states.delete(projection);
    }
  }
}
