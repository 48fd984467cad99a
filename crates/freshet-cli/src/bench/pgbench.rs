//! pgbench against PostgreSQL 15 and Freshet, side by side in one run.
//!
//! Workloads: `select-only` (pgbench -S) and `tpcb` (pgbench's default TPC-B-like script:
//! BEGIN; three UPDATEs, a SELECT and an INSERT; END). Both run with `-M prepared`. Both
//! systems are loaded by `pgbench -i` itself. PostgreSQL runs from Debian's packages in a
//! throw-away cluster. `--durability memory` compares memory speeds (Freshet --in-memory;
//! for `tpcb`, PostgreSQL with `fsync=off` and `synchronous_commit=off`); `--durability
//! durable` compares both systems durable with group commit, then with asynchronous commit
//! (`synchronous_commit=off` on both), and runs Freshet in memory for reference. Data
//! directories live under the system's temporary directory for both. Serialization failures
//! are retried by pgbench (`--max-tries`) and counted; any other failure fails the benchmark.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use super::postgres::{pgbench_path, run_cmd, FreshetServer, Postgres};
use super::report::{machine, print_table, write_json};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    SelectOnly,
    Tpcb,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Durability {
    Memory,
    Durable,
}

#[derive(clap::Args)]
pub struct PgbenchArgs {
    /// The pgbench script.
    #[arg(long, value_enum, default_value_t = Workload::SelectOnly)]
    workload: Workload,
    /// pgbench scale factor (100,000 accounts per unit).
    #[arg(long, default_value_t = 10)]
    scale: u32,
    /// Client connections; several values give one run each (e.g. 8,32).
    #[arg(long, value_delimiter = ',', default_values_t = vec![8])]
    clients: Vec<u32>,
    /// pgbench worker threads.
    #[arg(long, default_value_t = 2)]
    jobs: u32,
    /// Seconds per run.
    #[arg(long, default_value_t = 30)]
    duration: u32,
    /// Tries per transaction on serialization failures (pgbench --max-tries).
    #[arg(long, default_value_t = 10)]
    max_tries: u32,
    /// `memory`: Freshet --in-memory (for tpcb, PostgreSQL with fsync=off and
    /// synchronous_commit=off). `durable`: both systems durable with group commit, then both
    /// with asynchronous commit, then Freshet --in-memory for reference.
    #[arg(long, value_enum, default_value_t = Durability::Memory)]
    durability: Durability,
    /// Isolation level of both systems' transactions (default_transaction_isolation, e.g.
    /// "read committed"). Unset, each runs its default: PostgreSQL READ COMMITTED, Freshet
    /// SERIALIZABLE.
    #[arg(long)]
    isolation: Option<String>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// What one pgbench run reported.
#[derive(Debug, Default, Clone)]
struct RunResult {
    clients: u32,
    tps: f64,
    latency_ms: f64,
    p99_ms: f64,
    transactions: u64,
    failed: u64,
    serialization_failures: u64,
    retried: u64,
}

fn number_after(line: &str, prefix: &str) -> Option<f64> {
    line.strip_prefix(prefix)?.split_whitespace().next()?.split('/').next()?.parse().ok()
}

fn parse_output(out: &str, clients: u32) -> anyhow::Result<RunResult> {
    let mut r = RunResult { clients, ..RunResult::default() };
    for line in out.lines().map(str::trim) {
        if let Some(v) = number_after(line, "tps = ") {
            r.tps = v;
        } else if let Some(v) = number_after(line, "latency average = ") {
            r.latency_ms = v;
        } else if let Some(v) = number_after(line, "number of failed transactions: ") {
            r.failed = v as u64;
        } else if let Some(v) = number_after(line, "number of serialization failures: ") {
            r.serialization_failures = v as u64;
        } else if let Some(v) = number_after(line, "number of transactions retried: ") {
            r.retried = v as u64;
        } else if let Some(v) = number_after(line, "number of transactions actually processed: ") {
            r.transactions = v as u64;
        }
    }
    anyhow::ensure!(r.tps > 0.0, "pgbench printed no tps:\n{out}");
    Ok(r)
}

/// The 99th percentile of the per-transaction latencies pgbench logged (`-l`).
fn p99_from_logs(dir: &Path) -> anyhow::Result<f64> {
    let mut latencies: Vec<u64> = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let text = std::fs::read_to_string(entry?.path())?;
        // client_id transaction_no time script_no time_epoch time_us [...]; time in µs
        latencies.extend(text.lines().filter_map(|l| l.split_whitespace().nth(2)?.parse::<u64>().ok()));
    }
    anyhow::ensure!(!latencies.is_empty(), "pgbench logged no transactions");
    latencies.sort_unstable();
    Ok(latencies[(latencies.len() * 99 / 100).min(latencies.len() - 1)] as f64 / 1000.0)
}

fn pgbench_run(port: u16, user: &str, db: &str, args: &PgbenchArgs, clients: u32) -> anyhow::Result<RunResult> {
    let logs = std::env::temp_dir().join(format!("freshet-pgbench-logs-{}-{port}-{clients}", std::process::id()));
    let _ = std::fs::remove_dir_all(&logs);
    std::fs::create_dir_all(&logs)?;
    let mut cmd = Command::new(pgbench_path());
    cmd.args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", user, "-M", "prepared", "-n"])
        .args(["-c", &clients.to_string(), "-j", &args.jobs.to_string(), "-T", &args.duration.to_string()])
        .args(["--max-tries", &args.max_tries.to_string(), "--failures-detailed", "-l"])
        .arg(format!("--log-prefix={}", logs.join("log").display()));
    if args.workload == Workload::SelectOnly {
        cmd.arg("-S");
    }
    if let Some(level) = &args.isolation {
        cmd.env("PGOPTIONS", format!("-c default_transaction_isolation={}", level.replace(' ', "\\ ")));
    }
    let out = run_cmd(cmd.arg(db))?;
    let mut r = parse_output(&out, clients)?;
    r.p99_ms = p99_from_logs(&logs)?;
    let _ = std::fs::remove_dir_all(&logs);
    Ok(r)
}

fn pgbench_init(port: u16, user: &str, db: &str, scale: u32) -> anyhow::Result<()> {
    run_cmd(Command::new(pgbench_path()).args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", user, "-i", "-q", "-s", &scale.to_string(), db]))?;
    Ok(())
}

/// How both systems keep their data in one comparison.
struct Setup {
    label: &'static str,
    /// PostgreSQL's settings, or `None` for a Freshet-only run.
    postgres: Option<Vec<&'static str>>,
    /// Whether Freshet keeps a data directory, and its extra arguments.
    freshet_durable: bool,
    freshet_args: Vec<&'static str>,
}

fn setups(args: &PgbenchArgs) -> Vec<Setup> {
    let base = vec!["shared_buffers=1GB", "max_connections=200"];
    let with = |extra: &[&'static str]| base.iter().chain(extra).copied().collect::<Vec<_>>();
    match (args.durability, args.workload) {
        (Durability::Memory, Workload::SelectOnly) => {
            vec![Setup { label: "in memory", postgres: Some(base.clone()), freshet_durable: false, freshet_args: vec![] }]
        }
        (Durability::Memory, Workload::Tpcb) => vec![Setup {
            label: "memory speed (PostgreSQL: fsync=off, synchronous_commit=off; Freshet: --in-memory)",
            postgres: Some(with(&["fsync=off", "synchronous_commit=off", "full_page_writes=off"])),
            freshet_durable: false,
            freshet_args: vec![],
        }],
        (Durability::Durable, _) => vec![
            Setup {
                label: "durable: group commit (both systems' defaults)",
                postgres: Some(base.clone()),
                freshet_durable: true,
                freshet_args: vec![],
            },
            Setup {
                label: "asynchronous commit (synchronous_commit=off on both)",
                postgres: Some(with(&["synchronous_commit=off"])),
                freshet_durable: true,
                freshet_args: vec!["--synchronous-commit", "off"],
            },
            Setup { label: "Freshet --in-memory (reference)", postgres: None, freshet_durable: false, freshet_args: vec![] },
        ],
    }
}

fn run_postgres(args: &PgbenchArgs, settings: &[&str], clients: u32) -> anyhow::Result<RunResult> {
    println!("PostgreSQL 15: pgbench -i -s {}, then {} clients for {} s …", args.scale, clients, args.duration);
    let pg = Postgres::start(settings)?;
    pgbench_init(pg.port, "postgres", "postgres", args.scale)?;
    pgbench_run(pg.port, "postgres", "postgres", args, clients)
}

fn run_freshet(args: &PgbenchArgs, setup: &Setup, clients: u32) -> anyhow::Result<RunResult> {
    println!("Freshet: pgbench -i -s {}, then {} clients for {} s …", args.scale, clients, args.duration);
    let server = if setup.freshet_durable {
        FreshetServer::durable(&setup.freshet_args)?
    } else {
        FreshetServer::in_memory(&setup.freshet_args)?
    };
    pgbench_init(server.port, "bench", "freshet", args.scale)?;
    pgbench_run(server.port, "bench", "freshet", args, clients)
}

pub fn run(args: PgbenchArgs) -> anyhow::Result<()> {
    let name = match args.workload {
        Workload::SelectOnly => "select-only (-S)",
        Workload::Tpcb => "TPC-B-like (default script)",
    };
    // (setup, clients, PostgreSQL's result, Freshet's result)
    let mut runs: Vec<(&Setup, u32, Option<RunResult>, RunResult)> = Vec::new();
    let all = setups(&args);
    for setup in &all {
        println!("== {}", setup.label);
        for &clients in &args.clients {
            let pg = match &setup.postgres {
                Some(settings) => Some(run_postgres(&args, settings, clients)?),
                None => None,
            };
            let fr = run_freshet(&args, setup, clients)?;
            runs.push((setup, clients, pg, fr));
        }
    }
    println!();
    let isolation = match &args.isolation {
        Some(level) => format!("isolation {level} on both"),
        None => "default isolation (PostgreSQL read committed, Freshet serializable)".to_string(),
    };
    println!(
        "pgbench {name}, -M prepared, scale {}, {} threads, {} s per run, --max-tries {}, {isolation} (same machine, one run)",
        args.scale, args.jobs, args.duration, args.max_tries
    );
    let row = |setup: &str, system: &str, r: &RunResult| {
        vec![
            setup.to_string(),
            system.to_string(),
            r.clients.to_string(),
            format!("{:.0}", r.tps),
            format!("{:.3}", r.latency_ms),
            format!("{:.3}", r.p99_ms),
            r.transactions.to_string(),
            r.serialization_failures.to_string(),
            r.retried.to_string(),
            r.failed.to_string(),
        ]
    };
    let mut rows = Vec::new();
    for (setup, _, pg, fr) in &runs {
        let short = setup.label.split(':').next().unwrap_or(setup.label).split(" (").next().unwrap_or(setup.label);
        if let Some(p) = pg {
            rows.push(row(short, "PostgreSQL 15", p));
        }
        rows.push(row(short, "Freshet", fr));
    }
    print_table(
        &["setup", "system", "clients", "tps", "lat avg ms", "lat p99 ms", "transactions", "serialization failures", "retried", "failed"],
        &rows,
    );
    let mut ratios = Vec::new();
    for (setup, clients, pg, fr) in &runs {
        if let Some(p) = pg {
            let ratio = fr.tps / p.tps;
            println!("{} — {clients} clients: Freshet / PostgreSQL tps = {ratio:.2}x", setup.label);
            ratios.push(json!({ "setup": setup.label, "clients": clients, "freshet_over_postgres_tps": ratio }));
        }
    }
    if args.durability == Durability::Durable {
        // Asynchronous commit against no log at all, per client count.
        for &clients in &args.clients {
            let tps = |label_start: &str| {
                runs.iter().find(|(s, c, _, _)| *c == clients && s.label.starts_with(label_start)).map(|(_, _, _, f)| f.tps)
            };
            if let (Some(asynchronous), Some(memory)) = (tps("asynchronous"), tps("Freshet --in-memory")) {
                let ratio = asynchronous / memory;
                println!("{clients} clients: Freshet asynchronous commit / --in-memory tps = {ratio:.2}");
                ratios.push(json!({ "clients": clients, "freshet_async_over_in_memory_tps": ratio }));
            }
        }
    }
    let to_json = |r: &RunResult| {
        json!({
            "clients": r.clients, "tps": r.tps, "latency_avg_ms": r.latency_ms, "latency_p99_ms": r.p99_ms,
            "transactions": r.transactions, "serialization_failures": r.serialization_failures,
            "retried": r.retried, "failed": r.failed,
        })
    };
    write_json(
        args.json.as_deref(),
        &json!({
            "suite": "pgbench", "workload": name, "scale": args.scale, "jobs": args.jobs, "duration_s": args.duration,
            "max_tries": args.max_tries, "isolation": args.isolation, "machine": machine(),
            "runs": runs.iter().map(|(s, _, p, f)| json!({
                "setup": s.label, "postgres": p.as_ref().map(to_json), "freshet": to_json(f),
            })).collect::<Vec<_>>(),
            "ratios": ratios,
        }),
    )?;
    let unexplained: u64 = runs
        .iter()
        .flat_map(|(_, _, p, f)| p.iter().chain(std::iter::once(f)))
        .map(|r| r.failed.saturating_sub(r.serialization_failures))
        .sum();
    anyhow::ensure!(unexplained == 0, "{unexplained} transactions failed for reasons other than serialization failures");
    Ok(())
}
