//! The PostgreSQL server end to end, through tokio-postgres, psql, and raw protocol bytes.

use std::error::Error as StdError;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use freshet::{Config, Database};
use freshet_server::{Server, ServerConfig};
use futures::{SinkExt, TryStreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{to_sql_checked, FromSql, IsNull, ToSql, Type};
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

type BoxError = Box<dyn StdError + Sync + Send>;

// ---------------------------------------------------------------------------------------------
// Harness

/// A server on a free port; stops accepting when dropped.
struct TestServer {
    addr: SocketAddr,
    _stop: oneshot::Sender<()>,
}

impl TestServer {
    async fn start() -> TestServer {
        let db = Database::open(Config { olap_threads: 2, ..Config::default() }).expect("open database");
        let config = ServerConfig { host: "127.0.0.1".into(), port: 0, unix_socket_dir: None };
        let server = Server::bind(db, &config).await.expect("bind");
        let addr = server.local_addr();
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        TestServer { addr, _stop: stop }
    }

    fn conninfo(&self) -> String {
        format!("host=127.0.0.1 port={} user=tester dbname=testdb application_name=protocol-test", self.addr.port())
    }

    async fn client(&self) -> Client {
        let (client, connection) = tokio_postgres::connect(&self.conninfo(), NoTls).await.expect("connect");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
    }
}

fn code(e: &tokio_postgres::Error) -> &SqlState {
    e.code().unwrap_or_else(|| panic!("no SQLSTATE in {e:?}"))
}

/// The text rows of a simple query.
async fn text_rows(client: &Client, sql: &str) -> Vec<Vec<Option<String>>> {
    let messages = client.simple_query(sql).await.expect(sql);
    messages
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect()),
            _ => None,
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Wire types tokio-postgres has no built-in Rust type for (without optional features)

/// A DATE as days since 2000-01-01 (the binary form).
#[derive(Debug, PartialEq)]
struct PgDate(i32);

/// A TIMESTAMP as microseconds since 2000-01-01 (the binary form).
#[derive(Debug, PartialEq)]
struct PgTimestamp(i64);

/// A NUMERIC in its binary form, shown as decimal text.
#[derive(Debug, PartialEq)]
struct PgNumeric(String);

/// A uuid's 16 bytes (the binary form).
#[derive(Debug, PartialEq)]
struct PgUuid([u8; 16]);

impl<'a> FromSql<'a> for PgUuid {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(PgUuid(raw.try_into()?))
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::UUID
    }
}

impl ToSql for PgUuid {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        out.put_slice(&self.0);
        Ok(IsNull::No)
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::UUID
    }
    to_sql_checked!();
}

impl<'a> FromSql<'a> for PgDate {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(PgDate(i32::from_be_bytes(raw.try_into()?)))
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::DATE
    }
}

impl ToSql for PgDate {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        out.put_i32(self.0);
        Ok(IsNull::No)
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::DATE
    }
    to_sql_checked!();
}

impl<'a> FromSql<'a> for PgTimestamp {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(PgTimestamp(i64::from_be_bytes(raw.try_into()?)))
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::TIMESTAMP
    }
}

impl ToSql for PgTimestamp {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        out.put_i64(self.0);
        Ok(IsNull::No)
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::TIMESTAMP
    }
    to_sql_checked!();
}

impl<'a> FromSql<'a> for PgNumeric {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(PgNumeric(numeric_text(raw)?))
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::NUMERIC
    }
}

impl ToSql for PgNumeric {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        out.put_slice(&numeric_binary(&self.0));
        Ok(IsNull::No)
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::NUMERIC
    }
    to_sql_checked!();
}

/// PostgreSQL's binary NUMERIC as text with `dscale` fraction digits (an independent reading
/// of the format, to check the server's).
fn numeric_text(raw: &[u8]) -> Result<String, BoxError> {
    let word = |i: usize| -> Result<i16, BoxError> { Ok(i16::from_be_bytes(raw.get(2 * i..2 * i + 2).ok_or("short")?.try_into()?)) };
    let (ndigits, weight, sign, dscale) = (word(0)? as usize, word(1)? as i32, word(2)? as u16, word(3)? as usize);
    let digits: Vec<i32> = (0..ndigits).map(|i| word(4 + i).map(|d| d as i32)).collect::<Result<_, _>>()?;
    let digit = |w: i32| -> i32 {
        let i = weight - w;
        if i >= 0 && (i as usize) < digits.len() { digits[i as usize] } else { 0 }
    };
    let mut int_part = String::new();
    for w in (0..=weight.max(0)).rev() {
        int_part.push_str(&format!("{:04}", digit(w)));
    }
    let int_part = int_part.trim_start_matches('0');
    let mut frac = String::new();
    let mut w = -1;
    while frac.len() < dscale {
        frac.push_str(&format!("{:04}", digit(w)));
        w -= 1;
    }
    frac.truncate(dscale);
    let mut s = String::new();
    if sign == 0x4000 {
        s.push('-');
    }
    s.push_str(if int_part.is_empty() { "0" } else { int_part });
    if dscale > 0 {
        s.push('.');
        s.push_str(&frac);
    }
    Ok(s)
}

/// Decimal text ("-123.45") in PostgreSQL's binary NUMERIC form.
fn numeric_binary(text: &str) -> Vec<u8> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, text),
    };
    let (int_part, frac) = body.split_once('.').unwrap_or((body, ""));
    let pad_left = (4 - int_part.len() % 4) % 4;
    let int_digits = format!("{}{int_part}", "0".repeat(pad_left));
    let pad_right = (4 - frac.len() % 4) % 4;
    let frac_digits = format!("{frac}{}", "0".repeat(pad_right));
    let group = |s: &str| -> Vec<i16> { s.as_bytes().chunks(4).map(|c| std::str::from_utf8(c).unwrap().parse().unwrap()).collect() };
    let mut digits = group(&int_digits);
    let weight = digits.len() as i16 - 1;
    digits.extend(group(&frac_digits));
    let mut out = Vec::new();
    for w in [digits.len() as i16, weight, if negative { 0x4000 } else { 0 }, frac.len() as i16] {
        out.extend(w.to_be_bytes());
    }
    for d in digits {
        out.extend(d.to_be_bytes());
    }
    out
}

/// Days since 2000-01-01 of a civil date.
fn pg_days(y: i32, m: u32, d: u32) -> i32 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i32 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i32 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468 - 10_957
}

// ---------------------------------------------------------------------------------------------
// Types

const TYPES_DDL: &str = "CREATE TABLE types (id INT PRIMARY KEY, s SMALLINT, i INTEGER, l BIGINT, r REAL, \
    d DOUBLE PRECISION, n NUMERIC(10,2), c CHAR(5), v VARCHAR(10), tx TEXT, dt DATE, ts TIMESTAMP, b BOOLEAN, tz TIMESTAMPTZ)";

const TS_2024: i64 = (8_825 * 86_400 + 13 * 3600 + 45 * 60) * 1_000_000 + 500_000; // 2024-02-29 13:45:00.5

/// 2024-02-29 13:45:00.5 UTC, the instant a TIMESTAMPTZ column holds (tokio-postgres reads and
/// writes `SystemTime` as PostgreSQL's binary timestamptz).
fn tz_2024() -> std::time::SystemTime {
    std::time::UNIX_EPOCH + std::time::Duration::from_micros((946_684_800_000_000 + TS_2024) as u64)
}

async fn fill_types(client: &Client) {
    client.batch_execute(TYPES_DDL).await.unwrap();
    let insert = "INSERT INTO types VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)";
    let n = client
        .execute(
            insert,
            &[
                &1i32,
                &-2i16,
                &3i32,
                &(1i64 << 40),
                &1.5f32,
                &2.25f64,
                &PgNumeric("-123.45".into()),
                &"ab",
                &"vc",
                &"some text",
                &PgDate(pg_days(2024, 2, 29)),
                &PgTimestamp(TS_2024),
                &true,
                &tz_2024(),
            ],
        )
        .await
        .unwrap();
    assert_eq!(n, 1);
    let nulls: [&(dyn ToSql + Sync); 14] = [
        &2i32,
        &None::<i16>,
        &None::<i32>,
        &None::<i64>,
        &None::<f32>,
        &None::<f64>,
        &None::<PgNumeric>,
        &None::<&str>,
        &None::<&str>,
        &None::<&str>,
        &None::<PgDate>,
        &None::<PgTimestamp>,
        &None::<bool>,
        &None::<std::time::SystemTime>,
    ];
    assert_eq!(client.execute(insert, &nulls).await.unwrap(), 1);
}

fn check_full_row(row: &tokio_postgres::Row) {
    assert_eq!(row.get::<_, i32>("id"), 1);
    assert_eq!(row.get::<_, i16>("s"), -2);
    assert_eq!(row.get::<_, i32>("i"), 3);
    assert_eq!(row.get::<_, i64>("l"), 1 << 40);
    assert_eq!(row.get::<_, f32>("r"), 1.5);
    assert_eq!(row.get::<_, f64>("d"), 2.25);
    assert_eq!(row.get::<_, PgNumeric>("n"), PgNumeric("-123.45".into()));
    assert_eq!(row.get::<_, String>("c"), "ab   ");
    assert_eq!(row.get::<_, String>("v"), "vc");
    assert_eq!(row.get::<_, String>("tx"), "some text");
    assert_eq!(row.get::<_, PgDate>("dt"), PgDate(pg_days(2024, 2, 29)));
    assert_eq!(row.get::<_, PgTimestamp>("ts"), PgTimestamp(TS_2024));
    assert!(row.get::<_, bool>("b"));
    assert_eq!(row.get::<_, std::time::SystemTime>("tz"), tz_2024());
}

fn check_null_row(row: &tokio_postgres::Row) {
    assert_eq!(row.get::<_, i32>("id"), 2);
    assert_eq!(row.get::<_, Option<i16>>("s"), None);
    assert_eq!(row.get::<_, Option<i64>>("l"), None);
    assert_eq!(row.get::<_, Option<PgNumeric>>("n"), None);
    assert_eq!(row.get::<_, Option<String>>("c"), None);
    assert_eq!(row.get::<_, Option<PgDate>>("dt"), None);
    assert_eq!(row.get::<_, Option<PgTimestamp>>("ts"), None);
    assert_eq!(row.get::<_, Option<bool>>("b"), None);
    assert_eq!(row.get::<_, Option<std::time::SystemTime>>("tz"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_type_round_trips_in_binary_on_both_paths() {
    let server = TestServer::start().await;
    let client = server.client().await;
    fill_types(&client).await;
    let point = "SELECT * FROM types WHERE id = $1";
    for path in ["on", "off"] {
        client.batch_execute(&format!("SET freshet.short_path = {path}")).await.unwrap();
        check_full_row(&client.query_one(point, &[&1i32]).await.unwrap());
        check_null_row(&client.query_one(point, &[&2i32]).await.unwrap());
        let all = client.query("SELECT * FROM types ORDER BY id", &[]).await.unwrap();
        check_full_row(&all[0]);
        check_null_row(&all[1]);
    }
    let types: Vec<Type> = client.prepare(point).await.unwrap().columns().iter().map(|c| c.type_().clone()).collect();
    let expected = [
        Type::INT4, Type::INT2, Type::INT4, Type::INT8, Type::FLOAT4, Type::FLOAT8, Type::NUMERIC,
        Type::BPCHAR, Type::VARCHAR, Type::TEXT, Type::DATE, Type::TIMESTAMP, Type::BOOL, Type::TIMESTAMPTZ,
    ];
    assert_eq!(types, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uuid_parameters_and_results_in_binary_on_both_paths() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client.batch_execute("CREATE TABLE u (id UUID PRIMARY KEY, n INT)").await.unwrap();
    let a = PgUuid([0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11]);
    assert_eq!(client.execute("INSERT INTO u VALUES ($1, 1)", &[&a]).await.unwrap(), 1);
    // A text parameter in another accepted form is the same uuid.
    client.execute("INSERT INTO u VALUES ($1::text::uuid, 2)", &[&"{00000000000000000000000000000002}"]).await.unwrap();
    let statement = client.prepare("SELECT id, n FROM u WHERE id = $1").await.unwrap();
    assert_eq!(statement.params(), &[Type::UUID]);
    assert_eq!(statement.columns()[0].type_(), &Type::UUID);
    for path in ["on", "off"] {
        client.batch_execute(&format!("SET freshet.short_path = {path}")).await.unwrap();
        let row = client.query_one(&statement, &[&a]).await.unwrap();
        assert_eq!((row.get::<_, PgUuid>(0), row.get::<_, i32>(1)), (PgUuid(a.0), 1));
        let ids: Vec<PgUuid> = client.query("SELECT id FROM u ORDER BY id", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
        let mut two = [0u8; 16];
        two[15] = 2;
        assert_eq!(ids, vec![PgUuid(two), PgUuid(a.0)]);
    }
    let text = text_rows(&client, "SELECT id FROM u WHERE n = 1").await;
    assert_eq!(text, vec![vec![Some("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".to_string())]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_type_in_text_through_the_simple_protocol() {
    let server = TestServer::start().await;
    let client = server.client().await;
    fill_types(&client).await;
    let some = |s: &str| Some(s.to_string());
    let full = vec![
        some("1"), some("-2"), some("3"), some("1099511627776"), some("1.5"), some("2.25"), some("-123.45"),
        some("ab   "), some("vc"), some("some text"), some("2024-02-29"), some("2024-02-29 13:45:00.5"), some("t"),
        some("2024-02-29 13:45:00.5+00"),
    ];
    let mut nulls = vec![None; 14];
    nulls[0] = some("2");
    for path in ["on", "off"] {
        client.batch_execute(&format!("SET freshet.short_path = {path}")).await.unwrap();
        assert_eq!(text_rows(&client, "SELECT * FROM types WHERE id = 1").await, vec![full.clone()]);
        assert_eq!(text_rows(&client, "SELECT * FROM types ORDER BY id").await, vec![full.clone(), nulls.clone()]);
    }
    // Untyped NULLs and literals, in both formats.
    assert_eq!(text_rows(&client, "SELECT NULL AS a, 'x' AS b, NULL::int AS c").await, vec![vec![None, some("x"), None]]);
    let row = client.query_one("SELECT NULL AS a, NULL::int AS b", &[]).await.unwrap();
    assert_eq!(row.get::<_, Option<String>>(0), None);
    assert_eq!(row.get::<_, Option<i32>>(1), None);
    // Text parameters of the extended protocol go through the same input functions.
    let row = client.query_one("SELECT n::text, c, ts FROM types WHERE v = $1", &[&"vc"]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "-123.45");
    assert_eq!(row.get::<_, String>(1), "ab   ");
    assert_eq!(row.get::<_, PgTimestamp>(2), PgTimestamp(TS_2024));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_path_and_analytical_path_return_typed_binary_results() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute(
            "CREATE TABLE acct (id INT PRIMARY KEY, owner VARCHAR(20), balance NUMERIC(12,2), opened DATE);
             INSERT INTO acct VALUES (1, 'ann', 10.50, '2024-01-01'), (2, 'bob', 20.25, '2024-01-02'), (3, 'cy', -0.75, '2024-01-03')",
        )
        .await
        .unwrap();
    // Point lookup by primary key: the short path.
    let row = client.query_one("SELECT owner, balance, opened FROM acct WHERE id = $1", &[&2i32]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "bob");
    assert_eq!(row.get::<_, PgNumeric>(1), PgNumeric("20.25".into()));
    assert_eq!(row.get::<_, PgDate>(2), PgDate(pg_days(2024, 1, 2)));
    // Aggregates: the analytical path.
    let row = client.query_one("SELECT count(*), sum(balance), max(opened), min(id) FROM acct", &[]).await.unwrap();
    assert_eq!(row.columns()[0].type_(), &Type::INT8);
    assert_eq!(row.get::<_, i64>(0), 3);
    assert_eq!(row.columns()[1].type_(), &Type::NUMERIC);
    assert_eq!(row.get::<_, PgNumeric>(1), PgNumeric("30.00".into()));
    assert_eq!(row.get::<_, PgDate>(2), PgDate(pg_days(2024, 1, 3)));
    assert_eq!(row.get::<_, i32>(3), 1);
    let grouped = client.query("SELECT owner, sum(balance) AS total FROM acct GROUP BY owner ORDER BY owner", &[]).await.unwrap();
    let got: Vec<(String, PgNumeric)> = grouped.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(got[2], ("cy".to_string(), PgNumeric("-0.75".into())));
    // NUMERIC without a precision: the binary form carries the value's own digits, on both
    // paths, not the storage scale.
    let row = client.query_one("SELECT CAST(balance AS NUMERIC) FROM acct WHERE id = $1", &[&2i32]).await.unwrap();
    assert_eq!(row.get::<_, PgNumeric>(0), PgNumeric("20.25".into()));
    let row = client.query_one("SELECT CAST(sum(balance) AS NUMERIC) FROM acct", &[]).await.unwrap();
    assert_eq!(row.get::<_, PgNumeric>(0), PgNumeric("30".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numeric_parameters_and_results_use_the_base_10000_layout() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client.batch_execute("CREATE TABLE money (id INT PRIMARY KEY, amount NUMERIC(20,4))").await.unwrap();
    let values = ["0.0000", "1.0000", "-1.0000", "12345.6789", "-0.0001", "10000.0000", "9999999999999999.9999", "0.5000"];
    for (i, v) in values.iter().enumerate() {
        client.execute("INSERT INTO money VALUES ($1, $2)", &[&(i as i32), &PgNumeric(v.to_string())]).await.unwrap();
    }
    let rows = client.query("SELECT amount, amount::text AS t FROM money ORDER BY id", &[]).await.unwrap();
    for (row, v) in rows.iter().zip(values) {
        assert_eq!(row.get::<_, PgNumeric>(0), PgNumeric(v.to_string()));
        assert_eq!(row.get::<_, String>(1), v);
    }
    // A numeric parameter with more digits than the column rounds on assignment.
    client.execute("INSERT INTO money VALUES (100, $1)", &[&PgNumeric("2.71828".into())]).await.unwrap();
    let row = client.query_one("SELECT amount FROM money WHERE id = 100", &[]).await.unwrap();
    assert_eq!(row.get::<_, PgNumeric>(0), PgNumeric("2.7183".into()));
}

// ---------------------------------------------------------------------------------------------
// Parameters

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameter_types_are_inferred_or_converted() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client
        .batch_execute("CREATE TABLE p (id INT PRIMARY KEY, big BIGINT, ts TIMESTAMP); INSERT INTO p VALUES (1, 10, '2024-01-01 00:00:00')")
        .await
        .unwrap();
    // OID 0: typed from context.
    let stmt = client.prepare_typed("UPDATE p SET ts = $1 WHERE id = $2", &[Type::UNKNOWN, Type::UNKNOWN]).await.unwrap();
    assert_eq!(stmt.params(), &[Type::TIMESTAMP, Type::INT4]);
    // An int8 parameter against an int4 column.
    let stmt = client.prepare_typed("SELECT big FROM p WHERE id = $1", &[Type::INT8]).await.unwrap();
    assert_eq!(client.query_one(&stmt, &[&1i64]).await.unwrap().get::<_, i64>(0), 10);
    // An int2 parameter against an int8 column, and inserted into one.
    let stmt = client.prepare_typed("SELECT id FROM p WHERE big = $1", &[Type::INT2]).await.unwrap();
    assert_eq!(client.query_one(&stmt, &[&10i16]).await.unwrap().get::<_, i32>(0), 1);
    let stmt = client.prepare_typed("INSERT INTO p VALUES ($1, $2, NULL)", &[Type::INT8, Type::INT2]).await.unwrap();
    assert_eq!(client.execute(&stmt, &[&2i64, &7i16]).await.unwrap(), 1);
    assert_eq!(client.query_one("SELECT big FROM p WHERE id = 2", &[]).await.unwrap().get::<_, i64>(0), 7);
    // A timestamp sent as text with an offset, as pgjdbc sends setTimestamp.
    let stmt = client.prepare_typed("UPDATE p SET ts = $1 WHERE id = 1", &[Type::UNKNOWN]).await.unwrap();
    assert_eq!(stmt.params(), &[Type::TIMESTAMP]);
    let rows = text_rows(&client, "SELECT ts FROM p WHERE id = 1").await;
    assert_eq!(rows, vec![vec![Some("2024-01-01 00:00:00".to_string())]]);
    // Out of range for the column's type: 22003.
    let stmt = client.prepare_typed("INSERT INTO p (id) VALUES ($1)", &[Type::INT8]).await.unwrap();
    let err = client.execute(&stmt, &[&(1i64 << 40)]).await.unwrap_err();
    assert_eq!(code(&err), &SqlState::NUMERIC_VALUE_OUT_OF_RANGE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_statement_reports_parameters_and_columns() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client.batch_execute("CREATE TABLE d (id INT PRIMARY KEY, name VARCHAR(12), price NUMERIC(8,3))").await.unwrap();
    let stmt = client.prepare("SELECT name, price, id + id AS twice FROM d WHERE id = $1 AND price > $2").await.unwrap();
    assert_eq!(stmt.params(), &[Type::INT4, Type::NUMERIC]);
    let columns: Vec<(&str, &Type)> = stmt.columns().iter().map(|c| (c.name(), c.type_())).collect();
    assert_eq!(columns, vec![("name", &Type::VARCHAR), ("price", &Type::NUMERIC), ("twice", &Type::INT4)]);
    let insert = client.prepare("INSERT INTO d VALUES ($1, $2, $3)").await.unwrap();
    assert_eq!(insert.params(), &[Type::INT4, Type::VARCHAR, Type::NUMERIC]);
    assert!(insert.columns().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn array_parameters_compare_and_spread_on_both_paths() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client.batch_execute("CREATE TABLE a (id INT PRIMARY KEY, w BIGINT, name TEXT)").await.unwrap();
    client.batch_execute("INSERT INTO a SELECT g, g * 10, 'n' || g FROM generate_series(1, 20) g").await.unwrap();
    let ids = |rows: Vec<tokio_postgres::Row>| rows.iter().map(|r| r.get::<_, i32>(0)).collect::<Vec<_>>();
    // `= ANY($1)`: the parameter is an int4[], typed from the column; lists of any length.
    let any = client.prepare("SELECT id FROM a WHERE id = ANY($1) ORDER BY id").await.unwrap();
    assert_eq!(any.params(), &[Type::INT4_ARRAY]);
    assert_eq!(ids(client.query(&any, &[&vec![7i32, 3, 5, 99]]).await.unwrap()), vec![3, 5, 7]);
    assert_eq!(ids(client.query(&any, &[&(1..=20).collect::<Vec<i32>>()]).await.unwrap()), (1..=20).collect::<Vec<_>>());
    assert_eq!(ids(client.query(&any, &[&vec![Some(4i32), None]]).await.unwrap()), vec![4], "a NULL element matches nothing");
    assert!(client.query(&any, &[&Vec::<i32>::new()]).await.unwrap().is_empty());
    assert!(client.query(&any, &[&None::<Vec<i32>>]).await.unwrap().is_empty());
    // ALL, another operator, the statement's own parameters after the array.
    let all = client.prepare("SELECT count(*) FROM a WHERE id <> ALL($1) AND w > $2 AND id < ANY($3::int[])").await.unwrap();
    assert_eq!(all.params(), &[Type::INT4_ARRAY, Type::INT8, Type::INT4_ARRAY]);
    let n: i64 = client.query_one(&all, &[&vec![1i32, 2, 3], &0i64, &vec![10i32, 5]]).await.unwrap().get(0);
    assert_eq!(n, 6, "ids 4 to 9");
    let n: i64 = client.query_one(&all, &[&Vec::<i32>::new(), &0i64, &vec![10i32]]).await.unwrap().get(0);
    assert_eq!(n, 9, "<> ALL of nothing holds");
    let n: i64 = client.query_one(&all, &[&vec![Some(1i32), None], &0i64, &vec![10i32]]).await.unwrap().get(0);
    assert_eq!(n, 0, "a NULL element leaves <> ALL unknown");
    // Text elements, and an array type the client declares.
    let named = client.prepare("SELECT id FROM a WHERE name = ANY($1) ORDER BY id").await.unwrap();
    assert_eq!(named.params(), &[Type::TEXT_ARRAY]);
    assert_eq!(ids(client.query(&named, &[&vec!["n2", "n11", "x"]]).await.unwrap()), vec![2, 11]);
    let declared = client.prepare_typed("SELECT id FROM a WHERE id = ANY($1) ORDER BY id", &[Type::INT8_ARRAY]).await.unwrap();
    assert_eq!(declared.params(), &[Type::INT8_ARRAY]);
    assert_eq!(ids(client.query(&declared, &[&vec![2i64, 4]]).await.unwrap()), vec![2, 4]);
    // The analytical path: a grouped query.
    let grouped = client.prepare("SELECT w % 20, count(*) FROM a WHERE id = ANY($1) GROUP BY 1 ORDER BY 1").await.unwrap();
    let rows = client.query(&grouped, &[&vec![1i32, 2, 3, 4, 5]]).await.unwrap();
    let groups: Vec<(i64, i64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(groups, vec![(0, 2), (10, 3)]);
    // Changes: UPDATE and DELETE by a list, INSERT of an array's elements.
    let update = client.prepare("UPDATE a SET w = w + $2 WHERE id = ANY($1)").await.unwrap();
    assert_eq!(client.execute(&update, &[&vec![1i32, 2, 50], &1i64]).await.unwrap(), 2);
    let insert = client.prepare("INSERT INTO a (id, w) SELECT u, u * 10 FROM unnest($1::int[]) u").await.unwrap();
    assert_eq!(insert.params(), &[Type::INT4_ARRAY]);
    assert_eq!(client.execute(&insert, &[&vec![21i32, 22, 23]]).await.unwrap(), 3);
    assert_eq!(client.execute(&insert, &[&Vec::<i32>::new()]).await.unwrap(), 0);
    let delete = client.prepare("DELETE FROM a WHERE id = ANY($1)").await.unwrap();
    assert_eq!(client.execute(&delete, &[&vec![21i32, 23]]).await.unwrap(), 2);
    // A routine's array parameter: `f($1)` takes the array as its own parameter does.
    client
        .batch_execute("CREATE FUNCTION a_sum(ids INT[], k BIGINT) RETURNS BIGINT LANGUAGE plpgsql AS $$ DECLARE s BIGINT; BEGIN SELECT sum(w) INTO s FROM a WHERE id = ANY(ids); RETURN s * k; END $$")
        .await
        .unwrap();
    let call = client.prepare("SELECT a_sum($1, $2)").await.unwrap();
    assert_eq!(call.params(), &[Type::INT4_ARRAY, Type::INT8]);
    let total: i64 = client.query_one(&call, &[&vec![3i32, 4], &2i64]).await.unwrap().get(0);
    assert_eq!(total, 140);
    let rows = text_rows(&client, "SELECT id, w FROM a WHERE id IN (1, 2, 3, 22) ORDER BY id").await;
    let expected: Vec<Vec<Option<String>>> = [("1", "11"), ("2", "21"), ("3", "30"), ("22", "220")].iter().map(|(a, b)| vec![Some(a.to_string()), Some(b.to_string())]).collect();
    assert_eq!(rows, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn array_parameters_in_text_format() {
    let server = TestServer::start().await;
    let mut raw = Raw::connect(server.addr).await;
    raw.send(&[Raw::message(b'Q', &cstr("CREATE TABLE r (id INT PRIMARY KEY); INSERT INTO r VALUES (1), (2), (3)"))]).await;
    raw.until_ready().await;
    raw.send(&[parse_msg("s", "SELECT count(*) FROM r WHERE id = ANY($1)"), bind_msg("", "s", &["{1, 3,\"2\"}"]), execute_msg("", 0), sync_msg()]).await;
    let answer = raw.until_ready().await;
    assert_eq!(tags(&answer), "12DCZ");
    assert!(answer[2].1.ends_with(b"3"), "{:?}", answer[2]);
    raw.send(&[bind_msg("", "s", &["{1,x}"]), execute_msg("", 0), sync_msg()]).await;
    let answer = raw.until_ready().await;
    assert_eq!(error_field(&answer[1].1, b'C').as_deref(), Some("22P02"), "{answer:?}");
}

// ---------------------------------------------------------------------------------------------
// Pipelining, errors, concurrency

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_statements_and_an_error_in_the_middle() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client.batch_execute("CREATE TABLE pipe (id INT PRIMARY KEY, v INT)").await.unwrap();
    let insert = client.prepare("INSERT INTO pipe VALUES ($1, $2)").await.unwrap();
    let rows: Vec<(i32, i32)> = (0..20).chain([5]).chain(20..30).map(|id| (id, id * 10)).collect();
    let params: Vec<[&(dyn ToSql + Sync); 2]> = rows.iter().map(|(id, v)| [id as &(dyn ToSql + Sync), v as _]).collect();
    let futures = params.iter().map(|p| client.execute(&insert, p));
    let results = futures::future::join_all(futures).await;
    let failed: Vec<usize> = results.iter().enumerate().filter(|(_, r)| r.is_err()).map(|(i, _)| i).collect();
    assert_eq!(failed, vec![20]);
    assert_eq!(code(results[20].as_ref().unwrap_err()), &SqlState::UNIQUE_VIOLATION);
    let row = client.query_one("SELECT count(*), sum(v) FROM pipe", &[]).await.unwrap();
    assert_eq!(row.get::<_, i64>(0), 30);
    assert_eq!(row.get::<_, i64>(1), (0..30).map(|i| i * 10).sum::<i64>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_carry_sqlstate_and_the_connection_survives() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client.batch_execute("CREATE TABLE e (id INT PRIMARY KEY)").await.unwrap();
    client.execute("INSERT INTO e VALUES (1)", &[]).await.unwrap();

    let err = client.simple_query("SELECT * FROM e WHER id = 1").await.unwrap_err();
    let db = err.as_db_error().expect("a server error");
    assert_eq!(db.code(), &SqlState::SYNTAX_ERROR);
    assert_eq!(db.position(), Some(&tokio_postgres::error::ErrorPosition::Original(22)));

    let err = client.query("SELECT * FROM missing", &[]).await.unwrap_err();
    assert_eq!(code(&err), &SqlState::UNDEFINED_TABLE);
    let err = client.execute("INSERT INTO e VALUES (1)", &[]).await.unwrap_err();
    assert_eq!(code(&err), &SqlState::UNIQUE_VIOLATION);
    let err = client.query("SELECT 1 / 0", &[]).await.unwrap_err();
    assert_eq!(code(&err), &SqlState::DIVISION_BY_ZERO);
    let err = client.simple_query("SELECT id / 0 FROM e").await.unwrap_err();
    assert_eq!(code(&err), &SqlState::DIVISION_BY_ZERO);
    // Statements after a failing one in the same simple query do not run.
    let err = client.batch_execute("INSERT INTO e VALUES (2); SELECT 1/0; INSERT INTO e VALUES (3)").await.unwrap_err();
    assert_eq!(code(&err), &SqlState::DIVISION_BY_ZERO);

    let ids: Vec<i32> = client.query("SELECT id FROM e ORDER BY id", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(ids, vec![1, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sessions_insert_and_read() {
    let server = TestServer::start().await;
    let setup = server.client().await;
    setup.batch_execute("CREATE TABLE conc (id INT PRIMARY KEY, worker INT, v TEXT)").await.unwrap();
    let mut tasks = Vec::new();
    for worker in 0..8i32 {
        let client = server.client().await;
        tasks.push(tokio::spawn(async move {
            let insert = client.prepare("INSERT INTO conc VALUES ($1, $2, $3)").await.unwrap();
            for i in 0..40i32 {
                let id = worker * 1000 + i;
                client.execute(&insert, &[&id, &worker, &format!("w{worker}-{i}")]).await.unwrap();
                let row = client.query_one("SELECT v FROM conc WHERE id = $1", &[&id]).await.unwrap();
                assert_eq!(row.get::<_, String>(0), format!("w{worker}-{i}"));
            }
            let n: i64 = client.query_one("SELECT count(*) FROM conc WHERE worker = $1", &[&worker]).await.unwrap().get(0);
            assert_eq!(n, 40);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let n: i64 = setup.query_one("SELECT count(*) FROM conc", &[]).await.unwrap().get(0);
    assert_eq!(n, 320);
}

// ---------------------------------------------------------------------------------------------
// COPY

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_in_text_and_csv_then_copy_out() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client.batch_execute("CREATE TABLE cp (id INT PRIMARY KEY, name TEXT, amount NUMERIC(8,2))").await.unwrap();

    let sink = client.copy_in("COPY cp FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"1\tone\t1.50\n2\ttab\\there\t\\N\n")).await.unwrap();
    sink.send(bytes::Bytes::from_static(b"3\tth")).await.unwrap(); // a row split across messages
    sink.send(bytes::Bytes::from_static(b"ree\t-3.00\n")).await.unwrap();
    assert_eq!(sink.finish().await.unwrap(), 3);

    let sink = client.copy_in("COPY cp (id, name, amount) FROM STDIN WITH (FORMAT csv, HEADER true)").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"id,name,amount\n4,\"four, with comma\",4.25\n5,,\n")).await.unwrap();
    assert_eq!(sink.finish().await.unwrap(), 2);

    let stream = client.copy_out("COPY cp TO STDOUT").await.unwrap();
    let chunks: Vec<bytes::Bytes> = stream.try_collect().await.unwrap();
    let text: String = chunks.iter().map(|c| String::from_utf8_lossy(c).into_owned()).collect();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort();
    assert_eq!(lines, vec!["1\tone\t1.50", "2\ttab\\there\t\\N", "3\tthree\t-3.00", "4\tfour, with comma\t4.25", "5\t\\N\t\\N"]);

    let stream = client.copy_out("COPY (SELECT id, name FROM cp WHERE id >= 4 ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER true)").await.unwrap();
    let chunks: Vec<bytes::Bytes> = stream.try_collect().await.unwrap();
    let csv: String = chunks.iter().map(|c| String::from_utf8_lossy(c).into_owned()).collect();
    assert_eq!(csv, "id,name\n4,\"four, with comma\"\n5,\n");

    // A failing COPY leaves nothing behind and the connection goes on.
    let sink = client.copy_in("COPY cp FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"6\tsix\t6\n1\tduplicate\t1\n")).await.unwrap();
    let err = sink.finish().await.unwrap_err();
    assert_eq!(code(&err), &SqlState::UNIQUE_VIOLATION);
    let n: i64 = client.query_one("SELECT count(*) FROM cp", &[]).await.unwrap().get(0);
    assert_eq!(n, 5);

    // COPY of a view writes its rows; COPY into one is refused (42809).
    client.batch_execute("CREATE VIEW cp_big AS SELECT id, amount FROM cp WHERE amount > 2").await.unwrap();
    let stream = client.copy_out("COPY cp_big TO STDOUT").await.unwrap();
    let chunks: Vec<bytes::Bytes> = stream.try_collect().await.unwrap();
    let text: String = chunks.iter().map(|c| String::from_utf8_lossy(c).into_owned()).collect();
    assert_eq!(text, "4\t4.25\n");
    let Err(err) = client.copy_in::<_, bytes::Bytes>("COPY cp_big FROM STDIN").await else { panic!("COPY into a view succeeded") };
    assert_eq!(code(&err), &SqlState::WRONG_OBJECT_TYPE);
}

// ---------------------------------------------------------------------------------------------
// Cancellation

/// Sends cancel requests until `work` ends (a request that arrives before the query starts is
/// dropped); returns its error and how long it ran.
async fn cancel_until_done<T: std::fmt::Debug>(
    token: &tokio_postgres::CancelToken,
    work: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>,
) -> (tokio_postgres::Error, Duration) {
    let started = Instant::now();
    let canceller = async {
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            token.cancel_query(NoTls).await.unwrap();
        }
    };
    let err = tokio::select! {
        r = work => r.unwrap_err(),
        () = canceller => unreachable!(),
    };
    (err, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_a_long_analytical_query() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let token = client.cancel_token();
    // 10^11 rows: minutes of work. (A cross join with a large build side would be cancelled as
    // promptly for the client, but keep the analytical workers busy until its join yields.)
    let long = "SELECT count(*) FROM generate_series(1, 10) b, generate_series(1, 10000000000) a";
    let (err, took) = cancel_until_done(&token, client.simple_query(long)).await;
    assert_eq!(code(&err), &SqlState::QUERY_CANCELED);
    assert!(err.as_db_error().unwrap().message().contains("canceling statement due to user request"));
    assert!(took < Duration::from_secs(10), "took {took:?}");
    // The same connection goes on, through both protocols.
    let row = client.query_one("SELECT 1 + 1", &[]).await.unwrap();
    assert_eq!(row.get::<_, i32>(0), 2);
    assert_eq!(text_rows(&client, "SELECT 'still here'").await, vec![vec![Some("still here".to_string())]]);
    // The extended protocol: cancelled while streaming from the analytical side.
    let (err, took) = cancel_until_done(&token, client.query(long, &[])).await;
    assert_eq!(code(&err), &SqlState::QUERY_CANCELED);
    assert!(took < Duration::from_secs(10), "took {took:?}");
    // A cancel while idle does not hit the next query.
    token.cancel_query(NoTls).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let n: i64 = client.query_one("SELECT count(*) FROM generate_series(1, 1000) a", &[]).await.unwrap().get(0);
    assert_eq!(n, 1000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_ends_an_advisory_lock_wait_and_a_sleep() {
    let server = TestServer::start().await;
    let holder = server.client().await;
    let client = server.client().await;
    let token = client.cancel_token();
    holder.simple_query("SELECT pg_advisory_lock(42)").await.unwrap();
    let (err, took) = cancel_until_done(&token, client.simple_query("SELECT pg_advisory_lock(42)")).await;
    assert_eq!(code(&err), &SqlState::QUERY_CANCELED);
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let (err, _) = cancel_until_done(&token, client.query("SELECT pg_sleep(600)", &[])).await;
    assert_eq!(code(&err), &SqlState::QUERY_CANCELED);
    // The cancelled wait is gone: when the holder lets go, the lock is the client's.
    holder.simple_query("SELECT pg_advisory_unlock(42)").await.unwrap();
    let got: bool = client.query_one("SELECT pg_try_advisory_lock($1)", &[&42i64]).await.unwrap().get(0);
    assert!(got);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_reach_an_idle_listener_over_the_wire() {
    let server = TestServer::start().await;
    let (listener, mut connection) = tokio_postgres::connect(&server.conninfo(), NoTls).await.expect("connect");
    let (tx, mut received) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(message) = futures::future::poll_fn(|cx| connection.poll_message(cx)).await {
            if let Ok(tokio_postgres::AsyncMessage::Notification(n)) = message {
                let _ = tx.send((n.channel().to_string(), n.payload().to_string()));
            }
        }
    });
    listener.batch_execute("LISTEN orders").await.unwrap();
    let sender = server.client().await;
    sender.batch_execute("BEGIN; NOTIFY orders, 'o-1'; SELECT pg_notify('orders', 'o-2'); COMMIT").await.unwrap();
    // The listener sends nothing: the notifications arrive while it is idle.
    for want in ["o-1", "o-2"] {
        let got = tokio::time::timeout(Duration::from_secs(10), received.recv()).await.expect("a notification in time");
        assert_eq!(got, Some(("orders".to_string(), want.to_string())));
    }
    sender.batch_execute("NOTIFY other, 'x'").await.unwrap();
    listener.batch_execute("UNLISTEN orders").await.unwrap();
    sender.batch_execute("NOTIFY orders, 'unheard'").await.unwrap();
    listener.batch_execute("SELECT 1").await.unwrap();
    assert!(received.try_recv().is_err(), "nothing on channels it does not listen on");
}

// ---------------------------------------------------------------------------------------------
// Raw protocol

/// A client speaking raw protocol bytes.
struct Raw {
    stream: TcpStream,
}

type Msg = (u8, Vec<u8>);

impl Raw {
    async fn connect(addr: SocketAddr) -> Raw {
        let mut raw = Raw { stream: TcpStream::connect(addr).await.unwrap() };
        let mut body = Vec::new();
        body.extend(196_608i32.to_be_bytes());
        for s in ["user", "raw", "database", "raw", ""] {
            body.extend(s.as_bytes());
            body.push(0);
        }
        raw.send_untyped(&body).await;
        let startup = raw.until_ready().await;
        assert_eq!(startup.first().map(|m| m.0), Some(b'R'));
        raw
    }

    async fn send_untyped(&mut self, body: &[u8]) {
        let mut msg = ((body.len() + 4) as i32).to_be_bytes().to_vec();
        msg.extend(body);
        self.stream.write_all(&msg).await.unwrap();
    }

    fn message(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut msg = vec![tag];
        msg.extend(((body.len() + 4) as i32).to_be_bytes());
        msg.extend(body);
        msg
    }

    async fn send(&mut self, messages: &[Vec<u8>]) {
        self.stream.write_all(&messages.concat()).await.unwrap();
    }

    async fn recv(&mut self) -> Option<Msg> {
        let mut head = [0u8; 5];
        let read = tokio::time::timeout(Duration::from_secs(20), self.stream.read_exact(&mut head)).await.expect("server answers");
        read.ok()?;
        let len = i32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut body = vec![0; len - 4];
        self.stream.read_exact(&mut body).await.ok()?;
        Some((head[0], body))
    }

    async fn until_ready(&mut self) -> Vec<Msg> {
        let mut out = Vec::new();
        while let Some(m) = self.recv().await {
            let done = m.0 == b'Z';
            out.push(m);
            if done {
                break;
            }
        }
        out
    }
}

fn cstr(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

fn parse_msg(name: &str, sql: &str) -> Vec<u8> {
    Raw::message(b'P', &[cstr(name), cstr(sql), vec![0, 0]].concat())
}

fn bind_msg(portal: &str, statement: &str, text_params: &[&str]) -> Vec<u8> {
    let mut body = [cstr(portal), cstr(statement), vec![0, 0]].concat();
    body.extend((text_params.len() as i16).to_be_bytes());
    for p in text_params {
        body.extend((p.len() as i32).to_be_bytes());
        body.extend(p.as_bytes());
    }
    body.extend([0, 0]);
    Raw::message(b'B', &body)
}

fn execute_msg(portal: &str, max_rows: i32) -> Vec<u8> {
    Raw::message(b'E', &[cstr(portal), max_rows.to_be_bytes().to_vec()].concat())
}

fn sync_msg() -> Vec<u8> {
    Raw::message(b'S', &[])
}

fn tags(messages: &[Msg]) -> String {
    messages.iter().map(|m| m.0 as char).collect()
}

/// The value of field `code` of an ErrorResponse or NoticeResponse body.
fn error_field(body: &[u8], code: u8) -> Option<String> {
    let mut fields = body.split(|&b| b == 0);
    for f in fields.by_ref() {
        if f.first() == Some(&code) {
            return Some(String::from_utf8_lossy(&f[1..]).into_owned());
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extended_protocol_skips_to_sync_after_an_error() {
    let server = TestServer::start().await;
    let mut raw = Raw::connect(server.addr).await;
    raw.send(&[Raw::message(b'Q', &cstr("CREATE TABLE r (id INT PRIMARY KEY)"))]).await;
    assert_eq!(tags(&raw.until_ready().await), "CZ");
    raw.send(&[
        parse_msg("ins", "INSERT INTO r VALUES ($1)"),
        bind_msg("", "ins", &["1"]),
        execute_msg("", 0),
        bind_msg("", "ins", &["1"]), // duplicate key
        execute_msg("", 0),
        bind_msg("", "ins", &["2"]), // skipped
        execute_msg("", 0),
        sync_msg(),
    ])
    .await;
    let answer = raw.until_ready().await;
    assert_eq!(tags(&answer), "12C2EZ");
    assert_eq!(error_field(&answer[4].1, b'C').as_deref(), Some("23505"));
    assert_eq!(answer[5].1, b"I");
    // The named statement survived; the skipped insert did not run.
    raw.send(&[bind_msg("", "ins", &["3"]), execute_msg("", 0), sync_msg()]).await;
    assert_eq!(tags(&raw.until_ready().await), "2CZ");
    raw.send(&[Raw::message(b'Q', &cstr("SELECT id FROM r ORDER BY id"))]).await;
    let rows = raw.until_ready().await;
    assert_eq!(tags(&rows), "TDDCZ");
    // Re-using a statement name without Close is an error; Close then Parse works.
    raw.send(&[parse_msg("ins", "SELECT 1"), sync_msg()]).await;
    let answer = raw.until_ready().await;
    assert_eq!(error_field(&answer[0].1, b'C').as_deref(), Some("42P05"));
    raw.send(&[Raw::message(b'C', &[b"S".to_vec(), cstr("ins")].concat()), parse_msg("ins", "SELECT 1"), sync_msg()]).await;
    assert_eq!(tags(&raw.until_ready().await), "31Z");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_copy_fail_and_terminate() {
    let server = TestServer::start().await;
    let mut raw = Raw::connect(server.addr).await;
    // Flush sends what is pending without ending the pipeline.
    raw.send(&[parse_msg("one", "SELECT 1"), Raw::message(b'H', &[])]).await;
    assert_eq!(raw.recv().await.map(|m| m.0), Some(b'1'));
    raw.send(&[sync_msg()]).await;
    assert_eq!(tags(&raw.until_ready().await), "Z");
    // CopyFail aborts the COPY with 57014 and the client's reason; nothing is kept, and the
    // client's late CopyData is ignored.
    raw.send(&[Raw::message(b'Q', &cstr("CREATE TABLE cf (id INT PRIMARY KEY); COPY cf FROM STDIN"))]).await;
    let answer = [raw.recv().await.unwrap(), raw.recv().await.unwrap()];
    assert_eq!(tags(&answer), "CG");
    raw.send(&[Raw::message(b'd', b"1\n2\n"), Raw::message(b'f', &cstr("changed my mind")), Raw::message(b'd', b"3\n")]).await;
    let answer = raw.until_ready().await;
    assert_eq!(tags(&answer), "EZ");
    assert_eq!(error_field(&answer[0].1, b'C').as_deref(), Some("57014"));
    assert_eq!(error_field(&answer[0].1, b'M').as_deref(), Some("COPY from stdin failed: changed my mind"));
    raw.send(&[Raw::message(b'Q', &cstr("SELECT count(*) FROM cf"))]).await;
    let answer = raw.until_ready().await;
    assert_eq!(String::from_utf8_lossy(&answer[1].1[6..]), "0");
    // Terminate closes the connection.
    raw.send(&[Raw::message(b'X', &[])]).await;
    assert!(raw.recv().await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_limits_suspend_the_portal() {
    let server = TestServer::start().await;
    let mut raw = Raw::connect(server.addr).await;
    raw.send(&[Raw::message(b'Q', &cstr("CREATE TABLE lim (id INT PRIMARY KEY); INSERT INTO lim VALUES (1),(2),(3),(4),(5)"))]).await;
    assert_eq!(tags(&raw.until_ready().await), "CCZ");
    raw.send(&[
        parse_msg("", "SELECT id FROM lim ORDER BY id"),
        bind_msg("", "", &[]),
        Raw::message(b'D', &[b"P".to_vec(), cstr("")].concat()),
        execute_msg("", 2),
        execute_msg("", 2),
        execute_msg("", 2),
        execute_msg("", 0),
        sync_msg(),
    ])
    .await;
    let answer = raw.until_ready().await;
    assert_eq!(tags(&answer), "12TDDsDDsDCCZ");
    let values: Vec<String> = answer.iter().filter(|m| m.0 == b'D').map(|m| String::from_utf8_lossy(&m.1[6..]).into_owned()).collect();
    assert_eq!(values, vec!["1", "2", "3", "4", "5"]);
    let completes: Vec<String> = answer.iter().filter(|m| m.0 == b'C').map(|m| String::from_utf8_lossy(&m.1).into_owned()).collect();
    assert_eq!(completes, vec!["SELECT 1\0", "SELECT 0\0"]);
    // The portal is gone after Sync.
    raw.send(&[execute_msg("", 0), sync_msg()]).await;
    let answer = raw.until_ready().await;
    assert_eq!(error_field(&answer[0].1, b'C').as_deref(), Some("34000"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simple_query_notices_parameter_status_and_empty_query() {
    let server = TestServer::start().await;
    let mut raw = Raw::connect(server.addr).await;
    raw.send(&[Raw::message(b'Q', &cstr("DROP TABLE IF EXISTS nothing; SET application_name = 'renamed'"))]).await;
    let answer = raw.until_ready().await;
    assert_eq!(tags(&answer), "NCSCZ");
    assert_eq!(error_field(&answer[0].1, b'S').as_deref(), Some("NOTICE"));
    assert_eq!(error_field(&answer[0].1, b'C').as_deref(), Some("00000"));
    assert!(error_field(&answer[0].1, b'M').unwrap().contains("does not exist, skipping"));
    assert_eq!(answer[2].1, b"application_name\0renamed\0");
    raw.send(&[Raw::message(b'Q', &cstr(""))]).await;
    assert_eq!(tags(&raw.until_ready().await), "IZ");
    raw.send(&[Raw::message(b'Q', &cstr("  ;  "))]).await;
    assert_eq!(tags(&raw.until_ready().await), "IZ");
}

/// A function's notices raised before its error come before the ErrorResponse, in both
/// protocols; the error's CONTEXT is its "where" field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notices_of_a_failed_call_precede_its_error() {
    let server = TestServer::start().await;
    let mut raw = Raw::connect(server.addr).await;
    let create = "CREATE FUNCTION loud(n INT) RETURNS INT LANGUAGE plpgsql AS $$ BEGIN RAISE NOTICE 'about to divide %', n; RETURN 10 / n; END $$";
    raw.send(&[Raw::message(b'Q', &cstr(create))]).await;
    raw.until_ready().await;
    raw.send(&[Raw::message(b'Q', &cstr("SELECT loud(0)"))]).await;
    let answer = raw.until_ready().await;
    assert_eq!(tags(&answer), "NEZ");
    assert_eq!(error_field(&answer[0].1, b'M').as_deref(), Some("about to divide 0"));
    assert_eq!(error_field(&answer[1].1, b'C').as_deref(), Some("22012"));
    assert_eq!(error_field(&answer[1].1, b'W').as_deref(), Some("PL/pgSQL function loud(integer) line 1 at RETURN"));
    raw.send(&[parse_msg("", "SELECT loud(0)"), bind_msg("", "", &[]), execute_msg("", 0), sync_msg()]).await;
    let answer = raw.until_ready().await;
    assert_eq!(tags(&answer), "12NEZ");
    assert_eq!(error_field(&answer[2].1, b'M').as_deref(), Some("about to divide 0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_reports_settings_and_declines_ssl() {
    let server = TestServer::start().await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(&[0, 0, 0, 8, 4, 210, 22, 47]).await.unwrap(); // SSLRequest
    let mut answer = [0u8; 1];
    stream.read_exact(&mut answer).await.unwrap();
    assert_eq!(&answer, b"N");
    let mut raw = Raw { stream };
    let mut body = 196_608i32.to_be_bytes().to_vec();
    for s in ["user", "u", "client_encoding", "UTF8", "DateStyle", "ISO", "TimeZone", "Etc/UTC", "extra_float_digits", "3", "application_name", "app", ""] {
        body.extend(cstr(s));
    }
    raw.send_untyped(&body).await;
    let messages = raw.until_ready().await;
    let params: Vec<(String, String)> = messages
        .iter()
        .filter(|m| m.0 == b'S')
        .map(|m| {
            let parts: Vec<&[u8]> = m.1.split(|&b| b == 0).collect();
            (String::from_utf8_lossy(parts[0]).into_owned(), String::from_utf8_lossy(parts[1]).into_owned())
        })
        .collect();
    let get = |name: &str| params.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    assert_eq!(get("server_version"), Some(freshet::SERVER_VERSION));
    assert_eq!(get("client_encoding"), Some("UTF8"));
    assert_eq!(get("DateStyle"), Some("ISO, MDY"));
    assert_eq!(get("integer_datetimes"), Some("on"));
    assert_eq!(get("standard_conforming_strings"), Some("on"));
    assert_eq!(get("TimeZone"), Some("Etc/UTC"));
    assert_eq!(get("application_name"), Some("app"));
    assert!(messages.iter().any(|m| m.0 == b'K' && m.1.len() == 8));
    assert_eq!(messages.last().map(|m| m.1.clone()), Some(b"I".to_vec()));

    // A client_encoding other than UTF8 is refused.
    let mut raw = Raw { stream: TcpStream::connect(server.addr).await.unwrap() };
    let mut body = 196_608i32.to_be_bytes().to_vec();
    for s in ["user", "u", "client_encoding", "LATIN1", ""] {
        body.extend(cstr(s));
    }
    raw.send_untyped(&body).await;
    let (tag, body) = raw.recv().await.unwrap();
    assert_eq!(tag, b'E');
    assert_eq!(error_field(&body, b'S').as_deref(), Some("FATAL"));
    assert!(raw.recv().await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_messages_close_only_their_connection() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client.batch_execute("CREATE TABLE survivor (id INT PRIMARY KEY); INSERT INTO survivor VALUES (1)").await.unwrap();
    let garbage: Vec<Vec<u8>> = vec![
        vec![b'Q', 0, 0, 0, 2],                                   // length below 4
        vec![b'Q', 0x7f, 0xff, 0xff, 0xff],                       // over 1 GiB
        Raw::message(b'!', b"what"),                              // unknown message type
        Raw::message(b'Q', b"SELECT 1"),                          // string without NUL
        Raw::message(b'Q', b"SELECT '\xff\xfe'\0"),               // not UTF-8
        Raw::message(b'B', &[0, 0, 0, 0, 0, 1, 0, 0, 0, 50, 1]),  // truncated parameter
        Raw::message(b'E', &[0]),                                 // truncated row limit
        Raw::message(b'D', b"Xname\0"),                           // bad Describe target
        Raw::message(b'P', &[cstr("s"), cstr("SELECT 1"), vec![0xff, 0xff]].concat()), // negative count
    ];
    for bytes in garbage {
        let mut raw = Raw::connect(server.addr).await;
        raw.send(std::slice::from_ref(&bytes)).await;
        let (tag, body) = raw.recv().await.unwrap_or_else(|| panic!("no error for {bytes:?}"));
        assert_eq!(tag, b'E', "{bytes:?}");
        assert_eq!(error_field(&body, b'C').as_deref(), Some("08P01"), "{bytes:?}");
        assert_eq!(error_field(&body, b'S').as_deref(), Some("FATAL"));
        assert!(raw.recv().await.is_none(), "connection still open after {bytes:?}");
        let n: i64 = client.query_one("SELECT count(*) FROM survivor", &[]).await.unwrap().get(0);
        assert_eq!(n, 1);
    }
    // Garbage instead of a startup packet, and a connection that just goes away.
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest)).await.expect("closed");
    drop(TcpStream::connect(server.addr).await.unwrap());
    let mut raw = Raw::connect(server.addr).await;
    raw.send(&[Raw::message(b'Q', b"SELECT 1\0")[..7].to_vec()]).await;
    drop(raw);
    let row = client.query_one("SELECT id FROM survivor", &[]).await.unwrap();
    assert_eq!(row.get::<_, i32>(0), 1);
    // A fresh connection works too.
    let other = server.client().await;
    assert_eq!(other.query_one("SELECT 2", &[]).await.unwrap().get::<_, i32>(0), 2);
}

// ---------------------------------------------------------------------------------------------
// Unix-domain socket

/// With a socket directory, `host=<dir>` reaches the server as it reaches PostgreSQL: both
/// protocols, an analytical query that streams (the server watches the socket for the client
/// leaving meanwhile) and a cancel request on a connection of its own. The socket file is
/// refused to a second server while the first listens, replaced when stale, and removed when
/// the server stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unix_domain_socket_serves_clients_as_tcp_does() {
    let dir = std::env::temp_dir().join(format!("freshet-uds-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let open = || Database::open(Config { olap_threads: 2, ..Config::default() }).expect("open database");
    let config = |host: &str, port: u16| ServerConfig { host: host.into(), port, unix_socket_dir: Some(dir.clone()) };
    let server = Server::bind(open(), &config("127.0.0.1", 0)).await.expect("bind");
    let port = server.local_addr().port();
    let path = server.unix_socket_path().expect("a socket path").to_path_buf();
    assert_eq!(path, dir.join(format!(".s.PGSQL.{port}")));
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));

    let conninfo = format!("host={} port={port} user=tester dbname=testdb", dir.display());
    let (client, connection) = tokio_postgres::connect(&conninfo, NoTls).await.expect("connect over the Unix-domain socket");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client.batch_execute("CREATE TABLE uds (id INT PRIMARY KEY, name TEXT); INSERT INTO uds VALUES (1, 'one'), (2, 'two')").await.unwrap();
    assert_eq!(text_rows(&client, "SELECT name FROM uds ORDER BY id").await, vec![vec![Some("one".into())], vec![Some("two".into())]]);
    let name: String = client.query_one("SELECT name FROM uds WHERE id = $1", &[&2i32]).await.unwrap().get(0);
    assert_eq!(name, "two");
    let n: i64 = client.query_one("SELECT count(*) FROM generate_series(1, 3000000) a WHERE a % 3 = 0", &[]).await.unwrap().get(0);
    assert_eq!(n, 1_000_000);
    let (err, took) = cancel_until_done(&client.cancel_token(), client.query("SELECT pg_sleep(600)", &[])).await;
    assert_eq!(code(&err), &SqlState::QUERY_CANCELED);
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_eq!(client.query_one("SELECT 1 + 1", &[]).await.unwrap().get::<_, i32>(0), 2);

    // Another server (on another address, so that its TCP port is free) cannot take the socket.
    let Err(e) = Server::bind(open(), &config("127.0.0.2", port)).await else { panic!("a second server took a live socket") };
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{e}");
    assert!(e.to_string().contains("another server is listening"), "{e}");

    drop(client);
    drop(stop);
    running.await.unwrap().unwrap();
    assert!(!path.exists(), "the socket file outlived its server");

    // A socket file nothing accepts on (its server died) is replaced; a file that is no socket
    // is not.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let server = Server::bind(open(), &config("127.0.0.3", port)).await.expect("bind over a stale socket file");
    drop(server);
    assert!(!path.exists());
    std::fs::write(&path, b"not a socket").unwrap();
    let Err(e) = Server::bind(open(), &config("127.0.0.3", port)).await else { panic!("a regular file was replaced") };
    assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---------------------------------------------------------------------------------------------
// psql

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn psql_connects_and_queries() {
    let psql = std::path::Path::new("/usr/bin/psql");
    if !psql.exists() {
        eprintln!("psql not installed; skipping");
        return;
    }
    let server = TestServer::start().await;
    let port = server.addr.port().to_string();
    let run = move |sql: &'static str, stdin: Option<&'static str>| {
        let port = port.clone();
        tokio::task::spawn_blocking(move || {
            use std::io::Write;
            use std::process::{Command, Stdio};
            let mut child = Command::new("/usr/bin/psql")
                .args(["-h", "127.0.0.1", "-p", &port, "-U", "x", "-d", "y", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
                .env("PGCONNECT_TIMEOUT", "10")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("run psql");
            if let (Some(data), Some(mut input)) = (stdin, child.stdin.take()) {
                input.write_all(data.as_bytes()).unwrap();
            }
            let out = child.wait_with_output().unwrap();
            (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
        })
    };
    let (ok, stdout, stderr) = run("SELECT 1", None).await.unwrap();
    assert!(ok, "psql failed: {stderr}");
    assert_eq!(stdout.trim(), "1");
    let (ok, _, stderr) = run("CREATE TABLE ps (id INT PRIMARY KEY, name TEXT)", None).await.unwrap();
    assert!(ok, "{stderr}");
    let (ok, _, stderr) = run("\\copy ps FROM STDIN", Some("1\tone\n2\ttwo\n\\.\n")).await.unwrap();
    assert!(ok, "{stderr}");
    let (ok, stdout, stderr) = run("SELECT id, name FROM ps ORDER BY id", None).await.unwrap();
    assert!(ok, "{stderr}");
    assert_eq!(stdout.trim(), "1|one\n2|two");
    let (ok, _, stderr) = run("SELECT * FROM nowhere", None).await.unwrap();
    assert!(!ok);
    assert!(stderr.contains("relation \"nowhere\" does not exist"), "{stderr}");

    // psql's describe commands run its own catalog queries.
    let (ok, _, stderr) = run("CREATE INDEX ps_name ON ps (name)", None).await.unwrap();
    assert!(ok, "{stderr}");
    let (ok, _, stderr) = run("CREATE FUNCTION twice(x INT) RETURNS INT LANGUAGE plpgsql AS $$ BEGIN RETURN 2 * x; END $$", None).await.unwrap();
    assert!(ok, "{stderr}");
    for (command, expected) in [
        ("\\dt", "public|ps|table|freshet"),
        ("\\d ps", "id|integer||not null|\nname|text|||"),
        ("\\d+ ps", "id|integer||not null||plain|||\nname|text||||extended|||"),
        ("\\d ps_name", "name|text|yes|name"),
        ("\\di", "public|ps_name|index|freshet|ps\npublic|ps_pkey|index|freshet|ps"),
        ("\\df", "public|twice|integer|x integer|func"),
        ("\\dn", "public|freshet"),
        ("\\l", "freshet|freshet|UTF8|C|C||libc|"),
    ] {
        let (ok, stdout, stderr) = run(command, None).await.unwrap();
        assert!(ok, "{command}: {stderr}");
        assert_eq!(stdout.trim(), expected, "{command}");
    }
    let (ok, stdout, _) = run("\\d nowhere", None).await.unwrap();
    assert!(!ok && stdout.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_queries_take_parameters() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client.batch_execute("CREATE TABLE cat (k INT PRIMARY KEY, v VARCHAR(10) NOT NULL)").await.unwrap();
    // As drivers ask for a table's columns: a prepared statement with the names as parameters.
    let columns = client
        .prepare(
            "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull \
             FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 ORDER BY a.attnum",
        )
        .await
        .unwrap();
    let rows = client.query(&columns, &[&"public", &"cat"]).await.unwrap();
    let got: Vec<(String, String, bool)> = rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect();
    assert_eq!(got, vec![("k".into(), "integer".into(), true), ("v".into(), "character varying(10)".into(), true)]);
    assert!(client.query(&columns, &[&"public", &"nothing"]).await.unwrap().is_empty());
    // A parameter cast to regclass is looked up like a literal.
    let by_name = client.prepare("SELECT relname FROM pg_catalog.pg_class WHERE oid = $1::regclass").await.unwrap();
    let row = client.query_one(&by_name, &[&"cat"]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "cat");
    let err = client.query_one(&by_name, &[&"nothing"]).await.unwrap_err();
    assert_eq!(code(&err), &SqlState::UNDEFINED_TABLE);
}

/// A small deterministic generator for the fuzz-style test below.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// A random parameter value: NULL, random bytes of a plausible or arbitrary length, or (for
/// NUMERIC) a random base-10000 header and digits.
fn random_param(rng: &mut XorShift, oid: u32) -> Option<Vec<u8>> {
    match rng.below(8) {
        0 => None,
        1 => {
            let len = rng.below(12) as usize;
            Some(rng.bytes(len))
        }
        2 => Some(rng.below(1_000_000).to_string().into_bytes()),
        3 => Some(format!("{}.{}", rng.below(10_000), rng.below(1000)).into_bytes()),
        4 if oid == 1700 => {
            let ndigits = rng.below(6) as i16;
            let mut v = Vec::new();
            for w in [ndigits, rng.below(40) as i16 - 20, [0, 0x4000, 0xC000u16 as i16, 7][rng.below(4) as usize], rng.below(50) as i16] {
                v.extend(w.to_be_bytes());
            }
            for _ in 0..ndigits + rng.below(2) as i16 {
                v.extend((rng.below(10_050) as i16).to_be_bytes());
            }
            Some(v)
        }
        _ => {
            let len = [1, 2, 4, 8][rng.below(4) as usize];
            Some(rng.bytes(len))
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_parameter_bytes_are_errors_not_crashes() {
    let server = TestServer::start().await;
    let mut raw = Raw::connect(server.addr).await;
    raw.send(&[Raw::message(b'Q', &cstr(TYPES_DDL))]).await;
    assert_eq!(tags(&raw.until_ready().await), "CZ");
    let oids: [u32; 14] = [23, 21, 23, 20, 700, 701, 1700, 1042, 1043, 25, 1082, 1114, 16, 1184];
    let mut parse = [cstr("ins"), cstr("INSERT INTO types VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)")].concat();
    parse.extend((oids.len() as i16).to_be_bytes());
    for oid in oids {
        parse.extend(oid.to_be_bytes());
    }
    raw.send(&[Raw::message(b'P', &parse), sync_msg()]).await;
    assert_eq!(tags(&raw.until_ready().await), "1Z");
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let (mut inserted, mut failed) = (0, 0);
    let valid = ["", "1", "2", "3", "1.5", "2.5", "1.25", "ab", "vc", "t", "2024-01-01", "2024-01-01 00:00:00", "t", "2024-01-01 00:00:00+02"];
    for iteration in 0..1000 {
        // One parameter at a time gets random bytes in a random format; the others are valid text.
        let victim = 1 + rng.below(oids.len() as u64 - 1) as usize;
        let victim_format = rng.below(2) as i16;
        let mut body = [cstr(""), cstr("ins")].concat();
        body.extend((oids.len() as i16).to_be_bytes());
        for i in 0..oids.len() {
            body.extend((if i == victim { victim_format } else { 0 }).to_be_bytes());
        }
        body.extend((oids.len() as i16).to_be_bytes());
        for (i, oid) in oids.iter().enumerate() {
            let value = match i {
                0 => Some(iteration.to_string().into_bytes()),
                i if i == victim => random_param(&mut rng, *oid),
                i => Some(valid[i].as_bytes().to_vec()),
            };
            match value {
                None => body.extend((-1i32).to_be_bytes()),
                Some(v) => {
                    body.extend((v.len() as i32).to_be_bytes());
                    body.extend(v);
                }
            }
        }
        body.extend([0, 0]);
        raw.send(&[Raw::message(b'B', &body), execute_msg("", 0), sync_msg()]).await;
        let answer = raw.until_ready().await;
        assert_eq!(answer.last().map(|m| m.0), Some(b'Z'), "connection lost: {answer:?}");
        match answer.iter().find(|m| m.0 == b'E') {
            Some(e) => {
                assert_eq!(error_field(&e.1, b'S').as_deref(), Some("ERROR"));
                failed += 1;
            }
            None => inserted += 1,
        }
    }
    assert!(failed > 0 && inserted > 0, "inserted {inserted}, failed {failed}");
    raw.send(&[Raw::message(b'Q', &cstr("SELECT count(*) FROM types"))]).await;
    let answer = raw.until_ready().await;
    assert_eq!(tags(&answer), "TDCZ");
    assert_eq!(String::from_utf8_lossy(&answer[1].1[6..]), inserted.to_string());
}

/// SQL cursors through the extended protocol, as drivers use them: DECLARE with a parameter,
/// FETCH in parts until no rows come (an analytical query of 20,000 rows read from its stream
/// while the block writes), MOVE's count, a scrollable cursor going back, and the cursor
/// described as a portal (psycopg 3 asks for a named cursor's columns that way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursors_fetch_in_parts_over_the_extended_protocol() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client.batch_execute("CREATE TABLE big (id INT PRIMARY KEY, grp INT, amount BIGINT)").await.unwrap();
    client.batch_execute("INSERT INTO big SELECT g, g % 7, g * 3 FROM generate_series(1, 20000) g").await.unwrap();
    client.batch_execute("BEGIN").await.unwrap();
    let declared = client.execute("DECLARE big_c NO SCROLL CURSOR FOR SELECT id, amount * 2 AS twice FROM big WHERE grp <> $1 ORDER BY id", &[&0i32]).await.unwrap();
    assert_eq!(declared, 0);
    // A write after DECLARE is not seen by the cursor.
    client.execute("DELETE FROM big WHERE id <= 100", &[]).await.unwrap();
    let fetch = client.prepare("FETCH FORWARD 1000 FROM big_c").await.unwrap();
    assert_eq!(fetch.columns().iter().map(|c| c.name()).collect::<Vec<_>>(), vec!["id", "twice"]);
    let (mut rows, mut parts, mut sum, mut last) = (0usize, 0, 0i64, 0);
    loop {
        let part = client.query(&fetch, &[]).await.unwrap();
        if part.is_empty() {
            break;
        }
        parts += 1;
        for r in &part {
            let id: i32 = r.get(0);
            assert!(id > last, "rows come in order");
            last = id;
            sum += r.get::<_, i64>(1);
        }
        rows += part.len();
    }
    let expected: Vec<i64> = (1..=20000i64).filter(|g| g % 7 != 0).collect();
    assert_eq!(rows, expected.len());
    assert_eq!(parts, expected.len().div_ceil(1000));
    assert_eq!(sum, expected.iter().map(|g| g * 6).sum::<i64>());
    let err = client.query("FETCH PRIOR FROM big_c", &[]).await.unwrap_err();
    assert_eq!(code(&err), &SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE);
    client.batch_execute("ROLLBACK").await.unwrap();

    client.batch_execute("BEGIN").await.unwrap();
    client.execute("DECLARE s SCROLL CURSOR FOR SELECT id FROM big WHERE id <= $1 ORDER BY id", &[&10i32]).await.unwrap();
    assert_eq!(client.execute("MOVE FORWARD 4 IN s", &[]).await.unwrap(), 4);
    let back: Vec<i32> = client.query("FETCH BACKWARD 2 FROM s", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(back, vec![3, 2]);
    let last: Vec<i32> = client.query("FETCH LAST FROM s", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(last, vec![10]);
    assert_eq!(client.execute("MOVE ABSOLUTE 99 IN s", &[]).await.unwrap(), 0);

    // Describe of the portal the cursor is, by its name, from a raw connection's block.
    let mut raw = Raw::connect(server.addr).await;
    raw.send(&[Raw::message(b'Q', &cstr("BEGIN; DECLARE named CURSOR FOR SELECT id, grp FROM big WHERE id < 3 ORDER BY id"))]).await;
    assert_eq!(tags(&raw.until_ready().await), "CCZ");
    raw.send(&[Raw::message(b'D', &[b"P".to_vec(), cstr("named")].concat()), sync_msg()]).await;
    let answer = raw.until_ready().await;
    assert_eq!(tags(&answer), "TZ");
    assert!(answer[0].1.windows(4).any(|w| w == b"grp\0"), "the row description names the cursor's columns");
    raw.send(&[Raw::message(b'D', &[b"P".to_vec(), cstr("unknown")].concat()), sync_msg()]).await;
    let answer = raw.until_ready().await;
    assert_eq!(error_field(&answer[0].1, b'C').as_deref(), Some("34000"));
    client.batch_execute("COMMIT").await.unwrap();
    let err = client.query("FETCH s", &[]).await.unwrap_err();
    assert_eq!(code(&err), &SqlState::INVALID_CURSOR_NAME);
}

/// `statement_timeout` bounds each FETCH, not the cursor's life: a cursor over an analytical
/// query (many batches) read in parts with pauses longer than the timeout between them reads
/// to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_timeout_bounds_each_fetch_not_the_cursor() {
    let server = TestServer::start().await;
    let client = server.client().await;
    client.batch_execute("SET statement_timeout = '300ms'; BEGIN").await.unwrap();
    client.batch_execute("DECLARE slow NO SCROLL CURSOR FOR SELECT g FROM generate_series(1, 200000) g").await.unwrap();
    let mut total = 0i64;
    loop {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let part = client.query("FETCH 40000 FROM slow", &[]).await.unwrap();
        if part.is_empty() {
            break;
        }
        total += part.iter().map(|r| r.get::<_, i64>(0)).sum::<i64>();
    }
    assert_eq!(total, 200_000 * 200_001 / 2);
    client.batch_execute("COMMIT").await.unwrap();
}
