//! pgbench's select-only workload (`-S -M prepared`) against PostgreSQL 15 and Freshet.
//!
//! PostgreSQL is initialised by `pgbench -i`. Freshet gets the same four tables with the same
//! DDL and the same rows, loaded by Freshet's own means (INSERT … SELECT over
//! generate_series, then ALTER TABLE … ADD PRIMARY KEY): pgbench's own initialisation wraps
//! its load in BEGIN/COMMIT, which this version does not run yet.

use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;
use serde_json::json;

use super::postgres::{pgbench_path, run_cmd, FreshetServer, Postgres};
use super::report::{machine, print_table, write_json};

#[derive(clap::Args)]
pub struct PgbenchArgs {
    /// pgbench scale factor (100,000 accounts per unit).
    #[arg(long, default_value_t = 10)]
    scale: u32,
    /// Client connections.
    #[arg(long, default_value_t = 8)]
    clients: u32,
    /// pgbench worker threads.
    #[arg(long, default_value_t = 2)]
    jobs: u32,
    /// Seconds per run.
    #[arg(long, default_value_t = 30)]
    duration: u32,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// What one pgbench run reported.
#[derive(Debug, Default, Clone)]
struct PgbenchResult {
    tps: f64,
    latency_ms: f64,
    failed: u64,
    transactions: u64,
}

fn parse_output(out: &str) -> anyhow::Result<PgbenchResult> {
    let mut r = PgbenchResult::default();
    for line in out.lines() {
        let line = line.trim();
        if let Some(v) = line.strip_prefix("tps = ") {
            r.tps = v.split_whitespace().next().unwrap_or("0").parse()?;
        } else if let Some(v) = line.strip_prefix("latency average = ") {
            r.latency_ms = v.split_whitespace().next().unwrap_or("0").parse()?;
        } else if let Some(v) = line.strip_prefix("number of failed transactions: ") {
            r.failed = v.split_whitespace().next().unwrap_or("0").parse()?;
        } else if let Some(v) = line.strip_prefix("number of transactions actually processed: ") {
            r.transactions = v.split(['/', ' ']).next().unwrap_or("0").parse()?;
        }
    }
    anyhow::ensure!(r.tps > 0.0, "pgbench printed no tps:\n{out}");
    Ok(r)
}

fn pgbench(port: u16, user: &str, db: &str, args: &PgbenchArgs) -> anyhow::Result<PgbenchResult> {
    let out = run_cmd(Command::new(pgbench_path()).args([
        "-h",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-U",
        user,
        "-S",
        "-M",
        "prepared",
        "-n",
        "-c",
        &args.clients.to_string(),
        "-j",
        &args.jobs.to_string(),
        "-T",
        &args.duration.to_string(),
        db,
    ]))?;
    parse_output(&out)
}

fn run_postgres(args: &PgbenchArgs) -> anyhow::Result<PgbenchResult> {
    println!("PostgreSQL 15: initialising scale {} …", args.scale);
    let pg = Postgres::start(&["shared_buffers=1GB", "max_connections=200"])?;
    run_cmd(Command::new(pgbench_path()).args(["-h", "127.0.0.1", "-p", &pg.port.to_string(), "-U", "postgres", "-i", "-q", "-s", &args.scale.to_string(), "postgres"]))?;
    println!("PostgreSQL 15: running pgbench -S for {} s …", args.duration);
    pgbench(pg.port, "postgres", "postgres", args)
}

/// The pgbench tables and rows, as `pgbench -i` creates them.
fn load_statements(scale: u32) -> Vec<String> {
    let s = scale as u64;
    vec![
        "CREATE TABLE pgbench_history (tid INT, bid INT, aid INT, delta INT, mtime TIMESTAMP, filler CHAR(22))".into(),
        "CREATE TABLE pgbench_tellers (tid INT NOT NULL, bid INT, tbalance INT, filler CHAR(84)) WITH (fillfactor=100)".into(),
        "CREATE TABLE pgbench_accounts (aid INT NOT NULL, bid INT, abalance INT, filler CHAR(84)) WITH (fillfactor=100)".into(),
        "CREATE TABLE pgbench_branches (bid INT NOT NULL, bbalance INT, filler CHAR(88)) WITH (fillfactor=100)".into(),
        format!("INSERT INTO pgbench_branches (bid, bbalance, filler) SELECT value, 0, '' FROM generate_series(1, {s})"),
        format!("INSERT INTO pgbench_tellers (tid, bid, tbalance, filler) SELECT value, (value - 1) / 10 + 1, 0, '' FROM generate_series(1, {})", 10 * s),
        format!(
            "INSERT INTO pgbench_accounts (aid, bid, abalance, filler) SELECT value, (value - 1) / 100000 + 1, 0, '' FROM generate_series(1, {})",
            100_000 * s
        ),
        "ALTER TABLE pgbench_branches ADD PRIMARY KEY (bid)".into(),
        "ALTER TABLE pgbench_tellers ADD PRIMARY KEY (tid)".into(),
        "ALTER TABLE pgbench_accounts ADD PRIMARY KEY (aid)".into(),
    ]
}

fn run_freshet(args: &PgbenchArgs) -> anyhow::Result<PgbenchResult> {
    println!("Freshet: loading scale {} …", args.scale);
    let server = FreshetServer::start(&[])?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let url = format!("host=127.0.0.1 port={} user=bench dbname=freshet", server.port);
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
        tokio::spawn(conn);
        for sql in load_statements(args.scale) {
            client.batch_execute(&sql).await.with_context(|| format!("loading: {sql}"))?;
        }
        let n: i64 = client.query_one("SELECT count(*) FROM pgbench_accounts", &[]).await?.get(0);
        anyhow::ensure!(n == 100_000 * args.scale as i64, "loaded {n} accounts");
        Ok::<_, anyhow::Error>(())
    })?;
    println!("Freshet: running pgbench -S for {} s …", args.duration);
    pgbench(server.port, "bench", "freshet", args)
}

pub fn run(args: PgbenchArgs) -> anyhow::Result<()> {
    let pg = run_postgres(&args)?;
    let fr = run_freshet(&args)?;
    println!();
    println!(
        "pgbench -S -M prepared, scale {}, {} clients, {} threads, {} s (same machine, one run)",
        args.scale, args.clients, args.jobs, args.duration
    );
    let row = |name: &str, r: &PgbenchResult| {
        vec![name.to_string(), format!("{:.0}", r.tps), format!("{:.3}", r.latency_ms), r.transactions.to_string(), r.failed.to_string()]
    };
    print_table(&["system", "tps", "latency avg ms", "transactions", "failed"], &[row("PostgreSQL 15", &pg), row("Freshet", &fr)]);
    let ratio = fr.tps / pg.tps;
    println!("Freshet / PostgreSQL tps: {ratio:.2}x (target >= 1.5x)");
    let to_json = |r: &PgbenchResult| json!({ "tps": r.tps, "latency_avg_ms": r.latency_ms, "transactions": r.transactions, "failed": r.failed });
    write_json(
        args.json.as_deref(),
        &json!({
            "suite": "pgbench-select-only",
            "scale": args.scale, "clients": args.clients, "jobs": args.jobs, "duration_s": args.duration,
            "machine": machine(),
            "postgres": to_json(&pg), "freshet": to_json(&fr), "ratio_tps": ratio,
        }),
    )
}
