//! Benchmark workloads that both `freshet bench` and the integration tests use.
//!
//! - [`tpcc`]: TPC-C — schema, a deterministic data generator and parallel loader, the five
//!   transactions behind the [`tpcc::TpccDriver`] trait, terminals in the standard mix, timed
//!   runs with latency histograms, and the consistency conditions 1–4;
//! - [`ch`]: the CH-benCHmark's 22 analytical queries and HyPer's top-10-customers query, and
//!   the comparison of answers across systems;
//! - [`conn`] and [`target`]: one statement-level connection interface, in-process through
//!   `freshet::Session` or over the PostgreSQL protocol with tokio-postgres, so every workload
//!   is written once and runs on Freshet (embedded or over the wire) and on PostgreSQL.
//!
//! Not here: starting servers and installing other systems (that is the `freshet` binary's
//! job), stored-procedure drivers (they come with stored procedures).

pub mod ch;
pub mod conn;
pub mod target;
pub mod tpcc;
