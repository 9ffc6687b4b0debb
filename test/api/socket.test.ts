import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, createHarness, type Harness } from '../helpers/harness.ts';

/** The same contract over a real TCP socket with fetch: headers, keep-alive and JSON as a client sees them. */
let h: Harness;
let base: string;
let key: string;

beforeAll(async () => {
  h = await createHarness();
  await h.given([
    build.source('src-1'),
    build.trader(1),
    build.asset(1),
    ...Array.from({ length: 30 }, (_, i) => build.event(i + 1, { timeOfEvent: new Date(Date.now() - (i + 1) * 60e3).toISOString() })),
  ]);
  key = await h.key({ scopes: ['events.read'] });
  base = await h.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await h?.close();
});

describe('REST over a socket', () => {
  it('walks pages with fetch and the x-api-key header', async () => {
    const seen: number[] = [];
    let cursor: string | null = null;
    do {
      const res: Response = await fetch(`${base}/v2/events?limit=7${cursor ? `&cursor=${cursor}` : ''}`, { headers: { 'x-api-key': key } });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/application\/json/);
      const body: any = await res.json();
      expect(res.headers.get('x-request-id')).toBe(body.requestId);
      seen.push(...body.data.results.map((e: any) => e.id));
      cursor = body.data.meta.nextCursor;
    } while (cursor);
    expect(seen).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
  });

  it('answers 401 and 403 with the error envelope', async () => {
    const noKey = await fetch(`${base}/v2/events`);
    expect(noKey.status).toBe(401);
    expect(await noKey.json()).toMatchObject({ success: false, error: { code: 'UNAUTHORIZED' } });
    const wrongScope = await fetch(`${base}/v2/messages`, { headers: { 'x-api-key': key } });
    expect(wrongScope.status).toBe(403);
    expect(await wrongScope.json()).toMatchObject({ success: false, error: { code: 'FORBIDDEN' } });
  });
});
