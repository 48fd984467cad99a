//! Snapshot experiments (HyPer §5.4.1, seed 002 §1–2), embedded, in one run:
//! 1. snapshot creation time against database size, copy-on-write and fork mode (with 4 KiB
//!    pages and with transparent huge pages), next to a bare fork() of the same process;
//! 2. OLTP throughput while a fresh snapshot is taken every 10 ms … 10 s with an analytical
//!    query on it, both modes, relative to no snapshots;
//! 3. memory one snapshot costs after N updates, both modes.
//!
//! Each result is printed as a table and drawn as an SVG chart; `--json` writes them all.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use freshet::{Config, Database, Session, Value};
use serde_json::{json, Value as Json};

use super::chart::{line_chart, Series};
use super::report::{machine, median, print_table, write_json};

#[derive(clap::Args)]
pub struct SnapshotArgs {
    /// Database sizes (GiB of column data) at which snapshot creation is timed.
    #[arg(long, value_delimiter = ',', default_value = "0.5,1,4,8")]
    sizes: Vec<f64>,
    /// Snapshot intervals, in milliseconds, for the throughput experiment.
    #[arg(long, value_delimiter = ',', default_value = "10,100,1000,10000")]
    intervals: Vec<u64>,
    /// Seconds of OLTP per configuration of the throughput experiment.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// OLTP client threads.
    #[arg(long, default_value_t = 2)]
    clients: usize,
    /// Rows of the accounts table (throughput and memory experiments).
    #[arg(long, default_value_t = 1_000_000)]
    accounts: u64,
    /// Update counts for the memory experiment.
    #[arg(long, value_delimiter = ',', default_value = "10000,100000,1000000")]
    updates: Vec<u64>,
    /// Timed snapshots per size and mode.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Which experiments to run: `creation`, `throughput`, `memory` (default: all three).
    #[arg(long, value_delimiter = ',', default_value = "creation,throughput,memory")]
    only: Vec<String>,
    /// Skip the huge-page run of the creation experiment.
    #[arg(long)]
    no_huge_pages: bool,
    /// Run only the huge-page run of the creation experiment.
    #[arg(long)]
    huge_pages_only: bool,
    /// Directory for the charts.
    #[arg(long, default_value = "snapshot-bench")]
    charts: PathBuf,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Internal: only the creation experiment, results as JSON on stdout (the huge-page run
    /// is this program again with huge pages enabled in the allocator).
    #[arg(long, hide = true)]
    creation_only: bool,
}

fn sql(s: &mut Session, q: &str) -> anyhow::Result<Vec<freshet::QueryResult>> {
    s.execute_blocking(q).map_err(|e| anyhow!("{q}: {e}"))
}

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()).unwrap_or(0) * 4096
}

fn anon_huge_bytes() -> u64 {
    let text = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with("AnonHugePages:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

const GIB: f64 = (1u64 << 30) as f64;

/// Experiment 1, in this process: grows a table to each size and times snapshots there.
fn creation(args: &SnapshotArgs) -> anyhow::Result<Vec<Json>> {
    let db = Database::open(Config::default()).map_err(|e| anyhow!("{e}"))?;
    let mut s = db.session();
    sql(&mut s, "CREATE TABLE wide (a BIGINT, b BIGINT, c BIGINT, d BIGINT, e BIGINT, f BIGINT, g BIGINT, h BIGINT)")?;
    let mut loaded: u64 = 0;
    let mut out = Vec::new();
    let mut sizes = args.sizes.clone();
    sizes.sort_by(|a, b| a.total_cmp(b));
    for size in sizes {
        let load = Instant::now();
        let data_bytes = || db.snapshot().map(|s| s.memory().shared_bytes).unwrap_or(0);
        while (data_bytes() as f64) < size * GIB {
            let n = 1_000_000;
            sql(&mut s, &format!("INSERT INTO wide SELECT value, value + 1, value + 2, value + 3, value + 4, value + 5, value + 6, value + 7 FROM generate_series({}, {})", loaded + 1, loaded + n))?;
            loaded += n;
            eprint!("\r  loading: {loaded} rows, {:.2} GiB of column data, {:.2} GiB resident   ", data_bytes() as f64 / GIB, resident_bytes() as f64 / GIB);
        }
        eprintln!("\r  {size} GiB: {loaded} rows, {:.2} GiB resident, loaded in {:.1} s                    ", resident_bytes() as f64 / GIB, load.elapsed().as_secs_f64());
        let (mut cow, mut fork_pause, mut fork_call, mut bare) = (vec![], vec![], vec![], vec![]);
        for _ in 0..args.runs {
            let t = Instant::now();
            let snap = db.snapshot().map_err(|e| anyhow!("{e}"))?;
            cow.push(t.elapsed().as_secs_f64() * 1000.0);
            drop(snap);
            let child = db.fork_snapshot().map_err(|e| anyhow!("{e}"))?;
            fork_pause.push(child.forked.pause.as_secs_f64() * 1000.0);
            fork_call.push(child.forked.fork_time.as_secs_f64() * 1000.0);
            drop(child);
            bare.push(freshet::snapshots::bare_fork_time().map_err(|e| anyhow!("{e}"))?.as_secs_f64() * 1000.0);
        }
        // What a live snapshot costs writers: the same update (every 64th row, so every page
        // of the column is written) with no snapshot, with a copy-on-write snapshot held, and
        // with a fork child alive (the kernel copies each page on its first write).
        let mut write_cost = |state: &str| -> anyhow::Result<f64> {
            let cow = (state == "cow").then(|| db.snapshot()).transpose().map_err(|e| anyhow!("{e}"))?;
            let fork = (state == "fork").then(|| db.fork_snapshot()).transpose().map_err(|e| anyhow!("{e}"))?;
            let t = Instant::now();
            sql(&mut s, "UPDATE wide SET b = b + 1 WHERE a % 64 = 0")?;
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            drop((cow, fork));
            Ok(ms)
        };
        let (mut none_ms, mut cow_ms, mut fork_ms) = (vec![], vec![], vec![]);
        for _ in 0..3 {
            none_ms.push(write_cost("none")?);
            cow_ms.push(write_cost("cow")?);
            fork_ms.push(write_cost("fork")?);
        }
        out.push(json!({
            "update_ms": median(&mut none_ms),
            "update_cow_ms": median(&mut cow_ms),
            "update_fork_ms": median(&mut fork_ms),
            "size_gib": size,
            "data_gib": data_bytes() as f64 / GIB,
            "rows": loaded,
            "resident_gib": resident_bytes() as f64 / GIB,
            "anon_huge_gib": anon_huge_bytes() as f64 / GIB,
            "cow_ms": median(&mut cow),
            "fork_ms": median(&mut fork_pause),
            "fork_call_ms": median(&mut fork_call),
            "bare_fork_ms": median(&mut bare),
        }));
    }
    Ok(out)
}

/// The creation experiment in a child process (so that the memory it grows to does not stay
/// with this process and slow the forks of the other experiments); with `huge_pages`, its
/// allocator asks for transparent huge pages.
fn creation_in_child(args: &SnapshotArgs, huge_pages: bool) -> anyhow::Result<Vec<Json>> {
    let exe = std::env::current_exe()?;
    let sizes: Vec<String> = args.sizes.iter().map(|s| s.to_string()).collect();
    let out = Command::new(exe)
        .args(["bench", "snapshot", "--creation-only", "--runs", &args.runs.to_string(), "--sizes", &sizes.join(",")])
        .env("MIMALLOC_ALLOW_LARGE_OS_PAGES", if huge_pages { "1" } else { "0" })
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running the huge-page creation experiment")?;
    anyhow::ensure!(out.status.success(), "the creation experiment failed");
    Ok(serde_json::from_slice(&out.stdout)?)
}

fn accounts_db(args: &SnapshotArgs) -> anyhow::Result<Database> {
    let db = Database::open(Config::default()).map_err(|e| anyhow!("{e}"))?;
    let mut s = db.session();
    sql(&mut s, "CREATE TABLE accounts (aid INT PRIMARY KEY, bid INT NOT NULL, abalance INT NOT NULL, filler CHAR(84))")?;
    sql(&mut s, "CREATE TABLE history (tid INT, bid INT, aid INT, delta INT, mtime TIMESTAMP, filler CHAR(22))")?;
    sql(&mut s, &format!("INSERT INTO accounts SELECT CAST(value AS INT), CAST(value / 100000 AS INT), 0, '' FROM generate_series(1, {})", args.accounts))?;
    Ok(db)
}

/// pgbench's simple-update transaction (-N) as three autocommit statements.
fn client(db: Database, accounts: u64, seed: u64, stop: Arc<AtomicBool>, done: Arc<AtomicU64>) -> anyhow::Result<()> {
    let mut s = db.session();
    use futures::executor::block_on as block;
    let update = block(s.prepare("UPDATE accounts SET abalance = abalance + $1 WHERE aid = $2", &[])).map_err(|e| anyhow!("{e}"))?;
    let select = block(s.prepare("SELECT abalance FROM accounts WHERE aid = $1", &[])).map_err(|e| anyhow!("{e}"))?;
    let insert = block(s.prepare("INSERT INTO history VALUES (1, 1, $1, $2, now(), '')", &[])).map_err(|e| anyhow!("{e}"))?;
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    while !stop.load(Ordering::Relaxed) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let aid = Value::Int32((x % accounts) as i32 + 1);
        let delta = Value::Int32((x >> 40) as i32 % 10_000 - 5_000);
        block(s.collect(&update, vec![delta.clone(), aid.clone()])).map_err(|e| anyhow!("{e}"))?;
        block(s.collect(&select, vec![aid.clone()])).map_err(|e| anyhow!("{e}"))?;
        block(s.collect(&insert, vec![aid, delta])).map_err(|e| anyhow!("{e}"))?;
        done.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// Runs the OLTP clients for `duration`, with a snapshot and an analytical query every
/// `interval` in `mode` (if any). Returns transactions per second and snapshots taken.
fn oltp_run(db: &Database, args: &SnapshotArgs, snapshots: Option<(&str, Duration)>) -> anyhow::Result<(f64, u64)> {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..args.clients)
        .map(|i| {
            let (db, stop, done, accounts) = (db.clone(), stop.clone(), done.clone(), args.accounts);
            std::thread::spawn(move || client(db, accounts, i as u64 + 1, stop, done))
        })
        .collect();
    let start = Instant::now();
    let end = start + Duration::from_secs(args.duration);
    let mut taken = 0;
    match snapshots {
        None => std::thread::sleep(Duration::from_secs(args.duration)),
        Some((mode, interval)) => {
            let mut s = db.session();
            sql(&mut s, &format!("SET freshet.snapshot_mode = '{mode}'"))?;
            let mut next = start;
            while next < end {
                let now = Instant::now();
                if now < next {
                    std::thread::sleep(next - now);
                }
                sql(&mut s, "SELECT sum(abalance) FROM accounts")?;
                taken += 1;
                next += interval;
            }
        }
    }
    let now = Instant::now();
    if now < end {
        std::thread::sleep(end - now);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let count = done.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().map_err(|_| anyhow!("a client panicked"))??;
    }
    Ok((count as f64 / elapsed, taken))
}

fn random_updates(db: &Database, accounts: u64, n: u64) -> anyhow::Result<()> {
    let mut s = db.session();
    let update = futures::executor::block_on(s.prepare("UPDATE accounts SET abalance = abalance + 1 WHERE aid = $1", &[])).map_err(|e| anyhow!("{e}"))?;
    let mut x: u64 = 88172645463325252;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        futures::executor::block_on(s.collect(&update, vec![Value::Int32((x % accounts) as i32 + 1)])).map_err(|e| anyhow!("{e}"))?;
    }
    Ok(())
}

pub fn run(args: SnapshotArgs) -> anyhow::Result<()> {
    if args.creation_only {
        let rows = creation(&args)?;
        println!("{}", serde_json::to_string(&rows)?);
        return Ok(());
    }
    let wants = |part: &str| args.only.iter().any(|p| p == part);
    let (mut plain, mut huge) = (vec![], vec![]);
    if wants("creation") {
        (plain, huge) = creation_report(&args)?;
    }
    let (mut baselines, mut throughput, mut memory) = (vec![], vec![], vec![]);
    if wants("throughput") || wants("memory") {
        let db = accounts_db(&args)?;
        if wants("throughput") {
            (baselines, throughput) = throughput_report(&args, &db)?;
        }
        if wants("memory") {
            memory = memory_report(&args, &db)?;
        }
    }
    write_json(
        args.json.as_deref(),
        &json!({
            "benchmark": "snapshot",
            "machine": machine(),
            "creation": plain,
            "creation_huge_pages": huge,
            "throughput": { "baselines_tps": baselines, "clients": args.clients, "duration_s": args.duration, "runs": throughput },
            "memory": memory,
        }),
    )
}

/// Experiment 1: prints its tables and draws its chart.
fn creation_report(args: &SnapshotArgs) -> anyhow::Result<(Vec<Json>, Vec<Json>)> {
    println!("== 1. Snapshot creation time against database size (median of {} runs) ==", args.runs);
    let plain = if args.huge_pages_only { vec![] } else { creation_in_child(args, false)? };
    let huge = if args.no_huge_pages { vec![] } else { creation_in_child(args, true)? };
    let field = |rows: &[Json], i: usize, k: &str| rows.get(i).and_then(|r| r[k].as_f64()).unwrap_or(f64::NAN);
    let mut table = Vec::new();
    let base = if plain.is_empty() { &huge } else { &plain };
    for (i, r) in base.iter().enumerate() {
        let size = r["data_gib"].as_f64().unwrap_or(0.0);
        table.push(vec![
            format!("{:.2}", size),
            format!("{:.2}", r["resident_gib"].as_f64().unwrap_or(0.0)),
            format!("{}", r["rows"]),
            format!("{:.3}", field(&plain, i, "cow_ms")),
            format!("{:.3}", field(&plain, i, "cow_ms") / size),
            format!("{:.2}", field(&plain, i, "fork_ms")),
            format!("{:.2}", field(&plain, i, "bare_fork_ms")),
            format!("{:.2}", field(&plain, i, "fork_ms") / field(&plain, i, "bare_fork_ms")),
            format!("{:.2}", field(&huge, i, "fork_ms")),
            format!("{:.2}", field(&huge, i, "bare_fork_ms")),
            format!("{:.2}", field(&huge, i, "anon_huge_gib")),
        ]);
    }
    print_table(
        &["data GiB", "resident GiB", "rows", "cow ms", "cow ms/GiB", "fork ms", "bare fork ms", "fork/bare", "fork THP ms", "bare THP ms", "THP GiB"],
        &table,
    );
    let series = |rows: &[Json], k: &str, name: &str| Series {
        name: name.into(),
        points: rows.iter().map(|r| (r["size_gib"].as_f64().unwrap_or(0.0), r[k].as_f64().unwrap_or(f64::NAN))).collect(),
    };
    let mut lines = vec![series(&plain, "cow_ms", "copy-on-write"), series(&plain, "fork_ms", "fork mode"), series(&plain, "bare_fork_ms", "bare fork()")];
    if !huge.is_empty() {
        lines.push(series(&huge, "fork_ms", "fork mode, THP"));
        lines.push(series(&huge, "bare_fork_ms", "bare fork(), THP"));
    }
    println!("\nWriting every page of one column (UPDATE wide SET b = b + 1 WHERE a % 64 = 0), ms:");
    let mut table = Vec::new();
    for (name, rows) in [("4 KiB pages", &plain), ("huge pages", &huge)] {
        for (i, r) in rows.iter().enumerate() {
            table.push(vec![
                name.to_string(),
                format!("{:.2}", r["data_gib"].as_f64().unwrap_or(0.0)),
                format!("{:.1}", field(rows, i, "update_ms")),
                format!("{:.1}", field(rows, i, "update_cow_ms")),
                format!("{:.1}", field(rows, i, "update_fork_ms")),
            ]);
        }
    }
    print_table(&["pages", "data GiB", "no snapshot", "cow snapshot held", "fork child alive"], &table);
    line_chart(&args.charts.join("creation.svg"), "Snapshot creation time", "database size (GiB)", "ms", false, &lines)?;
    Ok((plain, huge))
}

/// Experiment 2: OLTP throughput under periodic snapshots; returns the baselines and runs.
fn throughput_report(args: &SnapshotArgs, db: &Database) -> anyhow::Result<(Vec<f64>, Vec<Json>)> {

    println!("\n== 2. OLTP throughput with a snapshot and an analytical query every interval ({} clients, {} s each) ==", args.clients, args.duration);
    // The machine is shared and its speed drifts, and a process that has just forked pays a
    // write fault on each page for a while: every configuration runs between two runs without
    // snapshots and is compared with their mean, and all copy-on-write runs come first.
    // A first run warms up (the load's versions are collected, the allocator grows); not counted.
    let (warm, _) = oltp_run(db, args, None)?;
    eprintln!("  warm-up without snapshots: {warm:.0} tps");
    let mut baselines = vec![oltp_run(db, args, None)?.0];
    let mut measured = Vec::new();
    for mode in ["cow", "fork"] {
        for &ms in &args.intervals {
            let (tps, taken) = oltp_run(db, args, Some((mode, Duration::from_millis(ms))))?;
            eprintln!("  {mode} every {ms} ms: {tps:.0} tps, {taken} snapshots");
            measured.push((mode, ms, tps, taken, baselines.len() - 1));
            let (base, _) = oltp_run(db, args, None)?;
            eprintln!("  no snapshots: {base:.0} tps");
            baselines.push(base);
        }
    }
    let mut throughput = Vec::new();
    let mut rows = Vec::new();
    let mut chart: Vec<(&str, Vec<(f64, f64)>)> = vec![("cow", vec![]), ("fork", vec![])];
    for (mode, ms, tps, taken, b) in measured {
        let base = (baselines[b] + baselines[b + 1]) / 2.0;
        let relative = tps / base;
        rows.push(vec![mode.to_string(), ms.to_string(), format!("{tps:.0}"), format!("{base:.0}"), format!("{relative:.3}"), taken.to_string()]);
        throughput.push(json!({ "mode": mode, "interval_ms": ms, "tps": tps, "baseline_tps": base, "relative": relative, "snapshots": taken }));
        if let Some((_, points)) = chart.iter_mut().find(|(m, _)| *m == mode) {
            points.push((ms as f64, relative));
        }
    }
    print_table(&["mode", "interval ms", "tps", "baseline tps", "relative", "snapshots"], &rows);
    let lines: Vec<Series> = chart.into_iter().map(|(m, p)| Series { name: m.to_string(), points: p }).collect();
    line_chart(&args.charts.join("throughput.svg"), "OLTP throughput relative to no snapshots", "snapshot interval (ms, log)", "relative throughput", true, &lines)?;
    Ok((baselines, throughput))
}

/// Experiment 3: memory one snapshot holds after N updates, both modes.
fn memory_report(args: &SnapshotArgs, db: &Database) -> anyhow::Result<Vec<Json>> {

    println!("\n== 3. Memory held by one snapshot after N random single-row updates ==");
    let mut memory = Vec::new();
    let mut rows = Vec::new();
    let (mut cow_pts, mut fork_pts) = (Vec::new(), Vec::new());
    for &n in &args.updates {
        let snap = db.snapshot().map_err(|e| anyhow!("{e}"))?;
        random_updates(db, args.accounts, n)?;
        let cow = snap.memory().copied_bytes;
        drop(snap);
        let child = db.fork_snapshot().map_err(|e| anyhow!("{e}"))?;
        let (_, private_before) = child.memory();
        random_updates(db, args.accounts, n)?;
        let (_, private_after) = child.memory();
        drop(child);
        let fork = private_after.saturating_sub(private_before);
        rows.push(vec![n.to_string(), format!("{:.2}", cow as f64 / 1048576.0), format!("{:.2}", fork as f64 / 1048576.0)]);
        cow_pts.push((n as f64, cow as f64 / 1048576.0));
        fork_pts.push((n as f64, fork as f64 / 1048576.0));
        memory.push(json!({ "updates": n, "cow_bytes": cow, "fork_bytes": fork }));
    }
    print_table(&["updates", "cow MiB copied", "fork MiB copied (child's private pages)"], &rows);
    line_chart(
        &args.charts.join("memory.svg"),
        "Memory one snapshot holds after N updates",
        "updates (log)",
        "MiB",
        true,
        &[Series { name: "copy-on-write".into(), points: cow_pts }, Series { name: "fork".into(), points: fork_pts }],
    )?;
    Ok(memory)
}
