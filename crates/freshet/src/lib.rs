//! Freshet, an in-memory HTAP SQL database, as a library.
//!
//! ```no_run
//! let db = freshet::Database::open(freshet::Config::default())?;
//! let mut session = db.session();
//! session.execute_blocking("CREATE TABLE t (id INT PRIMARY KEY, v TEXT)")?;
//! session.execute_blocking("INSERT INTO t VALUES (1, 'one'), (2, 'two')")?;
//! let results = session.execute_blocking("SELECT count(*) FROM t")?;
//! let batches = &results[0].batches; // Arrow record batches
//! # Ok::<(), freshet::Error>(())
//! ```
//!
//! A [`Database`] owns the transactional engine (catalog, storage, partition executors) and
//! the analytical engine (DataFusion on its own worker pool). A [`Session`] parses, plans and
//! runs statements: index-driven short statements on the executors, every other query on a
//! snapshot through the analytical engine. The PostgreSQL server (`freshet-server`) is a thin
//! protocol layer over [`Session`].

mod advisory;
mod array_params;
mod copy;
mod cursor;
pub mod notify;
mod pg_catalog;
mod database;
pub mod durability;
pub mod procedure;
mod result;
mod rewrite;
mod sequences;
mod session;
mod settings;
pub mod snapshots;
mod transaction;
mod update_from;
mod views;

pub use copy::{CopyFormat, CopyIn, CopyOut};
pub use database::{Config, Database};
pub use notify::Notification;
pub use freshet_core::sql::ddl::ForeignKeys;
pub use freshet_core::executor::{await_reply_briefly, watch_replies};
pub use freshet_core::types::{shown_decimal, DataType, Decimal, Value};
pub use freshet_core::{Error, ErrorFields, Result, SqlState};
pub use freshet_olap::datafusion::arrow;
pub use freshet_core::sql::exec::{RecordChanges, RecordRead, RecordRow, RecordRowChanges};
pub use procedure::{NativeBody, NativeProcedure, ProcedureContext, Resolved, TableRef};
pub use result::{batch_rows, ColumnInfo, Notice, NoticeSeverity, Output, RowBatch, RowStream, StatementResult};
pub use session::{Prepared, QueryResult, Session, TransactionStatus};
pub use settings::Settings;
pub use snapshots::{SnapshotInfo, SnapshotMode};
pub use sqlparser::ast::Statement;

/// The PostgreSQL version Freshet reports (`server_version`); clients pick SQL dialect
/// features by it.
pub const SERVER_VERSION: &str = "15.0 (Freshet 0.1.0)";
