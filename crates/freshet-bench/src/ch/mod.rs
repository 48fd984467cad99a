//! The CH-benCHmark's analytical side: its queries ([`queries`]), run once to check answers
//! across systems ([`answers`], [`run_once`]) and in loops by analytical streams during a
//! TPC-C run (`tpcc::run`).

pub mod answers;
pub mod queries;

use std::time::Instant;

use crate::conn::{Conn, DbResult};
use crate::target::ConnJob;

/// One query's answer (or error) and time from a single run.
pub struct QueryAnswer {
    pub name: String,
    pub result: Result<answers::Answer, String>,
    pub ms: f64,
}

/// Runs each query once, in order, and collects canonical answers.
pub struct RunOnce {
    pub queries: Vec<(String, String)>,
}

impl ConnJob for RunOnce {
    type Output = Vec<QueryAnswer>;
    async fn run<C: Conn>(self, mut conn: C) -> DbResult<Vec<QueryAnswer>> {
        let mut out = Vec::new();
        for (name, sql) in self.queries {
            let start = Instant::now();
            let result = conn.simple(&sql).await.map(|rows| answers::canonical(&rows)).map_err(|e| e.to_string());
            out.push(QueryAnswer { name, result, ms: start.elapsed().as_secs_f64() * 1e3 });
        }
        Ok(out)
    }
}

/// Runs the consistency conditions (a [`ConnJob`] wrapper for [`crate::tpcc::consistency::check`]).
pub struct Consistency {
    pub warehouses: i64,
}

impl ConnJob for Consistency {
    type Output = Vec<crate::tpcc::consistency::ConditionResult>;
    async fn run<C: Conn>(self, mut conn: C) -> DbResult<Self::Output> {
        crate::tpcc::consistency::check(&mut conn, self.warehouses).await
    }
}
