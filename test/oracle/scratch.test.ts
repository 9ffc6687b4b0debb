import { afterAll, beforeAll, it } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.ts';
import { generateDemo } from '../../projectors/demo/generate.ts';
import * as O from './oracle.ts';
let h: Harness; let key: string; let records: any[];
beforeAll(async () => {
  h = await createHarness();
  records = [...generateDemo({ scale: 'small', now: new Date() })];
  await h.given(records);
  key = await h.key();
});
afterAll(async () => { await h?.close(); });
it('ovfl', async () => {
  const r = await h.get('/v2/positions/open?limit=20&assetIds=22', key);
  console.log(r.status, JSON.stringify(r.body).slice(0, 1500));
  const r2 = await h.get('/v2/positions?limit=5&assetIds=22&startTime=2000-01-01T00:00:00Z', key);
  console.log(r2.status, JSON.stringify(r2.body).slice(0, 1500));
});
