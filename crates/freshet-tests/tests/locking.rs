//! Waiting for a row another transaction changed (freshet.lock_wait on, the default).

use std::sync::mpsc;
use std::time::Duration;

use freshet::{Config, Database, Session, SqlState, Value};

fn db() -> Database {
    let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE t (id INT PRIMARY KEY, v INT)").unwrap();
    s.execute_blocking("INSERT INTO t VALUES (1, 10), (2, 20)").unwrap();
    db
}

fn value(s: &mut Session, id: i32) -> Value {
    s.execute_blocking(&format!("SELECT v FROM t WHERE id = {id}")).unwrap()[0].rows()[0][0].clone()
}

/// Runs `sql` statements in a new session on another thread; the result of the last one
/// arrives on the channel.
fn spawn(db: &Database, sql: &'static [&'static str]) -> mpsc::Receiver<Result<String, freshet::Error>> {
    let (tx, rx) = mpsc::channel();
    let mut s = db.session();
    std::thread::spawn(move || {
        let mut last = Ok(String::new());
        for q in sql {
            last = s.execute_blocking(q).map(|r| r[0].tag.clone());
            if last.is_err() {
                break;
            }
        }
        let _ = tx.send(last);
        drop(s);
    });
    rx
}

fn blocked<T>(rx: &mpsc::Receiver<T>) -> bool {
    matches!(rx.recv_timeout(Duration::from_millis(200)), Err(mpsc::RecvTimeoutError::Timeout))
}

#[test]
fn read_committed_writer_waits_then_applies_its_change_on_the_new_value() {
    let db = db();
    let mut t1 = db.session();
    t1.execute_blocking("BEGIN").unwrap();
    t1.execute_blocking("UPDATE t SET v = v + 1 WHERE id = 1").unwrap();
    let t2 = spawn(&db, &["BEGIN ISOLATION LEVEL READ COMMITTED", "UPDATE t SET v = v + 1 WHERE id = 1", "COMMIT"]);
    assert!(blocked(&t2), "the second writer waits");
    t1.execute_blocking("COMMIT").unwrap();
    assert_eq!(t2.recv().unwrap().unwrap(), "COMMIT");
    assert_eq!(value(&mut t1, 1), Value::Int32(12), "no update is lost");
}

#[test]
fn snapshot_writer_waits_then_fails_if_the_other_committed() {
    let db = db();
    let mut t1 = db.session();
    t1.execute_blocking("BEGIN").unwrap();
    t1.execute_blocking("UPDATE t SET v = 11 WHERE id = 1").unwrap();
    let t2 = spawn(&db, &["BEGIN ISOLATION LEVEL REPEATABLE READ", "UPDATE t SET v = 12 WHERE id = 1"]);
    assert!(blocked(&t2));
    t1.execute_blocking("COMMIT").unwrap();
    assert_eq!(t2.recv().unwrap().unwrap_err().state, SqlState::SerializationFailure);
    assert_eq!(value(&mut t1, 1), Value::Int32(11));
}

#[test]
fn snapshot_writer_proceeds_if_the_other_rolled_back() {
    let db = db();
    let mut t1 = db.session();
    t1.execute_blocking("BEGIN").unwrap();
    t1.execute_blocking("UPDATE t SET v = 11 WHERE id = 1").unwrap();
    let t2 = spawn(&db, &["BEGIN", "UPDATE t SET v = 12 WHERE id = 1", "COMMIT"]);
    assert!(blocked(&t2));
    t1.execute_blocking("ROLLBACK").unwrap();
    assert_eq!(t2.recv().unwrap().unwrap(), "COMMIT");
    assert_eq!(value(&mut t1, 1), Value::Int32(12));
}

#[test]
fn a_wait_that_closes_a_cycle_is_a_deadlock() {
    let db = db();
    let mut t1 = db.session();
    t1.execute_blocking("BEGIN").unwrap();
    t1.execute_blocking("UPDATE t SET v = 11 WHERE id = 1").unwrap();
    let mut t2 = db.session();
    t2.execute_blocking("BEGIN").unwrap();
    t2.execute_blocking("UPDATE t SET v = 22 WHERE id = 2").unwrap();
    // t1 waits for t2 (in another thread)…
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let r = t1.execute_blocking("UPDATE t SET v = 12 WHERE id = 2").map(|_| ());
        let _ = tx.send(r);
        t1
    });
    assert!(blocked(&rx));
    // …so t2 waiting for t1 would never end.
    let e = t2.execute_blocking("UPDATE t SET v = 21 WHERE id = 1").unwrap_err();
    assert_eq!(e.state, SqlState::DeadlockDetected);
    t2.execute_blocking("ROLLBACK").unwrap();
    assert!(rx.recv().unwrap().is_ok(), "t1 goes on once t2 is gone");
    let mut t1 = waiter.join().unwrap();
    t1.execute_blocking("COMMIT").unwrap();
    assert_eq!(value(&mut t1, 1), Value::Int32(11));
    assert_eq!(value(&mut t1, 2), Value::Int32(12));
}

#[test]
fn an_abandoned_session_releases_its_rows() {
    let db = db();
    let mut t1 = db.session();
    t1.execute_blocking("BEGIN").unwrap();
    t1.execute_blocking("UPDATE t SET v = 11 WHERE id = 1").unwrap();
    let t2 = spawn(&db, &["UPDATE t SET v = 13 WHERE id = 1"]);
    assert!(blocked(&t2));
    drop(t1);
    assert_eq!(t2.recv().unwrap().unwrap(), "UPDATE 1");
    assert_eq!(value(&mut db.session(), 1), Value::Int32(13));
}

#[test]
fn an_upsert_waits_for_an_uncommitted_key_then_updates_or_inserts() {
    let db = db();
    // The other transaction commits its row: the upsert, having waited, updates it.
    let mut t1 = db.session();
    t1.execute_blocking("BEGIN").unwrap();
    t1.execute_blocking("INSERT INTO t VALUES (3, 30)").unwrap();
    let t2 = spawn(&db, &["INSERT INTO t VALUES (3, 5) ON CONFLICT (id) DO UPDATE SET v = t.v + excluded.v"]);
    assert!(blocked(&t2), "the upsert waits for the uncommitted key");
    t1.execute_blocking("COMMIT").unwrap();
    assert_eq!(t2.recv().unwrap().unwrap(), "INSERT 0 1");
    assert_eq!(value(&mut t1, 3), Value::Int32(35));
    // The other transaction rolls back: the upsert inserts its own row.
    t1.execute_blocking("BEGIN").unwrap();
    t1.execute_blocking("INSERT INTO t VALUES (4, 40)").unwrap();
    let t2 = spawn(&db, &["INSERT INTO t VALUES (4, 5) ON CONFLICT (id) DO NOTHING"]);
    assert!(blocked(&t2), "DO NOTHING waits too: the key may yet be free");
    t1.execute_blocking("ROLLBACK").unwrap();
    assert_eq!(t2.recv().unwrap().unwrap(), "INSERT 0 1");
    assert_eq!(value(&mut t1, 4), Value::Int32(5));
}

/// UPDATE … FROM waits for a target row another transaction holds, then applies its change to
/// the row's newest value (the target's columns are read under the lock; only the source
/// values come from the statement's snapshot), as a READ COMMITTED UPDATE … FROM does in
/// PostgreSQL.
#[test]
fn an_update_from_waits_for_a_locked_row_then_changes_its_newest_value() {
    let db = db();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE deltas (id INT, d INT)").unwrap();
    s.execute_blocking("INSERT INTO deltas VALUES (1, 5), (2, 7)").unwrap();
    let mut t1 = db.session();
    t1.execute_blocking("BEGIN").unwrap();
    t1.execute_blocking("UPDATE t SET v = 100 WHERE id = 1").unwrap();
    let t2 = spawn(
        &db,
        &["SET default_transaction_isolation = 'read committed'", "UPDATE t SET v = v + deltas.d FROM deltas WHERE t.id = deltas.id"],
    );
    assert!(blocked(&t2), "the UPDATE … FROM waits for the row t1 holds");
    t1.execute_blocking("COMMIT").unwrap();
    assert_eq!(t2.recv().unwrap().unwrap(), "UPDATE 2");
    assert_eq!(value(&mut s, 1), Value::Int32(105), "applied to the committed 100, not the 10 it saw first");
    assert_eq!(value(&mut s, 2), Value::Int32(27));
}

/// A job queue's consumers: SELECT … FOR UPDATE SKIP LOCKED leaves out the rows another open
/// transaction claimed or changed (before LIMIT counts them), and NOWAIT fails with 55P03 on
/// such a row instead of waiting. Each answer is the one PostgreSQL 15 gives.
#[test]
fn skip_locked_leaves_out_claimed_rows_and_nowait_fails_at_once() {
    let db = db();
    let mut setup = db.session();
    setup.execute_blocking("CREATE TABLE jobs (id INT PRIMARY KEY, state TEXT NOT NULL)").unwrap();
    setup.execute_blocking("INSERT INTO jobs SELECT g, 'new' FROM generate_series(1, 6) g").unwrap();
    let ids = |s: &mut Session, sql: &str| -> Vec<i64> { s.execute_blocking(sql).unwrap()[0].rows().iter().map(|r| r[0].as_i64().unwrap()).collect() };
    let take = "SELECT id FROM jobs WHERE state = 'new' ORDER BY id LIMIT 2 FOR UPDATE SKIP LOCKED";
    let mut first = db.session();
    first.execute_blocking("BEGIN").unwrap();
    assert_eq!(ids(&mut first, take), [1, 2]);
    let mut second = db.session();
    second.execute_blocking("BEGIN").unwrap();
    // Changed, not only claimed, by the first: also held.
    first.execute_blocking("UPDATE jobs SET state = 'running' WHERE id = 5").unwrap();
    assert_eq!(ids(&mut second, take), [3, 4]);
    let mut third = db.session();
    assert_eq!(ids(&mut third, "SELECT id FROM jobs WHERE state = 'new' ORDER BY id FOR UPDATE SKIP LOCKED"), [6]);
    let e = third.execute_blocking("SELECT id FROM jobs WHERE id = 1 FOR UPDATE NOWAIT").unwrap_err();
    assert_eq!((e.state, e.message.as_str()), (SqlState::LockNotAvailable, "could not obtain lock on row in relation \"jobs\""));
    assert_eq!(ids(&mut third, "SELECT id FROM jobs WHERE id = 6 FOR UPDATE NOWAIT"), [6]);
    first.execute_blocking("COMMIT").unwrap();
    second.execute_blocking("ROLLBACK").unwrap();
    // The first's claims ended with it; the second's rows are free again.
    assert_eq!(ids(&mut third, "SELECT id FROM jobs WHERE state = 'new' ORDER BY id LIMIT 3 FOR UPDATE SKIP LOCKED"), [1, 2, 3]);
}

/// SELECT … WHERE key IN (subquery) FOR UPDATE claims the rows the subquery's values find and
/// no others (nor the subquery's own rows), as PostgreSQL's does.
#[test]
fn for_update_over_an_in_subquery_claims_the_rows_it_finds() {
    let db = db();
    let mut setup = db.session();
    setup.execute_blocking("CREATE TABLE picks (k INT PRIMARY KEY, target INT)").unwrap();
    setup.execute_blocking("INSERT INTO picks VALUES (1, 2), (2, 9), (3, 1)").unwrap();
    let mut first = db.session();
    first.execute_blocking("BEGIN").unwrap();
    let rows = first.execute_blocking("SELECT id, v FROM t WHERE id IN (SELECT target FROM picks WHERE k IN (1, 2)) FOR UPDATE").unwrap();
    assert_eq!(rows[0].rows(), [vec![Value::Int32(2), Value::Int32(20)]]);
    let mut second = db.session();
    let e = second.execute_blocking("SELECT id FROM t WHERE id = 2 FOR UPDATE NOWAIT").unwrap_err();
    assert_eq!(e.state, SqlState::LockNotAvailable);
    assert_eq!(second.execute_blocking("SELECT id FROM t WHERE id = 1 FOR UPDATE NOWAIT").unwrap()[0].rows().len(), 1, "row 1 was not claimed");
    assert_eq!(second.execute_blocking("SELECT k FROM picks WHERE k = 1 FOR UPDATE NOWAIT").unwrap()[0].rows().len(), 1, "the subquery's rows are not claimed");
    // A writer of the claimed row waits for the claim to end.
    let writer = spawn(&db, &["UPDATE t SET v = v + 1 WHERE id = 2"]);
    assert!(blocked(&writer), "the writer waits for the claim");
    first.execute_blocking("COMMIT").unwrap();
    assert_eq!(writer.recv().unwrap().unwrap(), "UPDATE 1");
    assert_eq!(value(&mut second, 2), Value::Int32(21));
}

/// A locking SELECT whose IN subquery finds more rows than the short path's budget fails
/// (0A000) and claims nothing: the analytical side, where the same query without FOR UPDATE
/// goes, cannot lock.
#[test]
fn for_update_over_an_in_subquery_beyond_the_budget_is_refused() {
    let db = Database::open(Config { olap_threads: 2, short_select_budget: 2, ..Config::default() }).unwrap();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE t (id INT PRIMARY KEY, v INT)").unwrap();
    s.execute_blocking("CREATE TABLE picks (k INT PRIMARY KEY, target INT)").unwrap();
    s.execute_blocking("INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)").unwrap();
    s.execute_blocking("INSERT INTO picks VALUES (1, 1), (2, 2), (3, 3)").unwrap();
    let query = "SELECT id FROM t WHERE id IN (SELECT target FROM picks WHERE k IN (1, 2, 3)) ORDER BY id";
    s.execute_blocking("BEGIN").unwrap();
    let e = s.execute_blocking(&format!("{query} FOR UPDATE")).unwrap_err();
    assert_eq!((e.state, e.message.as_str()), (SqlState::FeatureNotSupported, "FOR UPDATE over an IN subquery of more than 2 rows is not supported"));
    let mut other = db.session();
    assert_eq!(other.execute_blocking("SELECT id FROM t WHERE id = 1 FOR UPDATE NOWAIT").unwrap()[0].rows().len(), 1, "nothing was claimed");
    s.execute_blocking("ROLLBACK").unwrap();
    let rows = s.execute_blocking(query).unwrap();
    assert_eq!(rows[0].rows(), [[Value::Int32(1)], [Value::Int32(2)], [Value::Int32(3)]]);
}

// ---------------------------------------------------------------------------------------------
// Advisory locks (their try variants and scopes: slt/advisory.slt)

#[test]
fn an_advisory_lock_waits_for_its_holder_and_the_session_end_releases_it() {
    let db = db();
    let mut a = db.session();
    a.execute_blocking("SELECT pg_advisory_lock(1)").unwrap();
    let b = spawn(&db, &["SELECT pg_advisory_lock(1)", "SELECT pg_advisory_unlock(1)"]);
    assert!(blocked(&b), "the second session waits for the lock");
    // pg_locks shows the hold and the wait.
    let locks = a.execute_blocking("SELECT pid, objid, objsubid, mode, granted FROM pg_locks WHERE locktype = 'advisory' ORDER BY granted DESC").unwrap();
    let a_id = a.id() as i32;
    let rows = locks[0].rows();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0], vec![Value::Int32(a_id), Value::Int64(1), Value::Int16(1), Value::Text("ExclusiveLock".into()), Value::Bool(true)]);
    assert_eq!((&rows[1][1], &rows[1][4]), (&Value::Int64(1), &Value::Bool(false)));
    assert_ne!(rows[1][0], Value::Int32(a_id));
    let rows = a.execute_blocking("SELECT pg_advisory_unlock(1)").unwrap();
    assert_eq!(rows[0].rows(), vec![vec![Value::Bool(true)]]);
    assert_eq!(b.recv().unwrap().unwrap(), "SELECT 1");
    // A transaction-level lock is held until COMMIT; a session that ends releases all it holds.
    a.execute_blocking("BEGIN").unwrap();
    a.execute_blocking("SELECT pg_advisory_xact_lock(2)").unwrap();
    let b = spawn(&db, &["SELECT pg_advisory_lock_shared(2)"]);
    assert!(blocked(&b));
    a.execute_blocking("COMMIT").unwrap();
    assert_eq!(b.recv().unwrap().unwrap(), "SELECT 1");
    a.execute_blocking("SELECT pg_advisory_lock(3)").unwrap();
    let b = spawn(&db, &["SELECT pg_advisory_lock(3)"]);
    assert!(blocked(&b));
    drop(a);
    assert_eq!(b.recv().unwrap().unwrap(), "SELECT 1");
}

#[test]
fn advisory_lock_waits_end_in_a_deadlock_or_at_a_timeout() {
    let db = db();
    let mut a = db.session();
    a.execute_blocking("SELECT pg_advisory_lock(1)").unwrap();
    let b = spawn(&db, &["SELECT pg_advisory_lock(2)", "SELECT pg_advisory_lock(1)"]);
    assert!(blocked(&b), "b holds 2 and waits for 1");
    let err = a.execute_blocking("SELECT pg_advisory_lock(2)").unwrap_err();
    assert_eq!(err.state, SqlState::DeadlockDetected, "{err:?}");
    a.execute_blocking("SELECT pg_advisory_unlock(1)").unwrap();
    assert_eq!(b.recv().unwrap().unwrap(), "SELECT 1");

    let mut c = db.session();
    c.execute_blocking("SELECT pg_advisory_lock(5)").unwrap();
    a.execute_blocking("SET lock_timeout = '100ms'").unwrap();
    let err = a.execute_blocking("SELECT pg_advisory_lock(5)").unwrap_err();
    assert_eq!((err.state, err.message.as_str()), (SqlState::LockNotAvailable, "canceling statement due to lock timeout"));
    a.execute_blocking("SET lock_timeout = 0").unwrap();
    a.execute_blocking("SET statement_timeout = '100ms'").unwrap();
    let err = a.execute_blocking("SELECT pg_advisory_lock_shared(5)").unwrap_err();
    assert_eq!((err.state, err.message.as_str()), (SqlState::QueryCanceled, "canceling statement due to statement timeout"));
    let err = a.execute_blocking("SELECT pg_sleep(5)").unwrap_err();
    assert_eq!(err.state, SqlState::QueryCanceled);
    a.execute_blocking("SET statement_timeout = 0").unwrap();
    let started = std::time::Instant::now();
    a.execute_blocking("SELECT pg_sleep(0.2)").unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200));
    // The waits that ended left nothing behind: the lock is free once its holder lets it go.
    c.execute_blocking("SELECT pg_advisory_unlock(5)").unwrap();
    let rows = a.execute_blocking("SELECT pg_try_advisory_lock(5)").unwrap();
    assert_eq!(rows[0].rows(), vec![vec![Value::Bool(true)]]);
}
