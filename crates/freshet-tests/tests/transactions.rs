//! Concurrent transactions through the embedded API: money transfers with auditors.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use freshet::{Config, DataType, Database, Session, SqlState, Value};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

const ACCOUNTS: i32 = 40;
const START: i64 = 1_000;

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

fn sum(rows: &[Vec<Value>]) -> i64 {
    rows.iter().map(|r| r.last().and_then(Value::as_i64).unwrap_or(0)).sum()
}

/// One transfer in a SERIALIZABLE transaction; `Ok(false)` if it hit a serialization failure
/// or a deadlock (and was rolled back), which a client would retry.
fn transfer(s: &mut Session, from: i32, to: i32, amount: i64) -> Result<bool, freshet::Error> {
    let steps = [
        "BEGIN".to_string(),
        format!("UPDATE bank SET balance = balance - {amount} WHERE id = {from}"),
        format!("UPDATE bank SET balance = balance + {amount} WHERE id = {to}"),
        "COMMIT".to_string(),
    ];
    for sql in steps {
        match s.execute_blocking(&sql) {
            Ok(_) => {}
            Err(e) if matches!(e.state, SqlState::SerializationFailure | SqlState::DeadlockDetected) => {
                s.execute_blocking("ROLLBACK")?;
                return Ok(false);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Many sessions move money between accounts while auditors sum the balances, both with one
/// analytical query and with point reads of every account inside one transaction. No audit
/// may see a different total, the final total is unchanged, and most transfers commit.
/// Sessions that find the executor idle run their statements themselves (the default).
#[test]
fn transfers_keep_the_total_for_every_auditor() {
    transfers_with_auditors(1, "", true);
}

/// The same with every statement handed to the executor thread.
#[test]
fn transfers_keep_the_total_with_every_statement_on_the_executor_thread() {
    transfers_with_auditors(1, "", false);
}

/// The same over four partitions with the accounts spread by key: most transfers cross
/// partitions (quiesced commits), some stay in one; audits take quiesced snapshots.
#[test]
fn cross_partition_transfers_are_atomic_and_isolated() {
    transfers_with_auditors(4, "PARTITION BY HASH (id)", true);
}

fn transfers_with_auditors(partitions: usize, partitioning: &str, inline: bool) {
    let config = Config { olap_threads: 2, partitions, inline_statements: inline, inline_calls: inline, ..Config::default() };
    let db = Database::open(config).unwrap();
    let mut setup = db.session();
    setup.execute_blocking(&format!("CREATE TABLE bank (id INT PRIMARY KEY, balance BIGINT NOT NULL) {partitioning}")).unwrap();
    setup.execute_blocking(&format!("INSERT INTO bank SELECT value, {START} FROM generate_series(1, {ACCOUNTS})")).unwrap();
    let total = ACCOUNTS as i64 * START;
    let stop = Arc::new(AtomicBool::new(false));
    let (committed, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (db, stop, committed, failed) = (db.clone(), stop.clone(), committed.clone(), failed.clone());
            std::thread::spawn(move || {
                let mut s = db.session();
                let mut rng = StdRng::seed_from_u64(w);
                while !stop.load(Ordering::Relaxed) {
                    let from = rng.random_range(1..=ACCOUNTS);
                    let to = rng.random_range(1..=ACCOUNTS);
                    if from == to {
                        continue;
                    }
                    match transfer(&mut s, from, to, rng.random_range(1..50)).unwrap() {
                        true => committed.fetch_add(1, Ordering::Relaxed),
                        false => failed.fetch_add(1, Ordering::Relaxed),
                    };
                }
            })
        })
        .collect();
    let auditors: Vec<_> = (0..2)
        .map(|a| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut s = db.session();
                let point = block_on(s.prepare("SELECT id, balance FROM bank WHERE id = $1", &[Some(DataType::Int32)])).unwrap();
                let mut audits = 0;
                while !stop.load(Ordering::Relaxed) || audits < 5 {
                    if a == 0 {
                        let r = s.execute_blocking("SELECT sum(balance) FROM bank").unwrap();
                        assert_eq!(sum(&r[0].rows()), total, "an analytical audit saw a torn state");
                    } else {
                        s.execute_blocking("BEGIN ISOLATION LEVEL REPEATABLE READ").unwrap();
                        let mut seen = 0;
                        for id in 1..=ACCOUNTS {
                            let r = block_on(s.collect(&point, vec![Value::Int32(id)])).unwrap();
                            seen += sum(&r.rows());
                        }
                        s.execute_blocking("COMMIT").unwrap();
                        assert_eq!(seen, total, "a transaction's point reads saw a torn state");
                    }
                    audits += 1;
                }
                audits
            })
        })
        .collect();
    while committed.load(Ordering::Relaxed) < 1_500 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    for a in auditors {
        assert!(a.join().unwrap() >= 5);
    }
    let r = setup.execute_blocking("SELECT sum(balance), count(*) FROM bank").unwrap();
    assert_eq!(r[0].rows()[0], vec![Value::Int64(total), Value::Int64(ACCOUNTS as i64)]);
    let (ok, retried) = (committed.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    assert!(ok > retried, "most transfers commit: {ok} committed, {retried} serialization failures");
    // Versions are collected once nobody needs them.
    let (held, pending) = block_on(db.engine().version_counts()).unwrap();
    assert_eq!(pending, 0, "no committed versions wait for collection");
    assert!(held <= ACCOUNTS as usize, "only the rows' insert versions may remain, {held} held");
}

/// An open transaction's updates, then DROP INDEX and CREATE INDEX from another session (which
/// renumber the table's indexes), then ROLLBACK: the rows are back, and every index finds them
/// by their restored keys and not by the rolled-back ones. The rollback used to remove entries
/// by the index positions its updates recorded, which then named other indexes: it removed
/// `b = 200`'s entry from the index on b (the row could no longer be found by it), or failed
/// on a position past the end (the executor job panicked and the rollback was lost).
#[test]
fn rollback_after_indexes_changed_restores_rows_and_index_entries() {
    let db = Database::open(Config::default()).unwrap();
    let mut s = db.session();
    let mut ddl = db.session();
    for sql in [
        "CREATE TABLE di (id INT PRIMARY KEY, a INT, b INT)",
        "CREATE INDEX di_a ON di (a)",
        "CREATE INDEX di_b ON di (b)",
        "INSERT INTO di VALUES (1, 10, 100), (2, 20, 200), (3, 30, 300)",
        "UPDATE di SET b = 150 WHERE id = 1",
        "BEGIN",
        "UPDATE di SET b = 101 WHERE id = 1",
        "UPDATE di SET a = 21 WHERE id = 2",
        "UPDATE di SET b = 150 WHERE id = 3",
    ] {
        s.execute_blocking(sql).unwrap();
    }
    ddl.execute_blocking("DROP INDEX di_a").unwrap();
    ddl.execute_blocking("CREATE INDEX di_ab ON di (a, b)").unwrap();
    s.execute_blocking("UPDATE di SET b = 100 WHERE id = 1").unwrap();
    s.execute_blocking("ROLLBACK").unwrap();
    let ints = |rows: Vec<Vec<Value>>| -> Vec<Vec<i64>> { rows.iter().map(|r| r.iter().map(|v| v.as_i64().unwrap()).collect()).collect() };
    let mut query = |sql: &str| ints(s.execute_blocking(sql).unwrap().remove(0).rows());
    assert_eq!(query("SELECT id, a, b FROM di ORDER BY id"), vec![vec![1, 10, 150], vec![2, 20, 200], vec![3, 30, 300]]);
    for (filter, want) in [
        ("b = 150", vec![1]),
        ("b = 100", vec![]),
        ("b = 101", vec![]),
        ("b = 200", vec![2]),
        ("b = 300", vec![3]),
        ("a = 20 AND b = 200", vec![2]),
        ("a = 21", vec![]),
        ("a = 10 AND b = 150", vec![1]),
        ("a = 30 AND b = 300", vec![3]),
    ] {
        let got: Vec<i64> = query(&format!("SELECT id FROM di WHERE {filter} ORDER BY id")).into_iter().map(|r| r[0]).collect();
        assert_eq!(got, want, "WHERE {filter}");
    }
}

/// DROP COLUMN and ALTER COLUMN … TYPE from another session while a transaction that updated
/// those columns and others is open: the rollback restores the remaining columns (its
/// before-images were renumbered and converted), the rebuilt index finds the restored values,
/// and statements prepared before the change are planned again.
#[test]
fn rollback_after_columns_were_dropped_and_retyped_restores_the_other_columns() {
    let db = Database::open(Config::default()).unwrap();
    let mut s = db.session();
    let mut ddl = db.session();
    for sql in [
        "CREATE TABLE dt (id INT PRIMARY KEY, a INT, b TEXT, c INT)",
        "CREATE INDEX dt_c ON dt (c)",
        "INSERT INTO dt VALUES (1, 10, 'one', 100), (2, 20, 'two', 200)",
    ] {
        s.execute_blocking(sql).unwrap();
    }
    let point = block_on(s.prepare("SELECT id, a FROM dt WHERE c = $1", &[Some(DataType::Int64)])).unwrap();
    let star = block_on(s.prepare("SELECT * FROM dt WHERE id = $1", &[Some(DataType::Int32)])).unwrap();
    for sql in ["BEGIN", "UPDATE dt SET b = 'changed', c = 101 WHERE id = 1", "UPDATE dt SET a = 21, b = 'too' WHERE id = 2"] {
        s.execute_blocking(sql).unwrap();
    }
    ddl.execute_blocking("ALTER TABLE dt DROP COLUMN b").unwrap();
    // And the indexed column becomes a bigint: the before-images and the index follow.
    ddl.execute_blocking("ALTER TABLE dt ALTER COLUMN c TYPE BIGINT").unwrap();
    s.execute_blocking("UPDATE dt SET c = 201 WHERE id = 2").unwrap();
    s.execute_blocking("ROLLBACK").unwrap();
    let ints = |rows: Vec<Vec<Value>>| -> Vec<Vec<i64>> { rows.iter().map(|r| r.iter().map(|v| v.as_i64().unwrap()).collect()).collect() };
    assert_eq!(ints(s.execute_blocking("SELECT * FROM dt ORDER BY id").unwrap().remove(0).rows()), vec![vec![1, 10, 100], vec![2, 20, 200]]);
    assert_eq!(ints(s.execute_blocking("SELECT id FROM dt WHERE c = 100").unwrap().remove(0).rows()), vec![vec![1]]);
    assert!(s.execute_blocking("SELECT id FROM dt WHERE c IN (101, 201)").unwrap().remove(0).rows().is_empty());
    // Planned again: `c` is the third column now, not the fourth, and a bigint.
    let r = block_on(s.collect(&point, vec![Value::Int64(200)])).unwrap();
    assert_eq!(ints(r.rows()), vec![vec![2, 20]]);
    // Its result columns changed: refused, as PostgreSQL refuses it.
    let e = block_on(s.collect(&star, vec![Value::Int32(2)])).unwrap_err();
    assert_eq!((e.state, e.message.as_str()), (SqlState::FeatureNotSupported, "cached plan must not change result type"));
}

// ---------------------------------------------------------------------------------------------
// LISTEN / NOTIFY

#[test]
fn notifications_arrive_when_the_sender_commits() {
    let db = freshet::Database::open(freshet::Config { olap_threads: 1, ..freshet::Config::default() }).unwrap();
    let (mut listener, mut sender) = (db.session(), db.session());
    listener.execute_blocking("LISTEN jobs").unwrap();
    sender.execute_blocking("LISTEN jobs").unwrap();
    let payloads = |s: &freshet::Session| s.notifications().into_iter().map(|n| (n.channel, n.payload)).collect::<Vec<_>>();
    let pair = |c: &str, p: &str| (c.to_string(), p.to_string());
    sender.execute_blocking("BEGIN").unwrap();
    sender.execute_blocking("NOTIFY jobs, 'a'").unwrap();
    sender.execute_blocking("SELECT pg_notify('jobs', 'b'), pg_notify('jobs', 'a')").unwrap();
    assert!(payloads(&listener).is_empty(), "nothing before the commit");
    sender.execute_blocking("COMMIT").unwrap();
    assert_eq!(payloads(&listener), vec![pair("jobs", "a"), pair("jobs", "b")], "in order, each once");
    let sender_id = sender.id();
    let own = sender.notifications();
    assert_eq!(own.len(), 2, "the sender listens too");
    assert!(own.iter().all(|n| n.process_id == sender_id));
    // A rollback, or a failed block's COMMIT, sends nothing; a statement outside a block sends
    // when it succeeds.
    sender.execute_blocking("BEGIN").unwrap();
    sender.execute_blocking("NOTIFY jobs, 'rolled back'").unwrap();
    sender.execute_blocking("ROLLBACK").unwrap();
    sender.execute_blocking("BEGIN").unwrap();
    sender.execute_blocking("NOTIFY jobs, 'failed'").unwrap();
    assert!(sender.execute_blocking("SELECT 1/0").is_err());
    sender.execute_blocking("COMMIT").unwrap();
    sender.execute_blocking("NOTIFY JOBS").unwrap();
    assert_eq!(payloads(&listener), vec![pair("jobs", "")]);
    listener.execute_blocking("UNLISTEN *").unwrap();
    sender.execute_blocking("NOTIFY jobs, 'unheard'").unwrap();
    assert!(payloads(&listener).is_empty());
    let err = sender.execute_blocking("SELECT pg_notify('', 'x')").unwrap_err();
    assert_eq!(err.message, "channel name cannot be empty");
}

#[test]
fn listen_takes_effect_at_commit_and_rollback_to_drops_later_notifications() {
    let db = freshet::Database::open(freshet::Config { olap_threads: 1, ..freshet::Config::default() }).unwrap();
    let (mut listener, mut sender) = (db.session(), db.session());
    let payloads = |s: &freshet::Session| s.notifications().into_iter().map(|n| n.payload).collect::<Vec<_>>();
    listener.execute_blocking("BEGIN").unwrap();
    listener.execute_blocking("LISTEN jobs").unwrap();
    sender.execute_blocking("NOTIFY jobs, 'before the commit'").unwrap();
    listener.execute_blocking("ROLLBACK").unwrap();
    sender.execute_blocking("NOTIFY jobs, 'after the rollback'").unwrap();
    assert!(payloads(&listener).is_empty(), "a LISTEN takes effect at commit, and a rolled-back one never");
    listener.execute_blocking("LISTEN jobs").unwrap();
    listener.execute_blocking("BEGIN").unwrap();
    listener.execute_blocking("UNLISTEN *").unwrap();
    listener.execute_blocking("ROLLBACK").unwrap();
    sender.execute_blocking("BEGIN").unwrap();
    sender.execute_blocking("NOTIFY jobs, 'one'").unwrap();
    sender.execute_blocking("SAVEPOINT s").unwrap();
    sender.execute_blocking("NOTIFY jobs, 'two'").unwrap();
    sender.execute_blocking("ROLLBACK TO SAVEPOINT s").unwrap();
    sender.execute_blocking("NOTIFY jobs, 'three'").unwrap();
    sender.execute_blocking("COMMIT").unwrap();
    assert_eq!(payloads(&listener), vec!["one", "three"], "the UNLISTEN rolled back; 'two' went with its savepoint");
    listener.execute_blocking("DISCARD ALL").unwrap();
    sender.execute_blocking("NOTIFY jobs, 'unheard'").unwrap();
    assert!(payloads(&listener).is_empty(), "DISCARD ALL stops listening");
}
