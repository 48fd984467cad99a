//! No input makes Freshet panic: random statements built from SQL fragments (most of them
//! wrong) must each end in a result or an error, and the session keeps working.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

use freshet::{Config, Database};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Counts every panic raised in Freshet's own code, including those the executors and the
/// analytical pool catch and turn into errors: none may happen at all. (A panic inside a
/// dependency, e.g. a debug-build overflow check in DataFusion's optimizer, is caught at the
/// same boundaries and reaches the client as an error; the tests check that the session goes
/// on working.)
fn count_panics() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.location().is_some_and(|l| l.file().contains("crates/freshet")) {
                PANICS.fetch_add(1, Ordering::SeqCst);
            }
            previous(info);
        }));
    });
}

const FRAGMENTS: &[&str] = &[
    "SELECT", "INSERT INTO", "UPDATE", "DELETE FROM", "CREATE TABLE", "DROP TABLE", "CREATE INDEX", "ON", "VALUES",
    "SET", "WHERE", "FROM", "GROUP BY", "ORDER BY", "LIMIT", "OFFSET", "HAVING", "JOIN", "LEFT JOIN", "AND", "OR",
    "NOT", "IN", "EXISTS", "BETWEEN", "LIKE", "IS NULL", "CASE WHEN", "THEN", "ELSE", "END", "CAST(", "AS", "INT",
    "TEXT", "NUMERIC(5,2)", "DATE", "TIMESTAMP", "TIMESTAMPTZ", "(", ")", ",", "*", "+", "-", "/", "%", "=", "<", ">", "<=", "||",
    "t", "u", "a", "b", "c", "count(*)", "sum(a)", "max(b)", "1", "0", "-1", "2147483647", "9999999999999999999",
    "1.5", "1e400", "'x'", "''", "'2024-02-30'", "NULL", "TRUE", "$1", "$0", "$99999", "::int", "substring(", "FOR",
    "DISTINCT", "UNION", "(SELECT a FROM t)", "PRIMARY KEY", "NOT NULL", "DEFAULT", "COPY t TO STDOUT", "EXPLAIN",
    "SHOW", "RESET", "BEGIN", "VACUUM", ";",
];

#[test]
fn random_statements_never_panic() {
    count_panics();
    let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE t (a INT PRIMARY KEY, b TEXT, c NUMERIC(5,2))").unwrap();
    s.execute_blocking("CREATE TABLE u (a INT, b TEXT)").unwrap();
    s.execute_blocking("INSERT INTO t VALUES (1, 'one', 1.5), (2, 'two', NULL)").unwrap();
    let mut rng = StdRng::seed_from_u64(20261122);
    let mut ok = 0;
    for _ in 0..3_000 {
        let n = rng.random_range(1..12);
        let sql: Vec<&str> = (0..n).map(|_| FRAGMENTS[rng.random_range(0..FRAGMENTS.len())]).collect();
        if s.execute_blocking(&sql.join(" ")).is_ok() {
            ok += 1;
        }
    }
    // The session still works and the data is intact (once a block the random statements
    // opened, and failed, has ended).
    s.execute_blocking("ROLLBACK").unwrap();
    let r = s.execute_blocking("SELECT count(*) FROM t").unwrap();
    assert_eq!(r[0].num_rows(), 1);
    assert!(ok > 0, "some random statements should be valid");
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a statement panicked (see the output above)");
}

fn random_expr(rng: &mut StdRng, depth: u32) -> String {
    const LEAVES: &[&str] = &[
        "a", "b", "c", "t.a", "1", "-7", "0", "2.5", "'txt'", "'12'", "NULL", "TRUE", "DATE '2024-01-01'",
        "TIMESTAMP '2024-01-01 10:00:00'", "TIMESTAMPTZ '2024-01-01 10:00:00+02'", "now()", "'2024-01-01 10:00-€'::timestamptz",
        "$1", "9223372036854775807", "1e10", "''",
    ];
    if depth == 0 || rng.random_range(0..3) == 0 {
        return LEAVES[rng.random_range(0..LEAVES.len())].to_string();
    }
    let x = random_expr(rng, depth - 1);
    let y = random_expr(rng, depth - 1);
    match rng.random_range(0..14) {
        0 => format!("({x} + {y})"),
        1 => format!("({x} * {y})"),
        2 => format!("({x} / {y})"),
        3 => format!("({x} = {y})"),
        4 => format!("({x} < {y})"),
        5 => format!("({x} AND {y})"),
        6 => format!("({x} || {y})"),
        7 => format!("CAST({x} AS {})", ["INT", "TEXT", "NUMERIC(4,1)", "DATE", "BOOLEAN", "SMALLINT", "REAL"][rng.random_range(0..7)]),
        8 => format!("CASE WHEN {x} THEN {y} ELSE {x} END"),
        9 => format!("coalesce({x}, {y})"),
        10 => format!("{x} IN ({y}, {x})"),
        11 => format!("{x} LIKE {y}"),
        12 => format!("abs({x})"),
        _ => format!("({x} % {y})"),
    }
}

#[test]
fn random_typed_expressions_never_panic() {
    count_panics();
    let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE t (a INT PRIMARY KEY, b TEXT, c NUMERIC(5,2))").unwrap();
    s.execute_blocking("INSERT INTO t VALUES (1, 'one', 1.5), (2, 'two', NULL), (3, NULL, -2)").unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    for i in 0..1_500 {
        let (e, p) = (random_expr(&mut rng, 3), random_expr(&mut rng, 2));
        let sql = match i % 5 {
            0 => format!("SELECT {e} FROM t WHERE a = {p}"),
            1 => format!("SELECT {e}, count(*) FROM t WHERE {p} GROUP BY 1"),
            2 => format!("UPDATE t SET c = {e} WHERE a = 1 AND {p}"),
            3 => format!("INSERT INTO t VALUES ({}, {e}, {p})", 100 + i),
            _ => format!("DELETE FROM t WHERE {p} AND a > 50"),
        };
        let _ = futures::executor::block_on(async {
            match s.prepare(&sql, &[]).await {
                Ok(p) => {
                    let params = p.param_types.iter().map(|_| freshet::Value::Null).collect();
                    s.collect(&p, params).await.map(|_| ())
                }
                Err(e) => Err(e),
            }
        });
    }
    let r = s.execute_blocking("SELECT count(*) FROM t WHERE a <= 3").unwrap();
    assert_eq!(r[0].rows()[0][0], freshet::Value::Int64(3));
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a statement panicked (see the output above)");
}
