// The projector as a process of its own, for test/projectors/crash.test.ts: it is SIGKILLed at
// random moments (by the test, or by itself at a chosen store write) and started again on the same
// DATA_DIR and chdb path. chdb holds one data directory per process and cannot be killed from inside
// a test process, hence a child.
//
//   node --import tsx test/helpers/crash-child.ts --data-dir D --chdb P [--db NAME] [--group G]
//        [--max-batch N] [--kill-at <point>:K] [--wait]
//
// It does what `signalbase start` does for the read models (migrateReadModels, then the projector's
// subscription, which is runProjector's with a `maxBatch`), and prints one line per step on stdout
// (a pipe: written synchronously on Linux, so the last line a killed child printed tells where it
// died):
//   loaded                     modules loaded (with --wait: waiting for the go line)
//   ready                      store open, read models migrated
//   projecting                 subscribed
//   b <topic> <records> <lastOffset>     a batch starts
//   w <table> <rows>           a store write returned (insert of `rows` rows)
//   c <topic>                  a batch's offsets were committed
//   caught-up                  everything on the log is projected and committed (then it exits 0)
// `--kill-at <point>:K` SIGKILLs the process at the K-th time it reaches the point:
//   write-<n>-<topic>   right after the n-th store write of a batch of that topic returned (a
//                       trade-events batch writes performance rows when a position changed what it
//                       is evaluated on, then positions, the feed, then events, then the activity
//                       roll-up: activity_events twice (hours, days), activity_rollup last)
//   <table>             right after a non-empty write to that table (events, positions, messages, ...)
//   write               right after any non-empty write
//   commit              right after a batch's offsets were committed
//   start-<topic>       when a batch of that topic starts, before it reads or writes anything
//
// `--wait`: load the modules (the slow part of a start), print `loaded`, then wait for one line
// `go <maxBatch> <kill-at or ->` on stdin before opening the store, so that the test can start the
// next child while the previous one still runs (never two on one chdb path). Stdin closed without
// a go line: exit 0 without touching anything.
import { EmbeddedLog } from '../../projectors/log/embedded.ts';
import { applyBatch, migrateReadModels, PROJECTOR_GROUP } from '../../projectors/runner.ts';
import { ProjectorSession } from '../../projectors/session.ts';
import { TOPIC_NAMES } from '../../schemas/topics/index.ts';
import { openChdbStore } from '../../storage/chdb.ts';
import type { Store } from '../../storage/port.ts';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? undefined : process.argv[i + 1];
}

const dataDir = arg('data-dir');
const chdbPath = arg('chdb');
if (!dataDir || !chdbPath) throw new Error('crash-child: --data-dir and --chdb are required');
const db = arg('db') ?? 'signalbase';
const group = arg('group') ?? PROJECTOR_GROUP;
let maxBatch = Number(arg('max-batch') ?? 5000);
let killSpec = arg('kill-at') ?? '-';

/** The first line on stdin, or null when stdin ends without one. */
function firstLine(): Promise<string | null> {
  return new Promise((resolve) => {
    let buf = '';
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', (d: string) => {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl !== -1) {
        process.stdin.pause();
        resolve(buf.slice(0, nl));
      }
    });
    process.stdin.on('end', () => resolve(null));
  });
}

if (process.argv.includes('--wait')) {
  process.stdout.write('loaded\n');
  const go = await firstLine();
  if (go === null) process.exit(0);
  const [word, batch, kill] = go.split(' ');
  if (word !== 'go' || !batch || !kill) throw new Error(`crash-child: expected "go <maxBatch> <kill-at>", got ${go}`);
  maxBatch = Number(batch);
  killSpec = kill;
}
const [killPoint, killNth] = (killSpec === '-' ? ':0' : killSpec).split(':') as [string, string];
const killAt = Number(killNth);

const say = (line: string) => process.stdout.write(line + '\n');
const counts = new Map<string, number>();

/** Counts a point; at the chosen occurrence of the chosen point the process dies on the spot. */
function reached(point: string): void {
  const n = (counts.get(point) ?? 0) + 1;
  counts.set(point, n);
  if (killAt > 0 && point === killPoint && n === killAt) {
    say(`self-kill ${point}:${n}`);
    process.kill(process.pid, 'SIGKILL');
  }
}

let batchTopic = '';
let batchWrites = 0;

/** The store, with a line printed (and kill points) after every write. */
function instrumented(store: Store): Store {
  const wrote = (table: string, rows: number) => {
    say(`w ${table} ${rows}`);
    reached(`write-${++batchWrites}-${batchTopic}`);
    if (rows > 0) {
      reached('write');
      reached(table);
    }
  };
  return {
    get database() {
      return store.database;
    },
    query: (sql, params) => store.query(sql, params),
    // An INSERT ... SELECT (the activity roll-up) is a write too; its row count is not known here.
    async exec(sql, params) {
      await store.exec(sql, params);
      const m = /^\s*INSERT INTO \$db\.(\w+)/.exec(sql);
      if (m) wrote(m[1]!, 1);
    },
    close: () => store.close(),
    async insert(table, rows) {
      await store.insert(table, rows);
      wrote(table, rows.length);
    },
    async insertCompact(table, columns, rows) {
      await store.insertCompact(table, columns, rows);
      wrote(table, rows.length);
    },
  };
}

const log = new EmbeddedLog(dataDir, 20);
const chdb = await openChdbStore(chdbPath, db);
const store = instrumented(chdb);
const session = new ProjectorSession(store);
await migrateReadModels(
  chdb,
  () => log.writeOffsets(group, {}),
  (l) => say(`# ${l}`),
);
say('ready');
const sub = log.subscribe(
  group,
  TOPIC_NAMES,
  async (batch) => {
    say(`b ${batch.topic} ${batch.records.length} ${batch.records.at(-1)?.offset ?? ''}`);
    batchTopic = batch.topic;
    batchWrites = 0;
    reached(`start-${batch.topic}`);
    await applyBatch(session, batch);
  },
  {
    maxBatch,
    onCommit: (batch) => {
      say(`c ${batch.topic}`);
      reached('commit');
    },
    onError: (err, batch) => say(`# batch of ${batch.topic} failed: ${(err as Error).message.replace(/\s+/g, ' ').slice(0, 300)}`),
  },
);
say('projecting');
await sub.caughtUp();
say('caught-up');
await sub.stop();
await chdb.close();
process.exit(0);
