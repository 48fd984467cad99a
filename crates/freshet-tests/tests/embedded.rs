//! The embedded API end to end: DDL, DML, both query paths, errors.

use freshet::{Config, Database, SqlState, Value};

fn db() -> Database {
    Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap()
}

#[test]
fn create_insert_select_both_paths() {
    let db = db();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE t (id INT PRIMARY KEY, name TEXT, v BIGINT)").unwrap();
    let r = s.execute_blocking("INSERT INTO t VALUES (1, 'one', 10), (2, 'two', 20), (3, 'three with a long name', 30)").unwrap();
    assert_eq!(r[0].tag, "INSERT 0 3");
    let point = s.execute_blocking("SELECT name, v FROM t WHERE id = 3").unwrap();
    assert_eq!(point[0].rows(), vec![vec![Value::Text("three with a long name".into()), Value::Int64(30)]]);
    let agg = s.execute_blocking("SELECT count(*), sum(v) FROM t WHERE v > 15").unwrap();
    assert_eq!(agg[0].rows(), vec![vec![Value::Int64(2), Value::Int64(50)]]);
    assert_eq!(agg[0].columns[0].name, "count");
    s.execute_blocking("SET freshet.short_path = off").unwrap();
    let olap = s.execute_blocking("SELECT name, v FROM t WHERE id = 3").unwrap();
    assert_eq!(olap[0].rows(), point[0].rows());
    let u = s.execute_blocking("UPDATE t SET v = v + 1 WHERE id IN (SELECT id FROM t WHERE v >= 20)").unwrap();
    assert_eq!(u[0].tag, "UPDATE 2");
    let d = s.execute_blocking("DELETE FROM t WHERE name LIKE 't%'").unwrap();
    assert_eq!(d[0].tag, "DELETE 2");
    let rest = s.execute_blocking("SELECT id, v FROM t").unwrap();
    assert_eq!(rest[0].rows(), vec![vec![Value::Int32(1), Value::Int64(10)]]);
}

/// Rows of a RETURNING clause come with the statement's own command tag, as in PostgreSQL
/// (psql prints "UPDATE 2" after them).
#[test]
fn returning_rows_carry_the_dml_tag() {
    let db = db();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE t (id INT PRIMARY KEY, v INT)").unwrap();
    let i = s.execute_blocking("INSERT INTO t VALUES (1, 1), (2, 2) RETURNING id").unwrap();
    assert_eq!((i[0].tag.as_str(), i[0].rows().len()), ("INSERT 0 2", 2));
    let u = s.execute_blocking("UPDATE t SET v = v + 1 RETURNING v").unwrap();
    assert_eq!((u[0].tag.as_str(), u[0].rows().len()), ("UPDATE 2", 2));
    let d = s.execute_blocking("DELETE FROM t WHERE id = 1 RETURNING *").unwrap();
    assert_eq!((d[0].tag.as_str(), d[0].rows()), ("DELETE 1", vec![vec![Value::Int32(1), Value::Int32(2)]]));
    let q = s.execute_blocking("SELECT id FROM t").unwrap();
    assert_eq!(q[0].tag, "SELECT 1");
}

#[test]
fn errors_carry_sqlstate() {
    let db = db();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE t (id INT PRIMARY KEY, n INT NOT NULL)").unwrap();
    let cases = [
        ("SELEC 1", SqlState::SyntaxError),
        ("SELECT * FROM nope", SqlState::UndefinedTable),
        ("SELECT nope FROM t", SqlState::UndefinedColumn),
        ("INSERT INTO t VALUES (1, NULL)", SqlState::NotNullViolation),
        ("INSERT INTO t VALUES ('x', 1)", SqlState::InvalidTextRepresentation),
        ("SELECT 1 / 0", SqlState::DivisionByZero),
        ("INSERT INTO t VALUES (1, 1), (1, 2)", SqlState::UniqueViolation),
        ("SELECT sum(CAST(n AS TEXT)) FROM t", SqlState::UndefinedFunction),
    ];
    for (sql, state) in cases {
        let err = s.execute_blocking(sql).unwrap_err();
        assert_eq!(err.state, state, "{sql}: {err}");
    }
    // The failed multi-row insert left nothing behind.
    let n = s.execute_blocking("SELECT count(*) FROM t").unwrap();
    assert_eq!(n[0].rows(), vec![vec![Value::Int64(0)]]);
}

/// Analytical plans are kept by statement text and catalog version: the same text after DDL
/// plans again against the new definitions.
#[test]
fn the_same_query_text_follows_ddl() {
    let db = db();
    let mut s = db.session();
    let query = "SELECT sum(b), count(*) FROM t";
    s.execute_blocking("CREATE TABLE t (a INT PRIMARY KEY, b INT)").unwrap();
    s.execute_blocking("INSERT INTO t VALUES (1, 10), (2, 20)").unwrap();
    for _ in 0..2 {
        assert_eq!(s.execute_blocking(query).unwrap()[0].rows(), vec![vec![Value::Int64(30), Value::Int64(2)]]);
    }
    s.execute_blocking("DROP TABLE t").unwrap();
    s.execute_blocking("CREATE TABLE t (a INT PRIMARY KEY, b BIGINT)").unwrap();
    s.execute_blocking("INSERT INTO t VALUES (1, 5)").unwrap();
    assert_eq!(s.execute_blocking(query).unwrap()[0].rows(), vec![vec![Value::Int64(5), Value::Int64(1)]]);
    s.execute_blocking("DROP TABLE t").unwrap();
    s.execute_blocking("CREATE TABLE t (a INT PRIMARY KEY, b TEXT)").unwrap();
    let err = s.execute_blocking(query).unwrap_err();
    assert_eq!(err.state, SqlState::UndefinedFunction, "{err}");
    assert_eq!(err.message, "function sum(text) does not exist");
}

/// A prepared statement that names a view is planned again when the view is replaced, and
/// when its transaction block creates or forgets views.
#[test]
fn prepared_statements_follow_view_changes() {
    let db = db();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE items (id INT PRIMARY KEY, price INT)").unwrap();
    s.execute_blocking("INSERT INTO items VALUES (1, 10), (2, 20), (3, 30)").unwrap();
    s.execute_blocking("CREATE VIEW pricey AS SELECT id, price FROM items WHERE price > 15").unwrap();
    let count = |s: &mut freshet::Session, p: &std::sync::Arc<freshet::Prepared>| {
        let r = futures::executor::block_on(s.collect(p, vec![])).unwrap();
        r.rows()[0][0].clone()
    };
    let p = futures::executor::block_on(s.prepare("SELECT count(*) FROM pricey", &[])).unwrap();
    assert_eq!(count(&mut s, &p), Value::Int64(2));
    s.execute_blocking("CREATE OR REPLACE VIEW pricey AS SELECT id, price FROM items WHERE price > 25").unwrap();
    assert_eq!(count(&mut s, &p), Value::Int64(1));
    // Inside a block, the block's own replacement counts; after ROLLBACK, the database's.
    s.execute_blocking("BEGIN").unwrap();
    s.execute_blocking("DROP VIEW pricey").unwrap();
    s.execute_blocking("CREATE VIEW pricey AS SELECT id, price FROM items").unwrap();
    assert_eq!(count(&mut s, &p), Value::Int64(3));
    s.execute_blocking("ROLLBACK").unwrap();
    assert_eq!(count(&mut s, &p), Value::Int64(1));
}

/// A block's views are invisible to other sessions until it commits; a COMMIT whose view
/// can no longer be created rolls the whole block back.
#[test]
fn a_blocks_views_are_its_own_until_commit() {
    let db = db();
    let mut s = db.session();
    let mut other = db.session();
    s.execute_blocking("CREATE TABLE items (id INT PRIMARY KEY, price INT)").unwrap();
    s.execute_blocking("INSERT INTO items VALUES (1, 10), (2, 20), (3, 30)").unwrap();
    s.execute_blocking("BEGIN").unwrap();
    s.execute_blocking("CREATE VIEW mine AS SELECT id FROM items").unwrap();
    assert_eq!(s.execute_blocking("SELECT count(*) FROM mine").unwrap()[0].rows(), vec![vec![Value::Int64(3)]]);
    assert_eq!(other.execute_blocking("SELECT * FROM mine").unwrap_err().state, SqlState::UndefinedTable);
    other.execute_blocking("CREATE VIEW mine AS SELECT 1 AS one").unwrap();
    s.execute_blocking("INSERT INTO items VALUES (4, 40)").unwrap();
    let err = s.execute_blocking("COMMIT").unwrap_err();
    assert_eq!(err.state, SqlState::DuplicateTable, "{err}");
    assert_eq!(s.execute_blocking("SELECT count(*) FROM items").unwrap()[0].rows(), vec![vec![Value::Int64(3)]]);
    // `1` is an integer, as in PostgreSQL.
    assert_eq!(s.execute_blocking("SELECT * FROM mine").unwrap()[0].rows(), vec![vec![Value::Int32(1)]]);
    // A block that commits publishes its view to everyone.
    s.execute_blocking("BEGIN").unwrap();
    s.execute_blocking("CREATE VIEW cheap AS SELECT id FROM items WHERE price < 25").unwrap();
    s.execute_blocking("COMMIT").unwrap();
    assert_eq!(other.execute_blocking("SELECT count(*) FROM cheap").unwrap()[0].rows(), vec![vec![Value::Int64(2)]]);
}

/// `pg_stat_user_tables` and `pg_stat_database` count rows, scans, sessions and transactions
/// since the database opened.
#[test]
fn statistics_count_rows_scans_sessions_and_transactions() {
    let db = db();
    let mut s = db.session();
    let int = |s: &mut freshet::Session, sql: &str| -> Vec<i64> {
        s.execute_blocking(sql).unwrap()[0].rows()[0].iter().map(|v| v.as_i64().unwrap()).collect()
    };
    let xacts = "SELECT xact_commit, xact_rollback, numbackends, tup_inserted FROM pg_stat_database";
    let before = int(&mut s, xacts);
    s.execute_blocking("CREATE TABLE t (id INT PRIMARY KEY, v INT)").unwrap();
    s.execute_blocking("INSERT INTO t VALUES (1, NULL), (2, NULL), (3, 3)").unwrap();
    s.execute_blocking("UPDATE t SET v = 1 WHERE id = 1").unwrap();
    s.execute_blocking("DELETE FROM t WHERE v IS NULL").unwrap();
    s.execute_blocking("BEGIN").unwrap();
    s.execute_blocking("INSERT INTO t VALUES (4, 4)").unwrap();
    s.execute_blocking("ROLLBACK").unwrap();
    assert!(s.execute_blocking("SELECT 1 / 0").is_err());
    assert!(s.execute_blocking("SELEC 1").is_err());
    s.execute_blocking("SET freshet.short_path = off").unwrap();
    s.execute_blocking("SELECT count(*) FROM t").unwrap();
    let _other = db.session();
    let after = int(&mut s, xacts);
    // Committed: the stats query itself, CREATE, INSERT, UPDATE, DELETE, SET, SELECT count;
    // rolled back: the block, the division by zero, the syntax error.
    assert_eq!(after[0] - before[0], 7, "{before:?} {after:?}");
    assert_eq!(after[1] - before[1], 3, "{before:?} {after:?}");
    assert_eq!(after[2], 2);
    // The rolled-back insert counts, as in PostgreSQL.
    assert_eq!(after[3] - before[3], 4);
    let table = int(&mut s, "SELECT seq_scan, idx_scan, n_tup_ins, n_tup_upd, n_tup_del, n_live_tup FROM pg_stat_user_tables WHERE relname = 't'");
    // Scans: the DELETE's on the executor, the count on the analytical side; the UPDATE's index lookup.
    assert_eq!(table, vec![2, 1, 4, 1, 1, 2]);
}

/// `pg_stat_user_indexes` counts the scans through each index (kept across CREATE INDEX of
/// another); the relations of what an in-memory database does not do (block I/O, archiving,
/// standbys) list their rows with nothing done, and `pg_stat_bgwriter` no checkpoints.
#[test]
fn statistics_count_index_scans_and_report_nothing_for_what_is_not_done() {
    let db = db();
    let mut s = db.session();
    let rows = |s: &mut freshet::Session, sql: &str| s.execute_blocking(sql).unwrap()[0].rows();
    s.execute_blocking("CREATE TABLE si (id INT PRIMARY KEY, k INT, v INT)").unwrap();
    s.execute_blocking("CREATE INDEX si_k ON si (k)").unwrap();
    s.execute_blocking("INSERT INTO si VALUES (1, 10, 0), (2, 20, 0), (3, 30, 0)").unwrap();
    for id in 1..=3 {
        s.execute_blocking(&format!("SELECT v FROM si WHERE id = {id}")).unwrap();
    }
    s.execute_blocking("UPDATE si SET v = 1 WHERE k = 20").unwrap();
    s.execute_blocking("CREATE INDEX si_v ON si (v)").unwrap();
    s.execute_blocking("SELECT id FROM si WHERE k = 30").unwrap();
    let scans = "SELECT indexrelname, idx_scan FROM pg_stat_user_indexes WHERE relname = 'si' ORDER BY indexrelname";
    let text = |v: &str| Value::Text(v.into());
    assert_eq!(
        rows(&mut s, scans),
        vec![vec![text("si_k"), Value::Int64(2)], vec![text("si_pkey"), Value::Int64(3)], vec![text("si_v"), Value::Int64(0)]]
    );
    let io = rows(&mut s, "SELECT heap_blks_read, heap_blks_hit, idx_blks_read, toast_blks_read FROM pg_statio_user_tables WHERE relname = 'si'");
    assert_eq!(io, vec![vec![Value::Int64(0), Value::Int64(0), Value::Int64(0), Value::Null]]);
    assert_eq!(rows(&mut s, "SELECT count(*) FROM pg_statio_user_indexes WHERE relname = 'si' AND idx_blks_read = 0")[0][0], Value::Int64(3));
    assert_eq!(rows(&mut s, "SELECT archived_count, failed_count FROM pg_stat_archiver"), vec![vec![Value::Int64(0), Value::Int64(0)]]);
    assert_eq!(rows(&mut s, "SELECT confl_lock + confl_snapshot FROM pg_stat_database_conflicts WHERE datname = 'freshet'"), vec![vec![Value::Int64(0)]]);
    assert_eq!(rows(&mut s, "SELECT checkpoints_timed + checkpoints_req, stats_reset FROM pg_stat_bgwriter"), vec![vec![Value::Int64(0), Value::Null]]);
}

/// `now()` in an analytical query is the time of the statement, as on the short path, even
/// when the statement's plan is reused.
#[test]
fn now_on_the_analytical_path_is_the_statements_time() {
    let db = db();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE t (a INT PRIMARY KEY)").unwrap();
    s.execute_blocking("INSERT INTO t VALUES (1)").unwrap();
    let query = "SELECT count(*), now(), CAST(now() AS DATE) = current_date FROM t";
    let time = |s: &mut freshet::Session| {
        let rows = s.execute_blocking(query).unwrap()[0].rows();
        assert_eq!(rows[0][2], Value::Bool(true));
        match rows[0][1] {
            Value::TimestampTz(t) => t,
            ref other => panic!("now() gave {other:?}"),
        }
    };
    let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64;
    let first = time(&mut s);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let second = time(&mut s);
    let after = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64;
    assert!(before <= first && first + 20_000 <= second && second <= after, "{before} {first} {second} {after}");
}

/// In a transaction block every statement's `now()` is the block's start, on both paths and
/// in CURRENT_TIMESTAMP defaults, as in PostgreSQL.
#[test]
fn now_in_a_block_is_the_blocks_start() {
    let db = db();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE t (a INT PRIMARY KEY, at TIMESTAMPTZ DEFAULT CURRENT_TIMESTAMP)").unwrap();
    s.execute_blocking("BEGIN").unwrap();
    s.execute_blocking("INSERT INTO t (a) VALUES (1)").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    s.execute_blocking("INSERT INTO t (a) VALUES (2)").unwrap();
    let short = s.execute_blocking("SELECT now() FROM t WHERE a = 1").unwrap()[0].rows();
    let analytical = s.execute_blocking("SELECT max(at), min(at), now() FROM t").unwrap()[0].rows();
    s.execute_blocking("COMMIT").unwrap();
    let began = &short[0][0];
    let Value::TimestampTz(began_at) = *began else { panic!("now() gave {began:?}") };
    assert_eq!(analytical[0], vec![began.clone(), began.clone(), began.clone()]);
    let after = s.execute_blocking("SELECT now() FROM t WHERE a = 1").unwrap()[0].rows();
    assert!(matches!(after[0][0], Value::TimestampTz(t) if t >= began_at + 20_000), "outside the block, now() is the statement's time again");
}

/// The future of `Session::execute` is built for every statement a client sends; rare, large
/// steps (analytical planning, DDL, COPY, re-planning) are boxed so that it stays small.
#[test]
fn the_statement_future_stays_small() {
    let db = db();
    let mut s = db.session();
    let prepared = futures::executor::block_on(s.prepare("SELECT 1", &[])).unwrap();
    let future = s.execute(&prepared, vec![]);
    let size = std::mem::size_of_val(&future);
    assert!(size <= 2048, "Session::execute's future is {size} bytes");
}

/// A thread of this process as /proc shows it.
struct ProcThread {
    name: String,
    nice: Option<i32>,
    /// The CPUs it may run on (`Cpus_allowed_list`).
    cpus: Vec<usize>,
}

fn process_threads() -> Vec<ProcThread> {
    let mut threads = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let read = |f: &str| std::fs::read_to_string(task.path().join(f)).unwrap_or_default();
        let stat = read("stat");
        // Fields after the parenthesised name: state is field 3, nice is field 19.
        let nice = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(16)).and_then(|n| n.parse::<i32>().ok());
        let status = read("status");
        let list = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap_or("").trim().to_string();
        let cpus = list
            .split(',')
            .filter(|r| !r.is_empty())
            .flat_map(|r| match r.split_once('-') {
                Some((a, b)) => (a.parse::<usize>().unwrap()..=b.parse::<usize>().unwrap()).collect::<Vec<_>>(),
                None => vec![r.parse::<usize>().unwrap()],
            })
            .collect();
        threads.push(ProcThread { name: read("comm").trim().to_string(), nice, cpus });
    }
    threads
}

/// The analytical workers run at the configured niceness, so that transactions win the CPU
/// when both sides want it. (Other tests' databases run workers at the default, 0.)
#[test]
fn analytical_workers_run_at_the_configured_niceness() {
    let db = Database::open(Config { olap_threads: 3, olap_nice: 7, ..Config::default() }).unwrap();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE n (id INT PRIMARY KEY)").unwrap();
    s.execute_blocking("SELECT count(*) FROM n").unwrap();
    let at_seven = process_threads().iter().filter(|t| t.name == "freshet-olap" && t.nice == Some(7)).count();
    assert!(at_seven >= 3, "{at_seven} analytical workers at niceness 7, expected 3");
}

/// Executors run at the configured (negative) niceness where the process may lower it
/// (CAP_SYS_NICE); elsewhere they keep the process's own. (Other tests' databases run them at 0.)
#[test]
fn executors_run_at_the_configured_niceness() {
    let db = Database::open(Config { executor_nice: -4, ..Config::default() }).unwrap();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE en (id INT PRIMARY KEY)").unwrap();
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    const CAP_SYS_NICE: u32 = 23;
    let effective = status.lines().find_map(|l| l.strip_prefix("CapEff:")).and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok());
    let may_lower = effective.is_some_and(|caps| caps >> CAP_SYS_NICE & 1 == 1);
    let at_minus_four = process_threads().iter().filter(|t| t.name == "freshet-exec-0" && t.nice == Some(-4)).count();
    if may_lower {
        assert_eq!(at_minus_four, 1, "one executor at niceness -4 expected");
    } else {
        assert_eq!(at_minus_four, 0, "niceness lowered without the privilege");
    }
}

/// With `pin_cpus`, the executor runs on the last CPU alone, the analytical workers and an
/// application thread that asks keep off it; without, nothing is restricted. (Other tests'
/// databases are not pinned.)
#[test]
fn pinned_executors_have_their_cpus_to_themselves() {
    let allowed = freshet_core::executor::cpus::allowed_cpus().unwrap();
    let db = Database::open(Config { olap_threads: 2, olap_nice: 3, pin_cpus: true, ..Config::default() }).unwrap();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE p (id INT PRIMARY KEY)").unwrap();
    s.execute_blocking("SELECT count(*) FROM p").unwrap();
    let last = *allowed.last().unwrap();
    let threads = process_threads();
    let executors_alone = threads.iter().filter(|t| t.name == "freshet-exec-0" && t.cpus == vec![last]).count();
    // This database's workers are the ones at niceness 3.
    let workers_off =
        threads.iter().filter(|t| t.name == "freshet-olap" && t.nice == Some(3) && !t.cpus.is_empty() && !t.cpus.contains(&last)).count();
    let me = std::thread::spawn(move || {
        db.keep_off_executors();
        freshet_core::executor::cpus::allowed_cpus().unwrap()
    })
    .join()
    .unwrap();
    if allowed.len() >= 2 {
        assert!(executors_alone >= 1, "no executor pinned to CPU {last} alone");
        assert!(workers_off >= 2, "{workers_off} analytical workers off the executor's CPU, expected 2");
        assert_eq!(me, allowed[..allowed.len() - 1].to_vec());
    } else {
        // One CPU: nothing to divide, nothing pinned.
        assert_eq!(me, allowed);
    }
}

#[test]
fn an_analytical_query_past_the_memory_limit_fails_alone() {
    // A hash join whose build side (100,000 rows) needs more than the 2 MiB allowed: the query
    // fails with 53200 and the database goes on serving, where it would otherwise grow the
    // process without bound.
    let db = Database::open(Config { olap_threads: 2, olap_memory_limit: 2 << 20, ..Config::default() }).unwrap();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE t (id BIGINT PRIMARY KEY, k BIGINT, v BIGINT)").unwrap();
    s.execute_blocking("INSERT INTO t SELECT value, value % 1000, value * 7 FROM generate_series(1, 100000)").unwrap();
    let join = "SELECT count(*), sum(a.v + b.v) FROM t a JOIN t b ON a.k = b.k";
    let e = s.execute_blocking(join).unwrap_err();
    assert_eq!(e.state, SqlState::OutOfMemory, "{e:?}");
    let count = s.execute_blocking("SELECT count(*) FROM t").unwrap();
    assert_eq!(count[0].rows(), vec![vec![Value::Int64(100_000)]]);
    let roomy = db_with_default_limit();
    let mut s = roomy.session();
    s.execute_blocking("CREATE TABLE t (id BIGINT PRIMARY KEY, k BIGINT, v BIGINT)").unwrap();
    s.execute_blocking("INSERT INTO t SELECT value, value % 1000, value * 7 FROM generate_series(1, 100000)").unwrap();
    let r = s.execute_blocking(join).unwrap();
    assert_eq!(r[0].rows()[0][0], Value::Int64(10_000_000));
}

fn db_with_default_limit() -> Database {
    let db = db();
    assert!(db.config().resolved_olap_memory_limit() >= 64 << 20);
    db
}

/// SHOW names its column as PostgreSQL does: the parameter's own name, whatever words named it.
#[test]
fn show_names_its_column_after_the_parameter() {
    let db = db();
    let mut s = db.session();
    for (sql, column) in [
        ("SHOW transaction isolation level", "transaction_isolation"),
        ("SHOW transaction_isolation", "transaction_isolation"),
        ("SHOW time zone", "TimeZone"),
        ("SHOW TimeZone", "TimeZone"),
        ("SHOW DateStyle", "DateStyle"),
        ("SHOW statement_timeout", "statement_timeout"),
    ] {
        let r = s.execute_blocking(sql).unwrap();
        assert_eq!(r[0].columns[0].name, column, "{sql}");
        assert_eq!(r[0].rows().len(), 1, "{sql}");
    }
}

/// EXPLAIN of a prepared DML statement with parameters (as a driver sends it in a Parse
/// message): the parameters take the types their places give them, and the plan is the one
/// the statement gets with them; nothing runs.
#[test]
fn explain_of_prepared_dml_types_its_parameters() {
    let db = db();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE t (a INT, b INT, v TEXT, PRIMARY KEY (a, b))").unwrap();
    s.execute_blocking("INSERT INTO t VALUES (1, 1, 'x')").unwrap();
    let p = futures::executor::block_on(s.prepare("EXPLAIN UPDATE t SET v = $1 WHERE a = $2 AND b = $3", &[])).unwrap();
    assert_eq!(p.param_types, vec![freshet::DataType::Text, freshet::DataType::Int32, freshet::DataType::Int32]);
    let r = futures::executor::block_on(s.collect(&p, vec![Value::Text("y".into()), Value::Int32(1), Value::Int32(1)])).unwrap();
    let lines: Vec<Value> = r.rows().into_iter().map(|mut row| row.remove(0)).collect();
    assert_eq!(lines, vec![Value::Text("Update on t (partition executor)".into()), Value::Text("  ->  Hash Lookup on t using t_pkey".into())]);
    let after = s.execute_blocking("SELECT v FROM t").unwrap();
    assert_eq!(after[0].rows(), vec![vec![Value::Text("x".into())]]);
}
