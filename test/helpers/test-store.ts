import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChdbStore } from '../../storage/chdb.ts';
import { ClickHouseStore } from '../../storage/clickhouse.ts';
import type { Store } from '../../storage/port.ts';
import { type ClickHousePeer, startClickHousePeer } from './clickhouse-peer.ts';

/**
 * chdb allows one data directory per process: every test process shares one directory and each
 * harness gets a database of its own in it.
 */
const processDir = join(tmpdir(), `signalbase-test-${process.pid}`);
let counter = 0;
let open = 0;

/** A harness's store: chdb in process, or the ClickHouse server store over HTTP. */
export type TestStore = Store & { drop(): Promise<void> };

/**
 * SIGNALBASE_TEST_STORE=clickhouse (and the distributed wiring) run on ClickHouseStore
 * (@clickhouse/client over real HTTP): against CLICKHOUSE_URL when set, else against the test peer
 * on chdb (clickhouse-peer.ts), one per process on its data directory.
 */
export const onClickHouse = () =>
  process.env.SIGNALBASE_TEST_STORE === 'clickhouse' || process.env.SIGNALBASE_TEST_WIRING === 'distributed';
let peer: Promise<ClickHousePeer> | undefined;

/** The ClickHouse server's URL (the peer is started on first use). */
export async function clickHouseUrl(): Promise<string> {
  return process.env.CLICKHOUSE_URL ?? (await (peer ??= startClickHousePeer(processDir))).url;
}

export async function openTestStore(database: string, ownSession = false): Promise<TestStore> {
  if (!onClickHouse()) return new ChdbStore(processDir, database, { ownSession }).init();
  return new ClickHouseStore({ url: await clickHouseUrl(), database }).init();
}

/** A new database for a harness; `releaseTestDatabase` when it closes. */
export function newTestDatabase(): string {
  open++;
  return `t${process.pid}_${++counter}_${Date.now() % 100000}`;
}

/** The last harness of the process closed the chdb session (and the peer): its directory can go too. */
export async function releaseTestDatabase(): Promise<void> {
  if (--open > 0) return;
  const p = peer;
  peer = undefined;
  await (await p)?.close();
  // The store may still be finishing a part as its session closes (ENOTEMPTY in a CI run at stop 39): removal retries.
  rmSync(processDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
}
