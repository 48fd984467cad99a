//! Snapshots: analytical queries see a transaction-consistent state while updates stream in,
//! and the copy-on-write copies each shared segment once.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use freshet::{Config, Database, Value};
use freshet_core::types::DataType;

const ROWS: i64 = 60_000;
const START: i64 = 100;

fn setup() -> Database {
    let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE acc (id INT PRIMARY KEY, grp INT NOT NULL, balance BIGINT NOT NULL)").unwrap();
    s.execute_blocking("CREATE INDEX acc_grp ON acc (grp)").unwrap();
    // In id order, so that the rows' places are known (chunk 0 holds ids 0..8192): the
    // analytical side's parallel generator otherwise hands the batches over in any order.
    s.execute_blocking(&format!("INSERT INTO acc SELECT value, value / 2, {START} FROM generate_series(0, {}) ORDER BY value", ROWS - 1))
        .unwrap();
    db
}

fn total(s: &mut freshet::Session) -> i64 {
    let r = s.execute_blocking("SELECT sum(balance), count(*) FROM acc").unwrap();
    match r[0].rows()[0].as_slice() {
        [Value::Int64(sum), Value::Int64(n)] => {
            assert_eq!(*n, ROWS);
            *sum
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// Writers move money between the two rows of a group in one statement; the total never
/// changes, so every analytical sum must equal it exactly.
#[test]
fn analytical_sums_stay_invariant_under_concurrent_updates() {
    let db = setup();
    let stop = Arc::new(AtomicBool::new(false));
    let updates = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (db, stop, updates) = (db.clone(), stop.clone(), updates.clone());
            std::thread::spawn(move || {
                let mut s = db.session();
                let stmt = futures::executor::block_on(s.prepare(
                    "UPDATE acc SET balance = balance + CASE WHEN id % 2 = 0 THEN $2 ELSE 0 - $2 END WHERE grp = $1",
                    &[Some(DataType::Int32), Some(DataType::Int64)],
                ))
                .unwrap();
                let mut i: i64 = w;
                while !stop.load(Ordering::Relaxed) {
                    i = (i * 7_919 + 13) % (ROWS / 2);
                    let r = futures::executor::block_on(s.collect(&stmt, vec![Value::Int32(i as i32), Value::Int64(i % 17 - 8)]))
                        .unwrap();
                    assert_eq!(r.tag, "UPDATE 2");
                    updates.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut s = db.session();
    let mut checks = 0;
    while updates.load(Ordering::Relaxed) < 2_000 || checks < 20 {
        assert_eq!(total(&mut s), ROWS * START, "an analytical query saw a torn state");
        checks += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(total(&mut s), ROWS * START);
    // Balances really moved.
    let moved = s.execute_blocking(&format!("SELECT count(*) FROM acc WHERE balance <> {START}")).unwrap();
    assert!(matches!(moved[0].rows()[0][0], Value::Int64(n) if n > 0));
}

/// A snapshot shares every segment; the first write to a segment after it copies that one
/// segment, later writes to the same segment copy nothing, and once the snapshot is gone
/// writes copy nothing at all.
#[test]
fn copy_on_write_copies_each_shared_segment_once() {
    let db = setup();
    let engine = db.engine().clone();
    let table = engine.catalog().table("acc").unwrap().clone();
    let mut s = db.session();
    let copies = || futures::executor::block_on(engine.table_stats(&table)).unwrap().segments_copied;
    let snapshot = futures::executor::block_on(engine.snapshot(std::slice::from_ref(&table), None, Vec::new())).unwrap();
    let before = copies();
    // Ten updates of the balance column in chunk 0 (ids 0..20), then one in the last chunk.
    for id in 0..10 {
        s.execute_blocking(&format!("UPDATE acc SET balance = balance + 1 WHERE id = {id}")).unwrap();
    }
    assert_eq!(copies() - before, 1, "one segment (balance of chunk 0) copied once");
    s.execute_blocking(&format!("UPDATE acc SET balance = balance + 1 WHERE id = {}", ROWS - 1)).unwrap();
    assert_eq!(copies() - before, 2);
    // The snapshot still has the old values.
    let old: i64 = snapshot[0].rows().iter().map(|r| r[2].as_i64().unwrap()).sum();
    assert_eq!(old, ROWS * START);
    drop(snapshot);
    let after_drop = copies();
    for id in 0..10 {
        s.execute_blocking(&format!("UPDATE acc SET balance = balance + 1 WHERE id = {id}")).unwrap();
    }
    assert_eq!(copies(), after_drop, "no copies once no snapshot shares the segments");
}

/// A snapshot taken with a query's zone-map tests holds only the chunks they leave in: the
/// live table copies nothing when other chunks are written while it lives, and a row the
/// snapshot must see at its old value keeps its chunk even if the chunk's stored values no
/// longer match.
#[test]
fn a_pruned_snapshot_holds_only_the_chunks_its_tests_leave_in() {
    use freshet_core::storage::RangeTest;
    let db = setup(); // chunk 0 holds ids 0..8192, chunk 7 ids 57344..60000
    let engine = db.engine().clone();
    let table = engine.catalog().table("acc").unwrap().clone();
    let mut s = db.session();
    let copies = || futures::executor::block_on(engine.table_stats(&table)).unwrap().segments_copied;
    let ids = RangeTest { column: 0, lo: 100, hi: 199 };
    let snapshot = futures::executor::block_on(engine.snapshot(std::slice::from_ref(&table), None, vec![vec![ids]])).unwrap();
    assert_eq!(snapshot[0].chunks.len(), 1);
    assert_eq!(snapshot[0].rows().iter().filter(|r| matches!(r[0], Value::Int32(id) if (100..200).contains(&id))).count(), 100);
    let before = copies();
    for id in [9_000, 30_000, ROWS - 1] {
        s.execute_blocking(&format!("UPDATE acc SET balance = balance + 1 WHERE id = {id}")).unwrap();
    }
    assert_eq!(copies(), before, "chunks the snapshot left out are not copied");
    s.execute_blocking("UPDATE acc SET balance = balance + 1 WHERE id = 150").unwrap();
    assert_eq!(copies() - before, 1, "the chunk it holds is");
    drop(snapshot);

    // An open transaction changes every balance of chunk 7: its stored values no longer
    // match a test on the committed balance, but the committed state the snapshot shows
    // (its own copy of the segment, patched back) does.
    let mut writer = db.session();
    writer.execute_blocking("BEGIN").unwrap();
    writer.execute_blocking("UPDATE acc SET balance = 5000 WHERE id >= 57344").unwrap();
    let balance = RangeTest { column: 2, lo: START, hi: START };
    let snapshot = futures::executor::block_on(engine.snapshot(std::slice::from_ref(&table), None, vec![vec![balance]])).unwrap();
    let rows = snapshot[0].rows();
    assert_eq!(snapshot[0].chunks.len(), 8, "chunk 7 is tested on the balances the snapshot sees");
    assert_eq!(rows.iter().filter(|r| matches!(r[0], Value::Int32(id) if id >= 57_344)).count(), (ROWS - 57_344) as usize);
    assert!(rows.iter().all(|r| r[2] != Value::Int64(5000)));
    writer.execute_blocking("ROLLBACK").unwrap();
}

/// Outside a block with `freshet.max_staleness = 0`, a query run again (its optimized plan
/// kept) reads a snapshot of only the chunks its filters may need, and its answers are those
/// of the whole table, also after rows move into and out of the range.
#[test]
fn repeated_queries_read_pruned_snapshots_with_the_same_answers() {
    let db = setup();
    let mut s = db.session();
    s.execute_blocking("SET freshet.short_path = off").unwrap();
    let q = "SELECT count(*), sum(balance) FROM acc WHERE id BETWEEN 100 AND 199";
    let answer = |s: &mut freshet::Session| match s.execute_blocking(q).unwrap()[0].rows()[0].as_slice() {
        [Value::Int64(n), Value::Int64(sum)] => (*n, *sum),
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(answer(&mut s), (100, 100 * START));
    assert_eq!(answer(&mut s), (100, 100 * START));
    s.execute_blocking(&format!("EXPLAIN ANALYZE {q}")).unwrap();
    let explained = s.execute_blocking(&format!("EXPLAIN ANALYZE {q}")).unwrap();
    let first = format!("{:?}", explained[0].rows()[0][0]);
    assert!(first.contains("(cow, query)"), "{first}");
    // A row moves in from chunk 3, another out; a third changes its balance.
    s.execute_blocking("UPDATE acc SET id = 150000 WHERE id = 150").unwrap();
    s.execute_blocking("UPDATE acc SET id = 150 WHERE id = 30000").unwrap();
    s.execute_blocking("UPDATE acc SET balance = balance + 5 WHERE id = 101").unwrap();
    assert_eq!(answer(&mut s), (100, 100 * START + 5));
    // With a bound above 0 the query shares an unpruned snapshot.
    s.execute_blocking("SET freshet.max_staleness = '1s'").unwrap();
    assert_eq!(answer(&mut s), (100, 100 * START + 5));
    let explained = s.execute_blocking(&format!("EXPLAIN ANALYZE {q}")).unwrap();
    let first = format!("{:?}", explained[0].rows()[0][0]);
    assert!(first.contains("(cow, shared)"), "{first}");
}

/// The batches (one per chunk) that the scan of the plan's only table hands DataFusion,
/// as EXPLAIN ANALYZE reports them (`partition_sizes=[…]`).
fn scanned_chunks(s: &mut freshet::Session, query: &str) -> usize {
    let r = s.execute_blocking(&format!("EXPLAIN ANALYZE {query}")).unwrap();
    let plan: Vec<String> = r[0]
        .rows()
        .iter()
        .map(|row| match &row[0] {
            Value::Text(line) => line.clone(),
            other => panic!("plan line {other:?}"),
        })
        .collect();
    let line = plan.iter().find(|l| l.contains("partition_sizes=")).unwrap_or_else(|| panic!("no scan in {plan:#?}"));
    let sizes = line.split("partition_sizes=[").nth(1).and_then(|rest| rest.split(']').next()).unwrap();
    sizes.split(',').filter(|n| !n.trim().is_empty()).map(|n| n.trim().parse::<usize>().unwrap()).sum()
}

fn count(s: &mut freshet::Session, query: &str) -> i64 {
    match s.execute_blocking(query).unwrap()[0].rows()[0][0] {
        Value::Int64(n) => n,
        ref other => panic!("unexpected {other:?}"),
    }
}

/// A scan skips the chunks whose value range rules out a range filter on an integer column,
/// and a chunk's range follows later writes to it.
#[test]
fn scans_skip_chunks_that_a_range_filter_rules_out() {
    let db = setup(); // acc.id = 0..60000 in insertion order: 8 chunks of 8192 rows
    let mut s = db.session();
    // The analytical scan is what is measured here: an aggregate over an index lookup
    // (`id IN (5, 20000)`) would otherwise run on the short path.
    s.execute_blocking("SET freshet.short_path = off").unwrap();
    assert_eq!(scanned_chunks(&mut s, "SELECT count(*) FROM acc WHERE balance > 0"), 8);
    let q = "SELECT count(*) FROM acc WHERE id BETWEEN 100 AND 199";
    assert_eq!(count(&mut s, q), 100);
    assert_eq!(scanned_chunks(&mut s, q), 1);
    assert_eq!(scanned_chunks(&mut s, "SELECT count(*) FROM acc WHERE id >= 57344"), 1);
    assert_eq!(scanned_chunks(&mut s, "SELECT count(*) FROM acc WHERE id IN (5, 20000)"), 3);
    assert_eq!(scanned_chunks(&mut s, "SELECT count(*) FROM acc WHERE 8192 > id AND grp = 7"), 1);
    assert_eq!(count(&mut s, "SELECT count(*) FROM acc WHERE id = -1"), 0);
    // Filters without a usable range scan everything.
    assert_eq!(scanned_chunks(&mut s, "SELECT count(*) FROM acc WHERE id <> 5"), 8);
    assert_eq!(scanned_chunks(&mut s, "SELECT count(*) FROM acc WHERE id + 1 = 5"), 8);

    // Moving a row into the range widens its chunk's range: the query finds it.
    s.execute_blocking("UPDATE acc SET id = -150 WHERE id = 30000").unwrap();
    assert_eq!(count(&mut s, "SELECT count(*) FROM acc WHERE id BETWEEN -200 AND -100"), 1);
    assert_eq!(scanned_chunks(&mut s, "SELECT count(*) FROM acc WHERE id BETWEEN -200 AND -100"), 1);
    // While a snapshot shares the segment, and after: both see their own contents.
    let before = db.session().execute_blocking("SELECT count(*) FROM acc WHERE id BETWEEN 40000 AND 40010").unwrap();
    assert!(matches!(before[0].rows()[0][0], Value::Int64(11)));
    s.execute_blocking("UPDATE acc SET id = id + 1000000 WHERE id BETWEEN 40000 AND 40010").unwrap();
    assert_eq!(count(&mut s, "SELECT count(*) FROM acc WHERE id BETWEEN 40000 AND 40010"), 0);
    assert_eq!(count(&mut s, "SELECT count(*) FROM acc WHERE id > 1000000"), 11);
    assert_eq!(scanned_chunks(&mut s, "SELECT count(*) FROM acc WHERE id > 1000000"), 1);
}

/// A database with two analytical threads and a session whose queries all take the analytical
/// path.
fn analytical_session() -> (Database, freshet::Session) {
    let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
    let mut s = db.session();
    s.execute_blocking("SET freshet.short_path = off").unwrap();
    (db, s)
}

/// An analytical query without parameters is planned once; later runs put the snapshot of
/// their moment under the kept physical plan. Each run must see its own data: counts are not
/// constants of the first run's statistics, joins and top-k sorts start afresh, and a table
/// that has grown from one chunk to several (more than the first run's partitions) is read
/// whole.
#[test]
fn a_kept_physical_plan_reads_each_runs_snapshot() {
    let (_db, mut s) = analytical_session();
    s.execute_blocking("CREATE TABLE item (id INT PRIMARY KEY, grp INT NOT NULL, v BIGINT NOT NULL)").unwrap();
    s.execute_blocking("CREATE TABLE grp (id INT PRIMARY KEY, name TEXT NOT NULL)").unwrap();
    s.execute_blocking("INSERT INTO grp VALUES (0, 'even'), (1, 'odd')").unwrap();
    let queries = [
        "SELECT count(*), sum(v) FROM item",
        "SELECT g.name, count(*), sum(i.v) FROM item i JOIN grp g ON i.grp = g.id GROUP BY g.name ORDER BY g.name",
        "SELECT id FROM item ORDER BY v DESC, id LIMIT 2",
        "SELECT count(*) FROM item WHERE id >= 20000",
    ];
    let mut n: i64 = 0;
    for round in 0..4 {
        // 10, then about 8,000, 16,000 and 32,000 rows: one chunk, then several.
        let upto = if round == 0 { 10 } else { 8_000 << (round - 1) };
        s.execute_blocking(&format!("INSERT INTO item SELECT value, value % 2, value * 3 FROM generate_series({n}, {}) ", upto - 1)).unwrap();
        n = upto;
        let rows: Vec<Vec<Vec<Value>>> = queries.iter().map(|q| s.execute_blocking(q).unwrap()[0].rows()).collect();
        let sum = |keep: &dyn Fn(i64) -> bool| (0..n).filter(|&i| keep(i)).map(|i| i * 3).sum::<i64>();
        let count = |keep: &dyn Fn(i64) -> bool| (0..n).filter(|&i| keep(i)).count() as i64;
        assert_eq!(rows[0], vec![vec![Value::Int64(n), Value::Int64(sum(&|_| true))]], "round {round}");
        let even = vec![Value::Text("even".into()), Value::Int64(count(&|i| i % 2 == 0)), Value::Int64(sum(&|i| i % 2 == 0))];
        let odd = vec![Value::Text("odd".into()), Value::Int64(count(&|i| i % 2 == 1)), Value::Int64(sum(&|i| i % 2 == 1))];
        assert_eq!(rows[1], vec![even, odd], "round {round}");
        assert_eq!(rows[2], vec![vec![Value::Int32(n as i32 - 1)], vec![Value::Int32(n as i32 - 2)]], "round {round}");
        assert_eq!(rows[3], vec![vec![Value::Int64(count(&|i| i >= 20_000))]], "round {round}");
    }
}

/// The partitions of the one scan in `query`'s plan, as EXPLAIN ANALYZE reports them.
fn scan_partitions(s: &mut freshet::Session, query: &str) -> usize {
    let r = s.execute_blocking(&format!("EXPLAIN ANALYZE {query}")).unwrap();
    let rows = r[0].rows();
    let line = rows
        .iter()
        .filter_map(|row| match &row[0] {
            Value::Text(line) => line.split("partition_sizes=[").nth(1).map(str::to_string),
            _ => None,
        })
        .next()
        .unwrap_or_else(|| panic!("no scan in {rows:?}"));
    line.split(']').next().unwrap().split(',').count()
}

/// A kept plan whose table had one chunk when it was planned scans it in one partition; once
/// the table has grown past that, the query is planned again and its scan spreads over the
/// analytical threads.
#[test]
fn a_kept_plan_is_planned_again_when_its_table_outgrows_it() {
    let (_db, mut s) = analytical_session();
    s.execute_blocking("CREATE TABLE t (id INT PRIMARY KEY, v BIGINT NOT NULL)").unwrap();
    s.execute_blocking("INSERT INTO t SELECT value, value FROM generate_series(1, 100)").unwrap();
    let q = "SELECT sum(v) FROM t";
    assert_eq!(scan_partitions(&mut s, q), 1);
    assert_eq!(scan_partitions(&mut s, q), 1, "one chunk still");
    s.execute_blocking("INSERT INTO t SELECT value, value FROM generate_series(101, 40000)").unwrap();
    assert_eq!(scan_partitions(&mut s, q), 2);
    assert_eq!(s.execute_blocking(q).unwrap()[0].rows(), vec![vec![Value::Int64(40_000 * 40_001 / 2)]]);
}

/// Comparisons with constants and BETWEENs on integer and date columns are applied by the
/// scan itself, row by row (DataFusion's plan keeps no filter for them): every answer must
/// still leave out NULLs, deleted rows, and rows of chunks whose value range is only partly
/// inside the filter's, of every integer width. The expected answers are computed here from
/// the rows' formulas.
#[test]
fn scans_apply_comparisons_exactly_over_nulls_deletions_and_every_integer_width() {
    const N: i64 = 20_000; // three chunks
    let (_db, mut s) = analytical_session();
    s.execute_blocking("CREATE TABLE f (id INT PRIMARY KEY, a SMALLINT, b INT, c BIGINT, d DATE)").unwrap();
    s.execute_blocking(&format!(
        "INSERT INTO f SELECT value, CASE WHEN value % 11 = 0 THEN NULL ELSE value % 7 END, value, value * 1000, \
         DATE '2020-01-01' + (value % 400)::int FROM generate_series(0, {}) ORDER BY value",
        N - 1
    ))
    .unwrap();
    s.execute_blocking("DELETE FROM f WHERE id % 13 = 0").unwrap();
    // Day 60 after 2020-01-01 is 2020-03-01 (a leap year).
    let a = |id: i64| (id % 11 != 0).then_some(id % 7);
    type Pred = fn(i64, Option<i64>) -> bool;
    let cases: [(&str, Pred); 11] = [
        ("a = 3", |_, a| a == Some(3)),
        ("a < 2", |_, a| a.is_some_and(|a| a < 2)),
        ("5 <= a", |_, a| a.is_some_and(|a| a >= 5)),
        ("b BETWEEN 5000 AND 12000", |id, _| (5000..=12000).contains(&id)),
        ("c > 15000000", |id, _| id * 1000 > 15_000_000),
        ("d <= DATE '2020-03-01'", |id, _| id % 400 <= 60),
        ("b < 100000", |_, _| true),
        ("a = 3 AND b > 10000 AND d >= DATE '2020-02-01'", |id, a| a == Some(3) && id > 10_000 && id % 400 >= 31),
        ("b BETWEEN 10 AND 5", |_, _| false),
        ("a = 100000", |_, _| false),
        ("a IN (1, 4) AND b <= 9000", |id, a| matches!(a, Some(1 | 4)) && id <= 9000),
    ];
    for (filter, pred) in cases {
        let q = format!("SELECT count(*), sum(b) FROM f WHERE {filter}");
        let kept: Vec<i64> = (0..N).filter(|id| id % 13 != 0 && pred(*id, a(*id))).collect();
        let sum = if kept.is_empty() { Value::Null } else { Value::Int64(kept.iter().sum()) };
        assert_eq!(s.execute_blocking(&q).unwrap()[0].rows(), vec![vec![Value::Int64(kept.len() as i64), sum]], "{filter}");
    }
    let plan = s.execute_blocking("EXPLAIN ANALYZE SELECT count(*) FROM f WHERE a = 3 AND b > 10000").unwrap();
    let lines: Vec<String> = plan[0].rows().iter().map(|r| format!("{:?}", r[0])).collect();
    assert!(lines.iter().any(|l| l.contains("filter=[a = 3 AND b >= 10001]")), "{lines:#?}");
    assert!(!lines.iter().any(|l| l.contains("FilterExec")), "{lines:#?}");
    // The rows selected from the three chunks (over two partitions) come out as one batch
    // per partition, not one per chunk.
    let plan = s.execute_blocking("EXPLAIN ANALYZE SELECT count(*) FROM f WHERE a = 3").unwrap();
    let lines: Vec<String> = plan[0].rows().iter().map(|r| format!("{:?}", r[0])).collect();
    let scan = lines.iter().find(|l| l.contains("SnapshotScanExec")).expect("a scan");
    assert!(scan.contains("partition_sizes=[2, 1]") && scan.contains("output_batches=2"), "{scan}");
}

/// Rows selected from several chunks are gathered into shared batches: strings (inline and
/// out of line) and their NULLs come through intact, after deletions and an update that
/// moved a row's key to another value (the full chunks' value bitmaps see the new value).
#[test]
fn selected_rows_of_many_chunks_keep_their_strings_nulls_and_updates() {
    const N: i64 = 20_000; // three chunks
    let (_db, mut s) = analytical_session();
    s.execute_blocking("CREATE TABLE g (id INT PRIMARY KEY, k INT, t TEXT)").unwrap();
    s.execute_blocking(&format!(
        "INSERT INTO g SELECT value, value % 10, CASE WHEN value % 6 = 0 THEN NULL WHEN value % 2 = 0 THEN 'v' || value \
         ELSE 'a longer value, out of line: ' || value END FROM generate_series(0, {}) ORDER BY value",
        N - 1
    ))
    .unwrap();
    let query = "SELECT count(*), count(t), sum(length(t)), min(t), max(t) FROM g WHERE k = 3";
    // Warm the value bitmaps of the full chunks, then change what they describe.
    s.execute_blocking(query).unwrap();
    s.execute_blocking("DELETE FROM g WHERE id % 7 = 0").unwrap();
    s.execute_blocking("UPDATE g SET k = 3 WHERE id = 100").unwrap();
    let text = |id: i64| match id {
        _ if id % 6 == 0 => None,
        _ if id % 2 == 0 => Some(format!("v{id}")),
        _ => Some(format!("a longer value, out of line: {id}")),
    };
    let kept: Vec<i64> = (0..N).filter(|id| id % 7 != 0 && (id % 10 == 3 || *id == 100)).collect();
    let texts: Vec<String> = kept.iter().filter_map(|&id| text(id)).collect();
    let expected = vec![
        Value::Int64(kept.len() as i64),
        Value::Int64(texts.len() as i64),
        Value::Int64(texts.iter().map(|t| t.len() as i64).sum()),
        Value::Text(texts.iter().min().unwrap().clone()),
        Value::Text(texts.iter().max().unwrap().clone()),
    ];
    assert_eq!(s.execute_blocking(query).unwrap()[0].rows(), vec![expected]);
}
