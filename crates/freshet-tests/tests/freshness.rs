//! Snapshots of analytical queries: freshness bounds, query sessions (one snapshot for a
//! READ ONLY block), `freshet_snapshots`, memory released with the last reader, and fork
//! mode's child processes ending with their query (timeout, cancel, client disconnect).

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use freshet::{Config, Database, Session, Value};

fn open() -> Database {
    Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap()
}

fn int(s: &mut Session, sql: &str) -> i64 {
    let r = s.execute_blocking(sql).unwrap();
    match r.last().unwrap().rows()[0][0] {
        Value::Int64(v) => v,
        Value::Int32(v) => v as i64,
        ref other => panic!("{sql}: unexpected {other:?}"),
    }
}

/// The snapshot id and age (ms) EXPLAIN ANALYZE reports.
fn explained_snapshot(s: &mut Session, query: &str) -> (u64, f64) {
    let r = s.execute_blocking(&format!("EXPLAIN ANALYZE {query}")).unwrap();
    let rows = r[0].rows();
    let Value::Text(line) = &rows[0][0] else { panic!("no plan text") };
    // "Snapshot 12 (cow, shared): taken at …, age 0.123 ms when the query started, 1 table(s)"
    let id = line.strip_prefix("Snapshot ").and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok());
    let age = line.split("age ").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok());
    match (id, age) {
        (Some(id), Some(age)) => (id, age),
        _ => panic!("EXPLAIN ANALYZE does not name its snapshot: {line}"),
    }
}

/// Inserts one row per commit in a thread until stopped, recording after each commit how many
/// rows are acknowledged and when.
struct Writer {
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicI64>,
    history: Arc<Mutex<Vec<(Instant, i64)>>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    fn start(db: &Database) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(AtomicI64::new(0));
        let history = Arc::new(Mutex::new(vec![(Instant::now(), 0)]));
        let (db, s2, a2, h2) = (db.clone(), stop.clone(), acked.clone(), history.clone());
        let handle = std::thread::spawn(move || {
            let mut s = db.session();
            let mut n = 0;
            while !s2.load(Ordering::Relaxed) {
                n += 1;
                s.execute_blocking(&format!("INSERT INTO ev VALUES ({n})")).unwrap();
                a2.store(n, Ordering::SeqCst);
                h2.lock().unwrap().push((Instant::now(), n));
                std::thread::sleep(Duration::from_micros(200));
            }
        });
        Writer { stop, acked, history, handle: Some(handle) }
    }

    /// Rows acknowledged at or before `t`.
    fn acked_at(&self, t: Instant) -> i64 {
        self.history.lock().unwrap().iter().take_while(|(at, _)| *at <= t).last().map_or(0, |(_, n)| *n)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            h.join().unwrap();
        }
    }
}

#[test]
fn max_staleness_zero_sees_every_commit_acknowledged_before_the_query() {
    let db = open();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE ev (id BIGINT PRIMARY KEY)").unwrap();
    assert_eq!(s.execute_blocking("SHOW freshet.max_staleness").unwrap()[0].rows()[0][0], Value::Text("0".into()));
    let writer = Writer::start(&db);
    let deadline = Instant::now() + Duration::from_millis(1500);
    let mut checks = 0;
    while Instant::now() < deadline {
        let before = writer.acked.load(Ordering::SeqCst);
        let seen = int(&mut s, "SELECT count(*) FROM ev");
        assert!(seen >= before, "a commit acknowledged before the query is missing: saw {seen}, {before} acknowledged");
        checks += 1;
    }
    drop(writer);
    assert!(checks > 10, "too few queries ran ({checks})");
    // While a query holds its snapshot and nothing commits, another query shares it.
    let mut holder = db.session();
    let prepared = futures::executor::block_on(holder.prepare("SELECT id FROM ev ORDER BY id", &[])).unwrap();
    let held = futures::executor::block_on(holder.execute(&prepared, vec![])).unwrap();
    let a = db.snapshots().into_iter().find(|i| i.scope == "shared").expect("the held snapshot is not listed").id;
    let (b, _) = explained_snapshot(&mut s, "SELECT count(*) FROM ev");
    assert_eq!(a, b, "no commit in between, yet a new snapshot was taken");
    s.execute_blocking("INSERT INTO ev VALUES (-1)").unwrap();
    let (c, _) = explained_snapshot(&mut s, "SELECT count(*) FROM ev");
    assert_ne!(b, c, "a commit happened, yet the old snapshot was reused with max_staleness = 0");
    drop(held);
}

#[test]
fn a_staleness_bound_shares_snapshots_and_is_never_exceeded() {
    let db = open();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE ev (id BIGINT PRIMARY KEY)").unwrap();
    s.execute_blocking("SET freshet.max_staleness = '300ms'").unwrap();
    let shown = s.execute_blocking("SHOW freshet.max_staleness").unwrap()[0].rows();
    assert_eq!(shown[0][0], Value::Text("300ms".into()));
    let mut other = db.session();
    other.execute_blocking("SET freshet.max_staleness = '300ms'").unwrap();
    let writer = Writer::start(&db);
    let deadline = Instant::now() + Duration::from_millis(1500);
    let (mut queries, mut ids) = (0, std::collections::BTreeSet::new());
    while Instant::now() < deadline {
        let started = Instant::now();
        let seen = int(&mut s, "SELECT count(*) FROM ev");
        let floor = writer.acked_at(started - Duration::from_millis(300));
        assert!(seen >= floor, "snapshot older than the bound: saw {seen} rows, {floor} were acknowledged 300 ms before the query");
        let (id, age) = explained_snapshot(&mut s, "SELECT count(*) FROM ev");
        assert!(age <= 300.0 + 1.0, "snapshot age {age} ms exceeds the bound");
        // Another session with the same bound shares the snapshot.
        let (id2, _) = explained_snapshot(&mut other, "SELECT max(id) FROM ev");
        if id2 == id {
            ids.insert(id);
        }
        queries += 1;
    }
    drop(writer);
    assert!(queries > 5);
    assert!(!ids.is_empty(), "two sessions with the same bound never shared a snapshot");
    // Once the bound has passed, the registry lets the snapshot go.
    std::thread::sleep(Duration::from_millis(700));
    let live: Vec<_> = db.snapshots().into_iter().filter(|i| i.scope == "shared").collect();
    assert!(live.is_empty(), "shared snapshots outlived their bound: {live:?}");
}

#[test]
fn a_read_only_block_reads_one_snapshot_while_writes_continue() {
    let db = open();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE acc (id INT PRIMARY KEY, v BIGINT NOT NULL)").unwrap();
    s.execute_blocking("INSERT INTO acc SELECT value, 10 FROM generate_series(1, 20000)").unwrap();
    let mut w = db.session();
    s.execute_blocking("BEGIN READ ONLY").unwrap();
    let q = "SELECT count(*) * 1000000 + sum(v) FROM acc";
    let first = int(&mut s, q);
    let (id1, _) = explained_snapshot(&mut s, q);
    for round in 0..3 {
        w.execute_blocking(&format!("UPDATE acc SET v = v + {round} + 1")).unwrap();
        w.execute_blocking(&format!("INSERT INTO acc VALUES ({}, 1)", 100_000 + round)).unwrap();
        assert_eq!(int(&mut s, q), first, "the block's view changed after round {round}");
        let (id, _) = explained_snapshot(&mut s, q);
        assert_eq!(id, id1, "the block took a second snapshot");
    }
    // The pinned snapshot is listed, and the updates copied its segments.
    let list = db.snapshots();
    let pinned = list.iter().find(|i| i.id == id1).expect("the block's snapshot is not listed");
    assert_eq!(pinned.scope, "transaction");
    assert!(pinned.copied_bytes >= 20_000 * 8, "updates copied only {} bytes", pinned.copied_bytes);
    let r = s.execute_blocking(&format!("SELECT mode, scope, tables, copied_bytes > 0 FROM freshet_snapshots WHERE id = {id1}")).unwrap();
    assert_eq!(
        r[0].rows(),
        vec![vec![Value::Text("cow".into()), Value::Text("transaction".into()), Value::Int32(1), Value::Bool(true)]]
    );
    s.execute_blocking("COMMIT").unwrap();
    assert!(!db.snapshots().iter().any(|i| i.id == id1), "the block's snapshot outlived the block");
    assert_ne!(int(&mut s, q), first);
}

#[test]
fn snapshots_from_different_moments_live_at_once() {
    let db = open();
    let mut w = db.session();
    w.execute_blocking("CREATE TABLE ev (id BIGINT PRIMARY KEY)").unwrap();
    let mut sessions = Vec::new();
    for i in 1..=3 {
        w.execute_blocking(&format!("INSERT INTO ev VALUES ({i})")).unwrap();
        let mut s = db.session();
        s.execute_blocking("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").unwrap();
        assert_eq!(int(&mut s, "SELECT count(*) FROM ev"), i);
        sessions.push(s);
    }
    w.execute_blocking("INSERT INTO ev VALUES (4)").unwrap();
    let pinned: Vec<_> = db.snapshots().into_iter().filter(|i| i.scope == "transaction").collect();
    assert_eq!(pinned.len(), 3, "{pinned:?}");
    assert!(pinned.windows(2).all(|p| p[0].created_at <= p[1].created_at));
    // Each block still reads its own moment.
    for (i, s) in sessions.iter_mut().enumerate() {
        assert_eq!(int(s, "SELECT count(*) FROM ev"), i as i64 + 1);
    }
    // Releasing one leaves the others.
    sessions[1].execute_blocking("COMMIT").unwrap();
    let left: Vec<u64> = db.snapshots().into_iter().filter(|i| i.scope == "transaction").map(|i| i.id).collect();
    assert_eq!(left, vec![pinned[0].id, pinned[2].id]);
}

/// Resident memory of this process, in bytes.
fn resident() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// Runs `name` (an ignored test of this module) alone in a child test process, so that its
/// memory measurements are not disturbed by tests running in parallel.
fn run_alone(name: &str) {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe).args([name, "--exact", "--ignored", "--nocapture", "--test-threads=1"]).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("1 passed"), "{name} failed alone:\n{text}");
}

#[test]
fn a_released_snapshot_frees_its_copied_segments() {
    run_alone("freshness::released_snapshot_memory");
}

#[test]
#[ignore = "run by a_released_snapshot_frees_its_copied_segments in a process of its own"]
fn released_snapshot_memory() {
    const ROWS: i64 = 1_500_000;
    let db = open();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE big (id BIGINT PRIMARY KEY, a BIGINT NOT NULL, b BIGINT NOT NULL)").unwrap();
    s.execute_blocking(&format!("INSERT INTO big SELECT value, value + 0, value + 1 FROM generate_series(1, {ROWS})")).unwrap();
    // A query that holds its snapshot: its result is not read yet.
    let prepared = futures::executor::block_on(s.prepare("SELECT a FROM big ORDER BY a", &[])).unwrap();
    let held = futures::executor::block_on(s.execute(&prepared, vec![])).unwrap();
    let mut w = db.session();
    w.execute_blocking("UPDATE big SET a = a + 1, b = b + 1").unwrap();
    let info = db.snapshots().into_iter().find(|i| i.scope == "shared").expect("the held snapshot is not listed");
    let copied = info.copied_bytes;
    assert!(copied >= (ROWS * 16) as u64, "two columns updated, yet only {copied} bytes copied");
    let trim = || unsafe { libc_malloc_trim() };
    trim();
    let before = resident();
    drop(held);
    // The query's task ends on the analytical runtime; give it a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    while db.snapshots().iter().any(|i| i.id == info.id) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!db.snapshots().iter().any(|i| i.id == info.id), "the snapshot outlived its query");
    trim();
    let after = resident();
    let freed = before.saturating_sub(after);
    println!("copied {copied} bytes; resident before {before}, after {after}: {freed} freed");
    assert!(freed >= copied / 2, "releasing the snapshot freed {freed} bytes of resident memory; it held {copied} copied bytes");
}

unsafe extern "C" {
    fn malloc_trim(pad: usize) -> i32;
}

/// Returns free heap memory to the system (glibc), so that resident memory shows frees.
unsafe fn libc_malloc_trim() {
    unsafe {
        malloc_trim(0);
    }
}

fn fork_pid(db: &Database) -> Option<i32> {
    db.snapshots().into_iter().find_map(|i| i.pid)
}

fn wait_for_pid(db: &Database) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(pid) = fork_pid(db) {
            return pid;
        }
        assert!(Instant::now() < deadline, "no fork-mode child appeared");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether `pid` is gone: exited and reaped (a zombie still has its /proc entry).
fn gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

fn fork_db() -> Database {
    let db = open();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE big (id BIGINT PRIMARY KEY, v BIGINT NOT NULL)").unwrap();
    s.execute_blocking("INSERT INTO big SELECT value, value + 0 FROM generate_series(1, 300000)").unwrap();
    db
}

/// A query that runs for a long time (a join of 300,000 rows with 300,000 on 10 keys).
const SLOW: &str = "SELECT count(*) FROM big x JOIN big y ON x.v % 10 = y.v % 10";

#[test]
fn fork_mode_answers_match_and_children_are_reaped() {
    let db = fork_db();
    let mut s = db.session();
    let cow = s.execute_blocking("SELECT count(*), sum(v), min(v), max(v) FROM big WHERE v % 7 = 3").unwrap()[0].rows();
    s.execute_blocking("SET freshet.snapshot_mode = 'fork'").unwrap();
    for _ in 0..3 {
        let forked = s.execute_blocking("SELECT count(*), sum(v), min(v), max(v) FROM big WHERE v % 7 = 3").unwrap()[0].rows();
        assert_eq!(forked, cow);
    }
    // An error in the child reaches the client as a SQL error.
    let e = s.execute_blocking("SELECT 1 / (v - v) FROM big").unwrap_err();
    assert_eq!(e.state, freshet::SqlState::DivisionByZero, "{e:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while fork_pid(&db).is_some() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(fork_pid(&db).is_none(), "a finished query's child is still listed");
}

#[test]
fn fork_mode_statement_timeout_ends_the_child() {
    let db = fork_db();
    let mut s = db.session();
    s.execute_blocking("SET freshet.snapshot_mode = 'fork'").unwrap();
    s.execute_blocking("SET statement_timeout = '300ms'").unwrap();
    let watcher = {
        let db = db.clone();
        std::thread::spawn(move || wait_for_pid(&db))
    };
    let e = s.execute_blocking(SLOW).unwrap_err();
    assert_eq!(e.state, freshet::SqlState::QueryCanceled, "{e:?}");
    let pid = watcher.join().unwrap();
    assert!(gone(pid), "the child {pid} of a timed-out query is still there");
}

#[test]
fn fork_mode_cancelled_query_ends_the_child() {
    let db = fork_db();
    let mut s = db.session();
    s.execute_blocking("SET freshet.snapshot_mode = 'fork'").unwrap();
    let prepared = futures::executor::block_on(s.prepare(SLOW, &[])).unwrap();
    let running = futures::executor::block_on(s.execute(&prepared, vec![])).unwrap();
    let pid = wait_for_pid(&db);
    // Dropping the result is what cancelling does (CancelRequest drops the running read).
    drop(running);
    assert!(gone(pid), "the child {pid} of a cancelled query is still there");
}

#[test]
fn fork_mode_client_disconnect_ends_the_child() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let db = fork_db();
        let config = freshet_server::ServerConfig { host: "127.0.0.1".into(), port: 0, unix_socket_dir: None };
        let server = freshet_server::Server::bind(db.clone(), &config).await.unwrap();
        let port = server.local_addr().port();
        tokio::spawn(server.run(std::future::pending::<()>()));
        let (client, connection) =
            tokio_postgres::connect(&format!("host=127.0.0.1 port={port} user=t"), tokio_postgres::NoTls).await.unwrap();
        let conn = tokio::spawn(connection);
        client.batch_execute("SET freshet.snapshot_mode = 'fork'").await.unwrap();
        let query = tokio::spawn(async move {
            let _ = client.simple_query(SLOW).await;
        });
        let pid = {
            let db = db.clone();
            tokio::task::spawn_blocking(move || wait_for_pid(&db)).await.unwrap()
        };
        // The client goes away: its connection closes.
        query.abort();
        conn.abort();
        let _ = query.await;
        let _ = conn.await;
        assert!(tokio::task::spawn_blocking(move || gone(pid)).await.unwrap(), "the child {pid} outlived its client");
    });
}
