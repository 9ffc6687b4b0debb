import { afterAll, beforeAll, it } from 'vitest';
import { createHarness, type Harness } from '../helpers/harness.ts';
import { generateDemo } from '../../projectors/demo/generate.ts';
import * as O from './oracle.ts';
let h: Harness; let key: string; let records: any[];
beforeAll(async () => {
  let t = Date.now();
  h = await createHarness();
  records = [...generateDemo({ scale: 'small', now: new Date() })];
  console.log('gen', records.length, Date.now() - t); t = Date.now();
  await h.given(records);
  console.log('ingest', Date.now() - t); t = Date.now();
  key = await h.key();
  O.buildWorld(records); console.log('world', Date.now() - t);
});
afterAll(async () => { await h?.close(); });
it('latency', async () => {
  for (const url of ['/v2/events?limit=200', '/v2/positions?limit=200', '/v2/positions/open?limit=200', '/v2/messages?limit=200', '/v2/traders?limit=200', '/v2/assets?limit=200']) {
    let t = Date.now();
    let r: any;
    for (let i = 0; i < 5; i++) r = await h.get(url, key);
    console.log(url, r.status, (Date.now() - t) / 5, r.body.data?.results?.length, JSON.stringify(r.body).slice(0, 300));
  }
  const w = O.buildWorld(records);
  console.log('events', O.events(w, {}).length, 'positions', w.positions.size, 'messages', O.messages(w).length);
});
