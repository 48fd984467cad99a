//! Where a workload runs: an in-process database or a server address. [`Target::run`] gives a
//! [`ConnJob`] a fresh connection on the calling thread and drives it to completion, so the
//! same job code runs embedded (on a plain executor) and over the wire (on a single-threaded
//! tokio runtime of that thread, which also drives the connection's socket).

use crate::conn::{Conn, DbResult, Embedded, Wire};

#[derive(Clone)]
pub enum TargetKind {
    Embedded(freshet::Database),
    /// A libpq-style connection string, e.g. `host=127.0.0.1 port=5433 user=bench dbname=x`.
    Wire(String),
}

#[derive(Clone)]
pub struct Target {
    pub kind: TargetKind,
    /// The isolation level every session sets for its transactions (e.g. "read committed");
    /// `None` keeps the system's default.
    pub isolation: Option<String>,
}

/// Work to do on one connection.
#[allow(async_fn_in_trait)]
pub trait ConnJob {
    type Output;
    async fn run<C: Conn>(self, conn: C) -> DbResult<Self::Output>;
}

impl Target {
    pub fn embedded(db: freshet::Database) -> Target {
        Target { kind: TargetKind::Embedded(db), isolation: None }
    }

    pub fn wire(conninfo: impl Into<String>) -> Target {
        Target { kind: TargetKind::Wire(conninfo.into()), isolation: None }
    }

    pub fn with_isolation(mut self, isolation: Option<String>) -> Target {
        self.isolation = isolation;
        self
    }

    async fn setup<C: Conn>(&self, mut conn: C) -> DbResult<C> {
        if let Some(level) = &self.isolation {
            conn.simple(&format!("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL {level}")).await?;
        }
        Ok(conn)
    }

    /// Runs `job` on a new connection on this thread.
    pub fn run<J: ConnJob>(&self, job: J) -> DbResult<J::Output> {
        match &self.kind {
            TargetKind::Embedded(db) => futures::executor::block_on(async {
                let conn = self.setup(Embedded::new(db)).await?;
                job.run(conn).await
            }),
            TargetKind::Wire(conninfo) => {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| crate::conn::DbError::new("", format!("tokio runtime: {e}")))?;
                rt.block_on(async {
                    let conn = self.setup(Wire::connect(conninfo).await?).await?;
                    job.run(conn).await
                })
            }
        }
    }
}
