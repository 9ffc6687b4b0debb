// Issue 25: a projection owns its read model and its state. What projections keep in memory of a
// store lives in the projector session (projectors/session.ts), declared by each projection as
// its `state`; no projector module keeps state keyed by Store, and the session resets every
// projection's state at once.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Projection } from '../../projectors/projection.ts';
import { ProjectorSession } from '../../projectors/session.ts';
import type { Store } from '../../storage/port.ts';

const ROOT = join(import.meta.dirname, '..', '..');

describe('issue 25: projector state', () => {
  it('no module of projectors/ keeps a map keyed by Store', () => {
    const files = readdirSync(join(ROOT, 'projectors'), { withFileTypes: true, recursive: true })
      .filter((e) => e.isFile() && e.name.endsWith('.ts'))
      .map((e) => join(e.parentPath, e.name));
    const keyed = files.filter((f) => /\b(Weak)?Map<\s*Store\b/.test(readFileSync(f, 'utf8'))).map((f) => relative(ROOT, f));
    expect(keyed).toEqual([]);
  });

  it('a session makes a projection state once, and a reset drops it or resets it in place', () => {
    const store = {} as Store;
    let made = 0;
    const dropped: Projection<{ n: number }> = { name: 'dropped', canHandle: [], ddl: [], state: { init: () => ({ n: ++made }) } };
    const kept: Projection<{ n: number | null; lock: object }> = {
      name: 'kept',
      canHandle: [],
      ddl: [],
      state: {
        init: () => ({ n: 1, lock: {} }),
        reset: (s) => {
          s.n = null;
        },
      },
    };
    const session = new ProjectorSession(store, [dropped, kept]);
    expect(session.stateOf(dropped)).toBe(session.stateOf(dropped));
    const before = session.stateOf(kept);
    session.reset();
    expect(session.stateOf(dropped).n).toBe(2);
    expect(session.stateOf(kept)).toBe(before);
    expect(before.n).toBeNull();
    expect(() => session.stateOf({ name: 'none', canHandle: [], ddl: [] })).toThrow('keeps no state');
  });
});
