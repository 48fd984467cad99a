//! A filtered aggregate over a large table: Freshet (embedded, on its analytical side) and
//! DuckDB (from PyPI) on the same data, with the same SQL.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context};
use freshet::{Config, Database, Value};
use serde_json::json;

use super::postgres::run_cmd;
use super::report::{machine, median, print_table, write_json};

#[derive(clap::Args)]
pub struct ScanArgs {
    /// Rows in the table.
    #[arg(long, default_value_t = 10_000_000)]
    rows: u64,
    /// Timed runs of the query (after two warm-up runs).
    #[arg(long, default_value_t = 10)]
    runs: u32,
    /// The filter constant c in `y > c` (y is uniform in 0..10000).
    #[arg(long, default_value_t = 5000)]
    threshold: u32,
    /// Analytical worker threads for both systems (default: number of CPUs).
    #[arg(long)]
    threads: Option<usize>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

struct Timing {
    load_s: f64,
    times_ms: Vec<f64>,
    count: i64,
    sum: i64,
}

fn query(c: u32) -> String {
    format!("SELECT count(*), sum(x) FROM t WHERE y > {c}")
}

fn run_freshet(args: &ScanArgs, threads: usize) -> anyhow::Result<Timing> {
    let db = Database::open(Config { olap_threads: threads, ..Config::default() }).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut s = db.session();
    let exec = |s: &mut freshet::Session, sql: &str| s.execute_blocking(sql).map_err(|e| anyhow::anyhow!("{sql}: {e}"));
    exec(&mut s, "CREATE TABLE t (x BIGINT NOT NULL, y INT NOT NULL)")?;
    let start = Instant::now();
    exec(
        &mut s,
        &format!("INSERT INTO t SELECT value % 1000, CAST((value * 7919) % 10000 AS INT) FROM generate_series(1, {})", args.rows),
    )?;
    let load_s = start.elapsed().as_secs_f64();
    let sql = query(args.threshold);
    let mut times = Vec::new();
    let mut answer = (0, 0);
    for i in 0..args.runs + 2 {
        let t = Instant::now();
        let r = exec(&mut s, &sql)?;
        let elapsed = t.elapsed().as_secs_f64() * 1e3;
        let rows = r[0].rows();
        answer = match rows.first().map(|r| (&r[0], &r[1])) {
            Some((Value::Int64(c), Value::Int64(s))) => (*c, *s),
            other => bail!("unexpected answer {other:?}"),
        };
        if i >= 2 {
            times.push(elapsed);
        }
    }
    Ok(Timing { load_s, times_ms: times, count: answer.0, sum: answer.1 })
}

const DUCKDB_SCRIPT: &str = r#"
import json, subprocess, sys, time
try:
    import duckdb
except ImportError:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "duckdb"])
    import duckdb
rows, runs, c, threads = (int(a) for a in sys.argv[1:5])
con = duckdb.connect()
con.execute(f"SET threads TO {threads}")
t0 = time.perf_counter()
con.execute(f"CREATE TABLE t AS SELECT CAST(i % 1000 AS BIGINT) AS x, CAST((i * 7919) % 10000 AS INTEGER) AS y FROM range(1, {rows} + 1) r(i)")
load = time.perf_counter() - t0
q = f"SELECT count(*), sum(x) FROM t WHERE y > {c}"
times = []
for i in range(runs + 2):
    t = time.perf_counter()
    res = con.execute(q).fetchall()
    if i >= 2:
        times.append((time.perf_counter() - t) * 1e3)
print(json.dumps({"version": duckdb.__version__, "load_s": load, "times_ms": times, "count": int(res[0][0]), "sum": int(res[0][1])}))
"#;

fn run_duckdb(args: &ScanArgs, threads: usize) -> anyhow::Result<(Timing, String)> {
    let out = run_cmd(Command::new("python3").args([
        "-c",
        DUCKDB_SCRIPT,
        &args.rows.to_string(),
        &args.runs.to_string(),
        &args.threshold.to_string(),
        &threads.to_string(),
    ]))?;
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap_or("")).context("DuckDB output")?;
    let times = v["times_ms"].as_array().map(|a| a.iter().filter_map(|x| x.as_f64()).collect()).unwrap_or_default();
    Ok((
        Timing {
            load_s: v["load_s"].as_f64().unwrap_or(f64::NAN),
            times_ms: times,
            count: v["count"].as_i64().unwrap_or(-1),
            sum: v["sum"].as_i64().unwrap_or(-1),
        },
        v["version"].as_str().unwrap_or("").to_string(),
    ))
}

pub fn run(args: ScanArgs) -> anyhow::Result<()> {
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2));
    println!("Freshet: loading {} rows …", args.rows);
    let mut fr = run_freshet(&args, threads)?;
    println!("DuckDB: loading {} rows …", args.rows);
    let (mut dd, version) = run_duckdb(&args, threads)?;
    let correct = fr.count == dd.count && fr.sum == dd.sum;
    let (fr_med, dd_med) = (median(&mut fr.times_ms), median(&mut dd.times_ms));
    let min = |t: &[f64]| t.iter().cloned().fold(f64::INFINITY, f64::min);
    println!();
    println!("{} over {} rows, {} threads, {} timed runs (same machine, one run)", query(args.threshold), args.rows, threads, args.runs);
    let row = |name: String, t: &Timing, med: f64| {
        vec![name, format!("{med:.2}"), format!("{:.2}", min(&t.times_ms)), format!("{:.2}", t.load_s), format!("{} / {}", t.count, t.sum)]
    };
    print_table(
        &["system", "median ms", "min ms", "load s", "count / sum"],
        &[row("Freshet".into(), &fr, fr_med), row(format!("DuckDB {version}"), &dd, dd_med)],
    );
    let ratio = fr_med / dd_med;
    println!("answers agree: {correct}");
    println!("Freshet / DuckDB median time: {ratio:.2}x (target <= 1.5x)");
    write_json(
        args.json.as_deref(),
        &json!({
            "suite": "scan", "rows": args.rows, "threads": threads, "runs": args.runs, "query": query(args.threshold),
            "machine": machine(),
            "freshet": { "median_ms": fr_med, "min_ms": min(&fr.times_ms), "load_s": fr.load_s, "count": fr.count, "sum": fr.sum },
            "duckdb": { "version": version, "median_ms": dd_med, "min_ms": min(&dd.times_ms), "load_s": dd.load_s, "count": dd.count, "sum": dd.sum },
            "answers_agree": correct, "ratio_time": ratio,
        }),
    )?;
    anyhow::ensure!(correct, "the two systems disagree on the answer");
    Ok(())
}
