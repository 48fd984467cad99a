//! `freshet bench <suite>`: benchmarks that run Freshet side by side with the system a user
//! would pick instead, in one run on the same machine, and print both figures and their ratio.
//!
//! Suites:
//! - `pgbench`: pgbench's select-only or TPC-B-like workload against PostgreSQL and against
//!   Freshet, at memory speed or durable (group commit, then asynchronous commit);
//! - `scan`: `SELECT count(*), sum(x) FROM t WHERE y > c` over 10 million rows in Freshet and
//!   in DuckDB;
//! - `cursors`: a result read in parts through a cursor (`DECLARE`, `FETCH FORWARD n`) over the
//!   wire, against PostgreSQL;
//! - `snapshot`: snapshot creation time against database size (copy-on-write, fork, fork with
//!   huge pages), OLTP throughput under periodic snapshots, memory a snapshot holds;
//! - `durability`: log replay rate at recovery, checkpoint time, and throughput while
//!   checkpoints run;
//! - `tpcc`: TPC-C's five transactions in the standard mix against Freshet (over the wire or
//!   embedded) and PostgreSQL, with the consistency conditions checked after each run;
//! - `ch`: the CH-benCHmark: TPC-C plus analytical streams running the 22 CH queries and
//!   HyPer's top-10 query, with DuckDB running the same queries on the same data, and every
//!   system's answers compared.
//!
//! Every suite installs what it needs (PostgreSQL from Debian's packages, DuckDB from PyPI)
//! and can write its results as JSON (`--json PATH`).

mod chart;
mod cursors;
mod durability;
mod pgbench;
mod postgres;
mod report;
mod scan;
mod snapshot;
mod tpcc;

use clap::Subcommand;

#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    suite: Suite,
}

#[derive(Subcommand)]
enum Suite {
    /// pgbench (select-only or TPC-B-like, -M prepared) against PostgreSQL 15 and Freshet.
    Pgbench(pgbench::PgbenchArgs),
    /// Log replay rate, checkpoint time, and throughput during checkpoints.
    Durability(durability::DurabilityArgs),
    /// A filtered aggregate over a 10M-row table in Freshet and DuckDB.
    Scan(scan::ScanArgs),
    /// A result read in parts through a cursor, against PostgreSQL 15.
    Cursors(cursors::CursorsArgs),
    /// Snapshot creation time, OLTP throughput under periodic snapshots, snapshot memory.
    Snapshot(snapshot::SnapshotArgs),
    /// TPC-C (standard mix, no think time) against Freshet and PostgreSQL 15.
    Tpcc(tpcc::TpccArgs),
    /// CH-benCHmark: TPC-C plus analytical streams; DuckDB runs the same queries.
    Ch(tpcc::ChArgs),
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.suite {
        Suite::Pgbench(a) => pgbench::run(a),
        Suite::Scan(a) => scan::run(a),
        Suite::Cursors(a) => cursors::run(a),
        Suite::Durability(a) => durability::run(a),
        Suite::Snapshot(a) => snapshot::run(a),
        Suite::Tpcc(a) => tpcc::run_tpcc(a),
        Suite::Ch(a) => tpcc::run_ch(a),
    }
}
