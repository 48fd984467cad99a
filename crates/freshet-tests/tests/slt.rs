//! The SQL logic test corpus (`slt/*.slt`), run in-process through both execution paths.
//!
//! Every file runs four times, each on a fresh database: in-process with the short-statement
//! path enabled (index-driven SELECTs on the partition executor), in-process with it disabled
//! (every SELECT on the analytical side), in-process with three partitions, and through the
//! PostgreSQL server with a real client (tokio-postgres, simple protocol). All runs must produce the file's expected output, which
//! is how the suite checks that the same SQL gives the same answer on either path and over the
//! wire. Result values are printed in PostgreSQL's text format; NULL prints as `NULL` and the
//! empty string as `(empty)`.

use std::path::{Path, PathBuf};

use freshet::{Config, DataType, Database, Session, Value};
use sqllogictest::{AsyncDB, DBOutput, DefaultColumnType, Runner};

/// An in-process Freshet session as a sqllogictest database.
pub struct Embedded {
    session: Session,
}

#[derive(Debug)]
pub struct SltError(freshet::Error);

impl std::fmt::Display for SltError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.0, self.0.state.code())
    }
}

impl std::error::Error for SltError {}

pub fn column_type(ty: DataType) -> DefaultColumnType {
    match ty {
        DataType::Int16 | DataType::Int32 | DataType::Int64 => DefaultColumnType::Integer,
        DataType::Float32 | DataType::Float64 | DataType::Decimal { .. } => DefaultColumnType::FloatingPoint,
        DataType::Char(_) | DataType::Varchar(_) | DataType::Text => DefaultColumnType::Text,
        _ => DefaultColumnType::Any,
    }
}

pub fn cell(v: &Value, ty: DataType) -> String {
    match v.to_text(ty) {
        None => "NULL".into(),
        Some(s) if s.is_empty() => "(empty)".into(),
        Some(s) => s,
    }
}

/// The row count of a command tag ("INSERT 0 3" → 3).
pub fn tag_count(tag: &str) -> u64 {
    tag.rsplit(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0)
}

#[async_trait::async_trait]
impl AsyncDB for Embedded {
    type Error = SltError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, SltError> {
        run_in(&mut self.session, sql).await
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "freshet"
    }

    fn error_sql_state(err: &SltError) -> Option<String> {
        Some(err.0.state.code().to_string())
    }
}

/// Runs `sql` in a session and shapes the last result as sqllogictest expects it.
async fn run_in(session: &mut Session, sql: &str) -> Result<DBOutput<DefaultColumnType>, SltError> {
    let mut results = session.execute_sql(sql).await.map_err(SltError)?;
    let Some(last) = results.pop() else { return Ok(DBOutput::StatementComplete(0)) };
    if last.columns.is_empty() {
        return Ok(DBOutput::StatementComplete(tag_count(&last.tag)));
    }
    let types = last.columns.iter().map(|c| column_type(c.ty)).collect();
    let rows = last
        .rows()
        .iter()
        .map(|r| r.iter().zip(&last.columns).map(|(v, c)| cell(v, c.ty)).collect())
        .collect();
    Ok(DBOutput::Rows { types, rows })
}

/// A session on a database kept in a data directory that is closed and opened again
/// (recovering from its checkpoints and log) before every third statement run outside a
/// transaction block, every other time after a CHECKPOINT; the session's settings carry over. Every result after a restart must
/// still be the file's expected one.
pub struct Restarting {
    dir: PathBuf,
    db: Option<Database>,
    session: Option<Session>,
    statements: usize,
}

impl Restarting {
    fn open(dir: &Path) -> Result<Restarting, SltError> {
        let db = Database::open(crate::durability::durable_config(dir, 1)).map_err(SltError)?;
        let session = db.session();
        Ok(Restarting { dir: dir.to_path_buf(), db: Some(db), session: Some(session), statements: 0 })
    }

    /// Closes and reopens the database; every other time, after a checkpoint (so recovery
    /// starts from checkpoints as well as from the log alone).
    async fn restart(&mut self, checkpoint: bool) -> Result<(), SltError> {
        if checkpoint && let Some(s) = self.session.as_mut() {
            s.execute_sql("CHECKPOINT").await.map_err(SltError)?;
        }
        let settings = self.session.take().map(|s| s.settings().clone()).unwrap_or_default();
        // Every handle on the database goes before it is opened again.
        self.db.take();
        let db = Database::open(crate::durability::durable_config(&self.dir, 1)).map_err(SltError)?;
        let mut session = db.session();
        *session.settings_mut() = settings;
        self.db = Some(db);
        self.session = Some(session);
        Ok(())
    }
}

#[async_trait::async_trait]
impl AsyncDB for Restarting {
    type Error = SltError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, SltError> {
        self.statements += 1;
        let idle = self.session.as_ref().is_some_and(|s| s.transaction_status() == freshet::TransactionStatus::Idle);
        if self.statements.is_multiple_of(3) && idle {
            self.restart(self.statements.is_multiple_of(6)).await?;
        }
        let session = self.session.as_mut().ok_or_else(|| SltError(freshet::Error::internal("no session")))?;
        run_in(session, sql).await
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "freshet"
    }

    fn error_sql_state(err: &SltError) -> Option<String> {
        Some(err.0.state.code().to_string())
    }
}

/// The corpus with restarts (DuckDB's `restart` idea): files that use one connection run on a
/// durable database that is closed and recovered between statements.
#[test]
fn slt_durable_with_restarts() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut failures = Vec::new();
    let mut ran = 0;
    for file in slt_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        if text.lines().any(|l| l.starts_with("connection ")) {
            // Several connections would each hold the database open across a restart.
            continue;
        }
        if text.lines().any(|l| l.starts_with("# restarts: no")) {
            // Results that a restart changes by design (a sequence skips its logged-ahead
            // values; currval is per session); `durability.rs` tests those across restarts.
            continue;
        }
        ran += 1;
        let dir = crate::durability::TempDir::new("slt");
        let path = dir.0.clone();
        let mut runner = Runner::new(move || {
            let path = path.clone();
            async move { Restarting::open(&path) }
        });
        runner.add_label("freshet");
        runner.add_label("short_path");
        if let Err(e) = runtime.block_on(runner.run_file_async(&file)) {
            failures.push(format!("{}: {e}", file.display()));
        }
    }
    assert!(ran >= 5 || std::env::var("FRESHET_SLT").is_ok(), "only {ran} files ran with restarts");
    assert!(failures.is_empty(), "{} slt file(s) failed with restarts:\n{}", failures.len(), failures.join("\n\n"));
}

pub fn slt_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("slt");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("slt directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        // FRESHET_SLT=name runs only the files whose name contains it (while working on one).
        .filter(|p| std::env::var("FRESHET_SLT").map_or(true, |f| p.to_string_lossy().contains(&f)))
        .collect();
    files.sort();
    files
}

fn run_embedded(short_path: bool, partitions: usize) {
    run_embedded_with(short_path, partitions, "cow");
}

fn run_embedded_with(short_path: bool, partitions: usize, snapshot_mode: &'static str) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut failures = Vec::new();
    for file in slt_files() {
        let db = Database::open(Config { olap_threads: 2, partitions, ..Config::default() }).unwrap();
        let mut runner = Runner::new(move || {
            let db = db.clone();
            async move {
                let mut session = db.session();
                if !short_path {
                    session.settings_mut().set("freshet.short_path", "off").map_err(SltError)?;
                }
                session.settings_mut().set("freshet.snapshot_mode", snapshot_mode).map_err(SltError)?;
                Ok::<_, SltError>(Embedded { session })
            }
        });
        runner.add_label("freshet");
        runner.add_label(if short_path { "short_path" } else { "olap_path" });
        if partitions > 1 {
            runner.add_label("partitioned");
        }
        if let Err(e) = runtime.block_on(runner.run_file_async(&file)) {
            failures.push(format!("{}: {e}", file.display()));
        }
    }
    assert!(failures.is_empty(), "{} slt file(s) failed:\n{}", failures.len(), failures.join("\n\n"));
}

#[test]
fn slt_embedded_short_path() {
    run_embedded(true, 1);
}

#[test]
fn slt_embedded_analytical_path() {
    run_embedded(false, 1);
}

/// fork mode: every query of the corpus runs in a child process forked at a transaction
/// boundary, and must give the same answers as with copy-on-write snapshots.
#[test]
fn slt_embedded_fork_mode() {
    run_embedded_with(false, 1, "fork");
}

/// fork mode with three partitions: the fork happens in a quiesced step over all of them.
#[test]
fn slt_embedded_fork_mode_three_partitions() {
    run_embedded_with(false, 3, "fork");
}

/// Three partitions: tables without a partition key are replicated on each, so every write
/// is a quiesced step over all partitions; partitioned tables spread their rows.
#[test]
fn slt_embedded_three_partitions() {
    run_embedded(true, 3);
}

/// A client connection to Freshet's server as a sqllogictest database.
pub struct Wire {
    client: tokio_postgres::Client,
}

#[derive(Debug)]
pub struct WireError(tokio_postgres::Error);

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.as_db_error() {
            Some(db) => write!(f, "{} ({})", db.message(), db.code().code()),
            None => write!(f, "{}", self.0),
        }
    }
}

impl std::error::Error for WireError {}

#[async_trait::async_trait]
impl AsyncDB for Wire {
    type Error = WireError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, WireError> {
        use tokio_postgres::SimpleQueryMessage as M;
        let messages = self.client.simple_query(sql).await.map_err(WireError)?;
        let mut rows = Vec::new();
        let mut columns = 0;
        let mut count = 0;
        let mut saw_rows = false;
        // Like the in-process runner, report the last statement's result.
        for m in messages {
            match m {
                M::RowDescription(cols) => {
                    rows.clear();
                    columns = cols.len();
                    saw_rows = true;
                }
                M::Row(row) => rows.push(
                    (0..row.len())
                        .map(|i| match row.get(i) {
                            None => "NULL".to_string(),
                            Some("") => "(empty)".to_string(),
                            Some(v) => v.to_string(),
                        })
                        .collect::<Vec<_>>(),
                ),
                M::CommandComplete(n) => count = n,
                _ => {}
            }
        }
        if saw_rows {
            return Ok(DBOutput::Rows { types: vec![DefaultColumnType::Any; columns], rows });
        }
        Ok(DBOutput::StatementComplete(count))
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "freshet"
    }

    fn error_sql_state(err: &WireError) -> Option<String> {
        err.0.code().map(|c| c.code().to_string())
    }
}

#[test]
fn slt_over_the_wire() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut failures = Vec::new();
    for file in slt_files() {
        let result: Result<(), String> = runtime.block_on(async {
            let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
            let config = freshet_server::ServerConfig { host: "127.0.0.1".into(), port: 0, unix_socket_dir: None };
            let server = freshet_server::Server::bind(db, &config).await.map_err(|e| e.to_string())?;
            let addr = server.local_addr();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            tokio::spawn(server.run(async {
                let _ = stopped.await;
            }));
            let mut runner = Runner::new(move || async move {
                let url = format!("host={} port={} user=slt dbname=freshet", addr.ip(), addr.port());
                let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.map_err(WireError)?;
                tokio::spawn(conn);
                Ok::<_, WireError>(Wire { client })
            });
            runner.add_label("freshet");
            runner.add_label("wire");
            runner.add_label("short_path");
            let outcome = runner.run_file_async(&file).await.map_err(|e| format!("{}: {e}", file.display()));
            drop(stop);
            outcome
        });
        if let Err(e) = result {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{} slt file(s) failed over the wire:\n{}", failures.len(), failures.join("\n\n"));
}
