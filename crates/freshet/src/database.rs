use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use freshet_core::engine::{Engine, EngineConfig};
use freshet_core::Result;
use freshet_olap::OlapEngine;

use crate::session::Session;

/// How a database is opened.
#[derive(Clone, Debug)]
pub struct Config {
    /// Worker threads of the analytical engine (default: the number of CPUs).
    pub olap_threads: usize,
    /// Rows an index-driven SELECT may examine on an executor before it moves to the
    /// analytical side (default 10,000).
    pub short_select_budget: usize,
    /// Where the database is kept. Accepted and recorded; until the redo log exists every
    /// database lives in memory only.
    pub data_dir: Option<PathBuf>,
    /// Partitions, each owned by one executor thread (default 1). Tables declared with
    /// `PARTITION BY HASH (column)` spread over them; other tables are replicated on each.
    pub partitions: usize,
}

impl Default for Config {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
        Config { olap_threads: cpus, short_select_budget: EngineConfig::default().short_select_budget, data_dir: None, partitions: 1 }
    }
}

pub(crate) struct Inner {
    pub engine: Arc<Engine>,
    pub olap: OlapEngine,
    pub config: Config,
    next_session: AtomicU32,
}

/// An open database. Cheap to clone; every clone is the same database.
#[derive(Clone)]
pub struct Database {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database").field("config", &self.inner.config).finish()
    }
}

impl Database {
    pub fn open(config: Config) -> Result<Database> {
        let engine = Engine::start(EngineConfig { short_select_budget: config.short_select_budget, partitions: config.partitions })?;
        let olap = OlapEngine::new(engine.clone(), config.olap_threads)?;
        Ok(Database { inner: Arc::new(Inner { engine, olap, config, next_session: AtomicU32::new(1) }) })
    }

    /// A new session (one per client connection).
    pub fn session(&self) -> Session {
        let id = self.inner.next_session.fetch_add(1, Ordering::Relaxed);
        Session::new(self.clone(), id)
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.inner.engine
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }
}
