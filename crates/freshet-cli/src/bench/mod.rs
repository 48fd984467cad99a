//! `freshet bench <suite>`: benchmarks that run Freshet side by side with the system a user
//! would pick instead, in one run on the same machine, and print both figures and their ratio.
//!
//! Suites:
//! - `pgbench`: pgbench's select-only workload against PostgreSQL and against Freshet;
//! - `scan`: `SELECT count(*), sum(x) FROM t WHERE y > c` over 10 million rows in Freshet and
//!   in DuckDB.
//!
//! Every suite installs what it needs (PostgreSQL from Debian's packages, DuckDB from PyPI)
//! and can write its results as JSON (`--json PATH`).

mod pgbench;
mod postgres;
mod report;
mod scan;

use clap::Subcommand;

#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    suite: Suite,
}

#[derive(Subcommand)]
enum Suite {
    /// pgbench select-only (-S -M prepared) against PostgreSQL 15 and Freshet.
    Pgbench(pgbench::PgbenchArgs),
    /// A filtered aggregate over a 10M-row table in Freshet and DuckDB.
    Scan(scan::ScanArgs),
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.suite {
        Suite::Pgbench(a) => pgbench::run(a),
        Suite::Scan(a) => scan::run(a),
    }
}
