//! What durability costs Freshet beyond commit latency: the rate at which recovery replays the
//! log, the time to checkpoint a large database, and OLTP throughput while a checkpoint runs.
//!
//! 1. Replay: a server with asynchronous commit and no automatic checkpoints is loaded by
//!    `pgbench -i` and runs pgbench's TPC-B-like script; it is killed with SIGKILL and started
//!    again; the figures are those recovery logs (records and row changes per second).
//! 2. Checkpoint: a server loaded by `pgbench -i -s SCALE` (scale 100 is about 1 GB in
//!    checkpoint files) runs CHECKPOINT, timed by the client; the size is what it wrote.
//! 3. Throughput during checkpoints: the TPC-B-like script for DURATION seconds, once alone and
//!    once while another client runs CHECKPOINT after CHECKPOINT; the ratio of the two.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use super::postgres::{pgbench_path, run_cmd, FreshetServer};
use super::report::{machine, print_table, write_json};

#[derive(clap::Args)]
pub struct DurabilityArgs {
    /// pgbench scale of the database that is checkpointed (100 ≈ 1 GB of checkpoint files).
    #[arg(long, default_value_t = 100)]
    checkpoint_scale: u32,
    /// pgbench scale of the database whose log is replayed.
    #[arg(long, default_value_t = 10)]
    replay_scale: u32,
    /// Seconds of TPC-B-like load that fill the log to replay, and per throughput run.
    #[arg(long, default_value_t = 30)]
    duration: u32,
    /// pgbench clients.
    #[arg(long, default_value_t = 8)]
    clients: u32,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

fn pgbench(port: u16, extra: &[&str]) -> anyhow::Result<String> {
    run_cmd(Command::new(pgbench_path()).args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "bench"]).args(extra).arg("freshet"))
}

fn tps(out: &str) -> anyhow::Result<f64> {
    out.lines()
        .find_map(|l| l.trim().strip_prefix("tps = ")?.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("pgbench printed no tps:\n{out}"))
}

fn psql(port: u16, sql: &str) -> anyhow::Result<String> {
    run_cmd(Command::new("psql").args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "bench", "-d", "freshet", "-At", "-c", sql]))
}

/// The number after `key=` in the last line of `log` that contains `message`.
fn logged(log: &str, message: &str, key: &str) -> Option<f64> {
    let line = log.lines().rev().find(|l| l.contains(message))?;
    let at = line.find(&format!(" {key}="))? + key.len() + 2;
    line[at..].split_whitespace().next()?.parse().ok()
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => dir_bytes(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

pub fn run(args: DurabilityArgs) -> anyhow::Result<()> {
    super::postgres::ensure_installed()?;
    let clients = args.clients.to_string();
    let duration = args.duration.to_string();
    let tpcb = ["-M", "prepared", "-n", "-c", &clients, "-j", "2", "-T", &duration, "--max-tries", "10"];

    // 1. Replay.
    println!("replay: pgbench -i -s {}, CHECKPOINT, {} s of TPC-B-like load with asynchronous commit, SIGKILL, restart …", args.replay_scale, args.duration);
    let no_checkpoints = ["--synchronous-commit", "off", "--checkpoint-mb", "1000000", "--checkpoint-seconds", "1000000"];
    let server = FreshetServer::durable(&no_checkpoints)?;
    pgbench(server.port, &["-i", "-q", "-s", &args.replay_scale.to_string()])?;
    // The initial load goes into a checkpoint, so that what is replayed is the log of the
    // transactions (the load itself is a handful of records of a million rows).
    psql(server.port, "CHECKPOINT")?;
    let load_tps = tps(&pgbench(server.port, &tpcb)?)?;
    let dir = server.crash().ok_or_else(|| anyhow::anyhow!("the server had no data directory"))?;
    let log_bytes = dir_bytes(&dir.join("wal"));
    let started = Instant::now();
    let server = FreshetServer::reopen(dir, &no_checkpoints)?;
    let restart_seconds = started.elapsed().as_secs_f64();
    let log = server.log();
    let get = |key: &str| logged(&log, "recovery finished", key).unwrap_or(f64::NAN);
    let replay = json!({
        "load_tps": load_tps,
        "log_megabytes": log_bytes as f64 / 1e6,
        "records": get("records"),
        "row_changes": get("changes"),
        "replay_seconds": get("replay_seconds"),
        "index_rebuild_seconds": get("rebuild_seconds"),
        "records_per_second": get("records_per_second"),
        "row_changes_per_second": get("changes_per_second"),
        "restart_seconds": restart_seconds,
    });
    drop(server);

    // 2. and 3. Checkpoint time, and throughput with and without checkpoints running.
    println!("checkpoint: pgbench -i -s {} on a durable server, CHECKPOINT …", args.checkpoint_scale);
    let server = FreshetServer::durable(&["--checkpoint-mb", "1000000", "--checkpoint-seconds", "1000000"])?;
    pgbench(server.port, &["-i", "-q", "-s", &args.checkpoint_scale.to_string()])?;
    let started = Instant::now();
    psql(server.port, "CHECKPOINT")?;
    let checkpoint_seconds = started.elapsed().as_secs_f64();
    let data_dir = server.data_dir.clone().unwrap_or_default();
    let checkpoint_bytes = std::fs::read_dir(data_dir.join("checkpoints"))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .max()
        .map_or(0, |newest| dir_bytes(&newest));
    println!("throughput: {} s of TPC-B-like load alone, then {} s with CHECKPOINT after CHECKPOINT …", args.duration, args.duration);
    let alone = tps(&pgbench(server.port, &tpcb)?)?;
    let running = Arc::new(AtomicBool::new(true));
    let checkpointer = {
        let (running, port) = (running.clone(), server.port);
        std::thread::spawn(move || -> anyhow::Result<u32> {
            let mut n = 0;
            while running.load(Ordering::Relaxed) {
                psql(port, "CHECKPOINT")?;
                n += 1;
            }
            Ok(n)
        })
    };
    let during = tps(&pgbench(server.port, &tpcb)?)?;
    running.store(false, Ordering::Relaxed);
    let checkpoints_during = checkpointer.join().map_err(|_| anyhow::anyhow!("the checkpoint client panicked"))??;
    drop(server);

    println!();
    println!("Freshet durability costs (same machine, one run; pgbench -M prepared, {} clients)", args.clients);
    let f = |v: &serde_json::Value| v.as_f64().map_or("?".into(), |x| format!("{x:.2}"));
    print_table(
        &["measure", "value", "target"],
        &[
            vec!["log replay: records/s".into(), f(&replay["records_per_second"]), "≥ 1,000,000".into()],
            vec!["log replay: row changes/s".into(), f(&replay["row_changes_per_second"]), String::new()],
            vec!["log replayed: records / MB".into(), format!("{} / {}", f(&replay["records"]), f(&replay["log_megabytes"])), String::new()],
            vec!["log replay, s".into(), f(&replay["replay_seconds"]), String::new()],
            vec!["index rebuild after replay, s".into(), f(&replay["index_rebuild_seconds"]), String::new()],
            vec!["restart until serving, s".into(), format!("{restart_seconds:.2}"), String::new()],
            vec![format!("checkpoint of scale {}: seconds", args.checkpoint_scale), format!("{checkpoint_seconds:.2}"), "≤ 10 for 1 GB".into()],
            vec!["checkpoint size, MB".into(), format!("{:.0}", checkpoint_bytes as f64 / 1e6), String::new()],
            vec!["tps without checkpoints".into(), format!("{alone:.0}"), String::new()],
            vec![format!("tps during {checkpoints_during} checkpoints"), format!("{during:.0}"), String::new()],
            vec!["tps during / without".into(), format!("{:.2}", during / alone), "≥ 0.90".into()],
        ],
    );
    write_json(
        args.json.as_deref(),
        &json!({
            "suite": "durability", "machine": machine(), "clients": args.clients, "duration_s": args.duration,
            "replay": replay,
            "checkpoint": {
                "scale": args.checkpoint_scale, "seconds": checkpoint_seconds, "megabytes": checkpoint_bytes as f64 / 1e6,
                "tps_alone": alone, "tps_during_checkpoints": during, "checkpoints_during": checkpoints_during,
                "ratio": during / alone,
            },
        }),
    )?;
    Ok(())
}
