//! TPC-C and the CH-benCHmark: Freshet (over the wire or embedded) and PostgreSQL 15 (over the
//! wire, same statements) in one run; for `ch`, DuckDB runs the analytical queries on the same
//! generated data, and every system's answers are compared after loading.
//!
//! The workload code (schema, generator, transactions, queries, checks) is `freshet-bench`;
//! this module starts the systems, runs the workload on each in turn, and reports.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};
use freshet::{Config, Database};
use freshet_bench::ch::{self, answers, QueryAnswer};
use freshet_bench::conn::Conn;
use freshet_bench::target::{ConnJob, Target, TargetKind};
use freshet_bench::tpcc::consistency::ConditionResult;
use freshet_bench::tpcc::generate::Scale;
use freshet_bench::tpcc::load::{load, write_csv, LoadReport, LoadSpec};
use freshet_bench::tpcc::random::{NurandConstants, Rng};
use freshet_bench::tpcc::procedures::{register_native, InstallPlPgSql, ProcedureKind};
use freshet_bench::tpcc::run::{run, DriverKind, RunSpec, RunStats};
use freshet_bench::tpcc::schema::{self, Flavor};
use freshet_bench::tpcc::terminal::Workload;
use freshet_bench::tpcc::TxnKind;
use serde_json::{json, Value};

use super::postgres::{run_cmd, FreshetServer, Postgres};
use super::chart::{bar_chart, line_chart, Series};
use super::report::{machine, print_table, write_json};

/// How a client over the wire reaches a server on this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    Tcp,
    Unix,
}

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Unix => "unix",
        }
    }

    /// The `host=` of a connection string to a server listening on 127.0.0.1 and with its
    /// Unix-domain socket in `socket_dir`.
    fn host(self, socket_dir: &std::path::Path) -> String {
        match self {
            Transport::Tcp => "127.0.0.1".into(),
            Transport::Unix => socket_dir.display().to_string(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Statement by statement over the PostgreSQL protocol (BEGIN … COMMIT, prepared
    /// statements), as BenchBase does; PostgreSQL runs the same.
    Interactive,
    /// One call of a PL/pgSQL function per transaction over the wire; PostgreSQL runs the
    /// same functions.
    Procedures,
    /// In-process: one call of a native (Rust) procedure per transaction; PostgreSQL runs the
    /// PL/pgSQL functions over the wire.
    Embedded,
    /// In-process: one call of a PL/pgSQL function per transaction; PostgreSQL runs the same
    /// functions over the wire.
    EmbeddedPlpgsql,
    /// In-process, statement by statement through freshet::Session; PostgreSQL runs
    /// interactive.
    EmbeddedStatements,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Interactive => "interactive",
            Mode::Procedures => "procedures",
            Mode::Embedded => "embedded",
            Mode::EmbeddedPlpgsql => "embedded-plpgsql",
            Mode::EmbeddedStatements => "embedded-statements",
        }
    }

    fn driver(self) -> DriverKind {
        match self {
            Mode::Interactive | Mode::EmbeddedStatements => DriverKind::Statements,
            Mode::Procedures | Mode::EmbeddedPlpgsql => DriverKind::Calls(ProcedureKind::PlPgSql),
            Mode::Embedded => DriverKind::Calls(ProcedureKind::Native),
        }
    }

    /// How PostgreSQL runs beside this mode: the same statements, or the PL/pgSQL functions.
    fn postgres(self) -> Mode {
        match self.driver() {
            DriverKind::Statements => Mode::Interactive,
            DriverKind::Calls(_) => Mode::Procedures,
        }
    }
}

#[derive(clap::Args, Clone)]
pub struct TpccArgs {
    /// Warehouses (each is about 100 MB of TPC-C data at the specification's scale).
    #[arg(long, default_value_t = 5)]
    warehouses: i64,
    /// OLTP terminals (each on its own connection; no keying or think time).
    #[arg(long, default_value_t = 8)]
    terminals: usize,
    /// Seconds of the measured run per system.
    #[arg(long, default_value_t = 60)]
    duration: u64,
    /// How Freshet is driven; PostgreSQL runs the same statements (interactive,
    /// embedded-statements) or the same PL/pgSQL functions (the other modes).
    #[arg(long, value_enum, default_value_t = Mode::Interactive)]
    mode: Mode,
    /// Isolation level of every transaction on both systems.
    #[arg(long, default_value = "read committed")]
    isolation: String,
    /// Skip PostgreSQL (Freshet only).
    #[arg(long)]
    no_postgres: bool,
    /// Scheduling niceness of Freshet's analytical workers (the server's `--olap-nice`).
    #[arg(long, default_value_t = 0)]
    olap_nice: i32,
    /// Give Freshet's executor a CPU of its own (the server's `--pin-cpus`); in-process, the
    /// terminal and stream threads then keep off it as an application's would. Default: off
    /// (the server's default, and in-process the terminals run the jobs themselves), except
    /// in-process with `--inline-calls false`, where the executor is the busy thread.
    #[arg(long, action = clap::ArgAction::Set)]
    pin_cpus: Option<bool>,
    /// Microseconds Freshet's executor polls its empty queue before it sleeps (the server's
    /// `--executor-poll-us`, `Config::executor_poll` in-process; default 50).
    #[arg(long, default_value_t = Config::DEFAULT_EXECUTOR_POLL.as_micros() as u64, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    executor_poll_us: u64,
    /// Let Freshet's executor hold back the wakes of replies while more jobs are queued (the
    /// server's `--batch-reply-wakes`, `Config::batch_reply_wakes` in-process). Default: on
    /// in-process, off over the wire (their defaults).
    #[arg(long, action = clap::ArgAction::Set)]
    batch_reply_wakes: Option<bool>,
    /// Let a session that finds Freshet's executor idle run its statement, commit or
    /// rollback on its own thread (the server's `--inline-statements`,
    /// `Config::inline_statements` in-process; default on).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    inline_statements: bool,
    /// Likewise for procedure calls (the server's `--inline-calls`, `Config::inline_calls`
    /// in-process). Default: on in-process, off over the wire (their defaults).
    #[arg(long, action = clap::ArgAction::Set)]
    inline_calls: Option<bool>,
    /// Network threads of the Freshet server (its `--net-threads`; default: the server's).
    #[arg(long)]
    net_threads: Option<usize>,
    /// Microseconds the Freshet server's idle network threads wait for an awaited reply
    /// before they sleep (its `--net-spin-us`; default: the server's).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=1000))]
    net_spin_us: Option<u64>,
    /// Worker threads of Freshet's analytical engine (the server's `--olap-threads`; default:
    /// the CPUs the executor leaves, at least one).
    #[arg(long)]
    olap_threads: Option<usize>,
    /// Freshet's partitions (the server's `--partitions`, `Config::partitions` in-process): with
    /// more than one, every table but item and the CH tables is partitioned by warehouse
    /// (`PARTITION BY HASH`), and a PL/pgSQL call runs as one job on its warehouse's partition.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    partitions: u64,
    /// Threads that drive the terminals; each terminal is a task of one of them, with its own
    /// connection. Default: in-process, one thread runs every terminal (as an async
    /// application serves its sessions); over the wire, a thread per terminal (as BenchBase's
    /// terminals are).
    #[arg(long)]
    terminal_threads: Option<usize>,
    /// How clients over the wire reach each server on this machine: `tcp` (127.0.0.1) or
    /// `unix` (each server's Unix-domain socket, as psql and pgbench connect by default).
    /// Both systems get the same; in-process modes use it only for PostgreSQL.
    #[arg(long, value_enum, default_value_t = Transport::Tcp)]
    transport: Transport,
    /// Seed of the data generator and the terminals: the same seed gives the same data.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Warehouses loaded at the same time.
    #[arg(long, default_value_t = 2)]
    load_threads: usize,
    /// Write the results as JSON (an array with one object per system and mode) to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Draw SVG charts into this directory: `throughput.svg` (tps over the run, one line per
    /// system) and, for `bench ch`, `queries.svg` (each query's mean time per system).
    #[arg(long)]
    charts: Option<PathBuf>,
    /// `bench ch`: only these analytical queries, by the names the report uses (e.g.
    /// `--queries top10` or `--queries Q1,Q6`); all 23 by default.
    #[arg(long, value_delimiter = ',')]
    queries: Vec<String>,
    /// `bench ch`: the freshness bound of Freshet's analytical streams
    /// (`freshet.max_staleness`, e.g. `100ms`); queries within it share one snapshot.
    /// Default 0: every query sees every commit acknowledged before it started.
    #[arg(long)]
    max_staleness: Option<String>,
    /// Reduced cardinalities (1,000 items, 30 customers and orders per district), for testing
    /// the tooling only.
    #[arg(long, hide = true)]
    tiny: bool,
}

#[derive(clap::Args, Clone)]
pub struct ChArgs {
    #[command(flatten)]
    tpcc: TpccArgs,
    /// Analytical streams running the CH queries in a loop during the TPC-C run.
    #[arg(long, default_value_t = 1)]
    streams: usize,
    /// Timed runs of each query in DuckDB (after the run that gives its answer).
    #[arg(long, default_value_t = 3)]
    duckdb_runs: u32,
    /// Skip DuckDB.
    #[arg(long)]
    no_duckdb: bool,
    /// Skip DuckDB's second round of timed runs, made while another connection runs
    /// New-Order and Payment transactions in DuckDB.
    #[arg(long)]
    no_duckdb_writes: bool,
    /// Write DuckDB's answers after loading to this file (the format of the tests' reference).
    #[arg(long)]
    answers_out: Option<PathBuf>,
}

impl TpccArgs {
    /// The CH queries this run uses: all, or those `--queries` names.
    fn ch_queries(&self) -> Vec<(String, String)> {
        ch::queries::all()
            .into_iter()
            .filter(|(name, _)| self.queries.is_empty() || self.queries.iter().any(|q| q.eq_ignore_ascii_case(name)))
            .collect()
    }

    /// A `--queries` name no CH query has, if any.
    fn unknown_query(&self) -> Option<&String> {
        let all = ch::queries::all();
        self.queries.iter().find(|q| !all.iter().any(|(name, _)| q.eq_ignore_ascii_case(name)))
    }

    /// `Config::olap_threads` for Freshet: the option's value, or 0 (the CPUs the executors leave).
    fn olap_threads(&self) -> usize {
        self.olap_threads.unwrap_or(0)
    }

    fn scale(&self) -> Scale {
        if self.tiny { Scale::TINY } else { Scale::SPEC }
    }

    fn load_spec(&self) -> LoadSpec {
        LoadSpec { warehouses: self.warehouses, scale: self.scale(), seed: self.seed, threads: self.load_threads, progress: true, partitioned: self.partitions > 1 }
    }

    /// `RunSpec::terminal_threads` on `target` (see `--terminal-threads`).
    fn terminal_threads(&self, target: &Target) -> usize {
        self.terminal_threads.unwrap_or(match target.kind {
            TargetKind::Embedded(_) => 1,
            TargetKind::Wire(_) => 0,
        })
    }

    fn run_spec(&self, streams: usize, driver: DriverKind, terminal_threads: usize) -> RunSpec {
        let load = NurandConstants::for_load(self.seed);
        let constants = NurandConstants::for_run(load, &mut Rng::stream(self.seed, 0, "run-constants"));
        RunSpec {
            workload: Workload { warehouses: self.warehouses, scale: self.scale(), constants },
            terminals: self.terminals,
            duration: Duration::from_secs(self.duration),
            seed: self.seed,
            streams,
            queries: if streams > 0 { self.ch_queries() } else { vec![] },
            progress: true,
            driver,
            terminal_threads,
            stream_setup: Vec::new(),
        }
    }
}

/// One system's results.
struct SystemRun {
    system: &'static str,
    mode: &'static str,
    load: LoadReport,
    answers: Vec<QueryAnswer>,
    stats: RunStats,
    consistency: Vec<ConditionResult>,
}

fn db_err(e: freshet_bench::conn::DbError) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

/// Loads, creates the procedures `mode` calls, optionally checks answers, runs, and checks
/// consistency on one target.
fn measure(
    target: &Target,
    flavor: Flavor,
    mode: Mode,
    args: &TpccArgs,
    streams: usize,
    with_answers: bool,
) -> anyhow::Result<(LoadReport, Vec<QueryAnswer>, RunStats, Vec<ConditionResult>)> {
    let report = load(target, flavor, args.load_spec()).map_err(db_err).context("loading")?;
    println!("  loaded {} rows in {:.1} s", report.rows, report.seconds);
    match (mode.driver(), &target.kind) {
        (DriverKind::Calls(ProcedureKind::PlPgSql), _) => target.run(InstallPlPgSql).map_err(db_err).context("creating the PL/pgSQL functions")?,
        (DriverKind::Calls(ProcedureKind::Native), TargetKind::Embedded(db)) => register_native(db).context("registering the native procedures")?,
        (DriverKind::Calls(ProcedureKind::Native), TargetKind::Wire(_)) => bail!("native procedures run in-process only"),
        (DriverKind::Statements, _) => {}
    }
    let answers = if with_answers { target.run(ch::RunOnce { queries: args.ch_queries() }).map_err(db_err)? } else { vec![] };
    println!("  running {} terminals{} for {} s …", args.terminals, if streams > 0 { format!(" and {streams} analytical streams") } else { String::new() }, args.duration);
    let mut spec = args.run_spec(streams, mode.driver(), args.terminal_threads(target));
    if let (Flavor::Freshet, Some(bound)) = (flavor, &args.max_staleness) {
        spec.stream_setup.push(format!("SET freshet.max_staleness = '{}'", bound.replace('\'', "''")));
    }
    let stats = run(target, &spec);
    for f in &stats.fatal {
        eprintln!("  fatal: {f}");
    }
    if flavor == Flavor::Freshet && matches!(mode.driver(), DriverKind::Calls(_)) {
        // How many calls ran as one executor job (the rest statement by statement).
        let rows = target.run(SimpleQuery("SELECT name, calls, calls_in_one_job FROM freshet_procedures WHERE calls > 0 ORDER BY name")).map_err(db_err)?;
        for r in rows {
            println!("  {}: {} calls, {} as one executor job", r[0].as_str(), r[1].as_i64(), r[2].as_i64());
        }
    }
    let consistency = target.run(ch::Consistency { warehouses: args.warehouses }).map_err(db_err).context("consistency checks")?;
    for c in &consistency {
        println!("  consistency condition {} ({}): {}", c.number, c.description, if c.holds { "holds" } else { "VIOLATED" });
    }
    Ok((report, answers, stats, consistency))
}

/// One query's rows, on a connection of its own.
struct SimpleQuery(&'static str);

impl ConnJob for SimpleQuery {
    type Output = freshet_bench::conn::Rows;
    async fn run<C: Conn>(self, mut conn: C) -> freshet_bench::conn::DbResult<Self::Output> {
        conn.simple(self.0).await
    }
}

fn run_freshet(args: &TpccArgs, streams: usize, with_answers: bool) -> anyhow::Result<SystemRun> {
    println!("Freshet ({} mode): {} warehouses …", args.mode.name(), args.warehouses);
    let isolation = Some(args.isolation.clone());
    let (load, answers, stats, consistency) = match args.mode {
        Mode::Embedded | Mode::EmbeddedPlpgsql | Mode::EmbeddedStatements => {
            let inline_calls = args.inline_calls.unwrap_or(Config::default().inline_calls);
            let db = Database::open(Config {
                olap_nice: args.olap_nice,
                olap_threads: args.olap_threads(),
                pin_cpus: args.pin_cpus.unwrap_or(!inline_calls),
                executor_poll: std::time::Duration::from_micros(args.executor_poll_us),
                batch_reply_wakes: args.batch_reply_wakes.unwrap_or(Config::default().batch_reply_wakes),
                inline_statements: args.inline_statements,
                inline_calls,
                partitions: args.partitions as usize,
                ..Config::default()
            })
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            measure(&Target::embedded(db).with_isolation(isolation), Flavor::Freshet, args.mode, args, streams, with_answers)?
        }
        Mode::Interactive | Mode::Procedures => {
            let (nice, threads, pin, poll) = (args.olap_nice.to_string(), args.olap_threads().to_string(), args.pin_cpus.unwrap_or(false).to_string(), args.executor_poll_us.to_string());
            let (partitions, batch) = (args.partitions.to_string(), args.batch_reply_wakes.unwrap_or(false).to_string());
            let (inline, inline_calls) = (args.inline_statements.to_string(), args.inline_calls.unwrap_or(false).to_string());
            let net = args.net_threads.map(|n| n.to_string());
            let mut flags = vec![
                "--olap-nice",
                &nice,
                "--olap-threads",
                &threads,
                "--pin-cpus",
                &pin,
                "--executor-poll-us",
                &poll,
                "--batch-reply-wakes",
                &batch,
                "--inline-statements",
                &inline,
                "--inline-calls",
                &inline_calls,
                "--partitions",
                &partitions,
            ];
            if let Some(net) = &net {
                flags.extend(["--net-threads", net]);
            }
            let spin = args.net_spin_us.map(|n| n.to_string());
            if let Some(spin) = &spin {
                flags.extend(["--net-spin-us", spin]);
            }
            let server = FreshetServer::in_memory(&flags)?;
            let host = args.transport.host(server.socket_dir());
            let target = Target::wire(format!("host={host} port={} user=bench dbname=freshet", server.port)).with_isolation(isolation);
            measure(&target, Flavor::Freshet, args.mode, args, streams, with_answers)?
        }
    };
    Ok(SystemRun { system: "freshet", mode: args.mode.name(), load, answers, stats, consistency })
}

fn run_postgres(args: &TpccArgs, streams: usize, with_answers: bool) -> anyhow::Result<SystemRun> {
    let mode = args.mode.postgres();
    println!("PostgreSQL 15 ({} mode): {} warehouses …", mode.name(), args.warehouses);
    // Memory speed, as Freshet runs in memory: no fsync, asynchronous commit.
    let pg = Postgres::start(&[
        "shared_buffers=2GB",
        "max_connections=200",
        "fsync=off",
        "synchronous_commit=off",
        "full_page_writes=off",
        "max_wal_size=8GB",
    ])?;
    let host = args.transport.host(pg.socket_dir());
    let target = Target::wire(format!("host={host} port={} user=postgres dbname=postgres", pg.port)).with_isolation(Some(args.isolation.clone()));
    let (load, answers, stats, consistency) = measure(&target, Flavor::Postgres, mode, args, streams, with_answers)?;
    Ok(SystemRun { system: "postgresql", mode: mode.name(), load, answers, stats, consistency })
}

fn print_runs(runs: &[SystemRun], args: &TpccArgs) {
    println!();
    println!(
        "TPC-C: {} warehouses{}, {} terminals, {} s, isolation {} on every system, clients over {} where over the wire, no keying or think time (same machine, one run){}",
        args.warehouses,
        if args.tiny { " (reduced test scale)" } else { "" },
        args.terminals,
        args.duration,
        args.isolation,
        match args.transport {
            Transport::Tcp => "TCP",
            Transport::Unix => "Unix-domain sockets",
        },
        args.max_staleness.as_ref().map_or(String::new(), |b| format!("; Freshet's analytical streams read snapshots up to {b} old")),
    );
    let mut rows = Vec::new();
    for r in runs {
        let s = &r.stats;
        let rolled_back: u64 = s.txns.iter().map(|t| t.rolled_back).sum();
        let retried: u64 = s.txns.iter().map(|t| t.retried).sum();
        let errors: u64 = s.txns.iter().map(|t| t.errors).sum();
        let holds = r.consistency.iter().filter(|c| c.holds).count();
        rows.push(vec![
            r.system.to_string(),
            r.mode.to_string(),
            format!("{:.1}", r.load.seconds),
            format!("{:.0}", s.tps()),
            format!("{:.0}", s.new_orders_per_minute()),
            s.committed().to_string(),
            rolled_back.to_string(),
            retried.to_string(),
            errors.to_string(),
            format!("{holds}/{}", r.consistency.len()),
            terminal_spread(&s.terminal_committed),
        ]);
    }
    print_table(
        &[
            "system",
            "mode",
            "load s",
            "tps",
            "NOPM",
            "committed",
            "rolled back (1%)",
            "retried 40001/40P01",
            "other errors",
            "consistency 1-4",
            "per terminal min-max",
        ],
        &rows,
    );
    println!();
    let mut rows = Vec::new();
    for r in runs {
        for kind in TxnKind::ALL {
            let t = r.stats.get(kind);
            rows.push(vec![
                r.system.to_string(),
                kind.name().to_string(),
                t.committed.to_string(),
                format!("{:.2}", t.percentile_ms(0.50)),
                format!("{:.2}", t.percentile_ms(0.95)),
                format!("{:.2}", t.percentile_ms(0.99)),
            ]);
        }
    }
    print_table(&["system", "transaction", "committed", "p50 ms", "p95 ms", "p99 ms"], &rows);
    for r in runs {
        for e in &r.stats.error_samples {
            println!("{}: error sample: {e}", r.system);
        }
    }
    if let [.., pg] = runs
        && pg.system == "postgresql"
    {
        for f in runs.iter().filter(|r| r.system == "freshet") {
            println!("Freshet ({}) / PostgreSQL tps = {:.2}x", f.mode, f.stats.tps() / pg.stats.tps());
        }
    }
}

/// The fewest and most transactions a terminal committed, as `min-max`.
fn terminal_spread(committed: &[u64]) -> String {
    match (committed.iter().min(), committed.iter().max()) {
        (Some(min), Some(max)) => format!("{min}-{max}"),
        _ => "-".into(),
    }
}

fn run_json(r: &SystemRun, args: &TpccArgs, streams: usize, correct: &dyn Fn(&str) -> Option<bool>) -> Value {
    let s = &r.stats;
    let mut txns = serde_json::Map::new();
    for kind in TxnKind::ALL {
        let t = s.get(kind);
        txns.insert(
            kind.name().into(),
            json!({
                "committed": t.committed, "aborted": t.rolled_back + t.retried + t.errors,
                "rolled_back": t.rolled_back, "retried": t.retried, "errors": t.errors,
                "p50_ms": t.percentile_ms(0.50), "p95_ms": t.percentile_ms(0.95), "p99_ms": t.percentile_ms(0.99),
            }),
        );
    }
    let consistency: serde_json::Map<String, Value> = r.consistency.iter().map(|c| (c.number.to_string(), json!(c.holds))).collect();
    let mut queries = serde_json::Map::new();
    for (name, q) in &s.queries {
        queries.insert(
            name.clone(),
            json!({ "runs": q.times_ms.len(), "mean_ms": q.mean_ms(), "p99_ms": q.percentile_ms(0.99), "errors": q.errors, "correct": correct(name) }),
        );
    }
    json!({
        "system": r.system, "mode": r.mode, "isolation": args.isolation, "warehouses": args.warehouses, "transport": args.transport.name(),
        "max_staleness": if r.system == "freshet" { args.max_staleness.as_deref().unwrap_or("0") } else { "0" },
        "scale": if args.tiny { "tiny" } else { "spec" }, "terminals": args.terminals, "streams": streams,
        "duration_s": s.seconds, "load_s": r.load.seconds, "loaded_rows": r.load.rows,
        "tps": s.tps(), "new_order_per_min": s.new_orders_per_minute(), "committed_per_terminal": s.terminal_committed,
        "throughput": s.throughput.iter().map(|(t, tps)| json!([t, tps])).collect::<Vec<_>>(),
        "transactions": txns, "consistency": consistency, "queries": queries, "machine": machine(),
    })
}

pub fn run_tpcc(args: TpccArgs) -> anyhow::Result<()> {
    let mut runs = vec![run_freshet(&args, 0, false)?];
    if !args.no_postgres {
        runs.push(run_postgres(&args, 0, false)?);
    }
    print_runs(&runs, &args);
    let objects: Vec<Value> = runs.iter().map(|r| run_json(r, &args, 0, &|_| None)).collect();
    write_json(args.json.as_deref(), &json!(objects))?;
    if let Some(dir) = &args.charts {
        throughput_chart(dir, &runs, &args)?;
    }
    finish(&runs)
}

/// `throughput.svg`: each system's tps, second by second.
fn throughput_chart(dir: &std::path::Path, runs: &[SystemRun], args: &TpccArgs) -> anyhow::Result<()> {
    let series: Vec<Series> =
        runs.iter().map(|r| Series { name: format!("{} ({})", r.system, r.mode), points: r.stats.throughput.iter().map(|&(t, tps)| (t.round(), tps)).collect() }).collect();
    let title = format!("TPC-C throughput, W={}, {} terminals", args.warehouses, args.terminals);
    line_chart(&dir.join("throughput.svg"), &title, "seconds", "transactions/s", false, &series)
}

/// Fails the command if a run broke down or left the database inconsistent.
fn finish(runs: &[SystemRun]) -> anyhow::Result<()> {
    for r in runs {
        anyhow::ensure!(r.stats.fatal.is_empty(), "{}: {}", r.system, r.stats.fatal.join("; "));
        anyhow::ensure!(r.consistency.iter().all(|c| c.holds), "{}: a consistency condition is violated", r.system);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// CH-benCHmark

const DUCKDB_SCRIPT: &str = r#"
import datetime, decimal, glob, json, os, random, subprocess, sys, threading, time
try:
    import duckdb
except ImportError:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "duckdb"])
    import duckdb
directory, runs, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
warehouses, with_writes = int(sys.argv[4]), sys.argv[5] == "1"
spec = json.load(open(os.path.join(directory, "spec.json")))

def canon(v):
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, decimal.Decimal):
        s = format(v, "f")
        if "." in s:
            s = s.rstrip("0").rstrip(".")
        return "0" if s == "-0" else s
    if isinstance(v, float):
        if v == int(v) and abs(v) < 1e17:
            return str(int(v))
        return ("%.10f" % v).rstrip("0").rstrip(".")
    if isinstance(v, datetime.datetime):
        s = v.strftime("%Y-%m-%d %H:%M:%S")
        return s + (".%06d" % v.microsecond if v.microsecond else "")
    if isinstance(v, datetime.date):
        return v.isoformat()
    return str(v).rstrip(" ")

con = duckdb.connect()
con.execute(f"SET threads TO {threads}")
# A query running for seconds would draw a progress bar on stdout, where the result goes.
con.execute("SET enable_progress_bar = false")
t0 = time.perf_counter()
for s in spec["ddl"]:
    con.execute(s)
for t in spec["tables"]:
    for f in sorted(glob.glob(os.path.join(directory, f"{t}.*.csv"))):
        con.execute(f"COPY {t} FROM '{f}' (FORMAT csv, HEADER false)")
load = time.perf_counter() - t0
out = {}
for name, sql in spec["queries"]:
    try:
        t = time.perf_counter()
        rows = con.execute(sql).fetchall()
        first = (time.perf_counter() - t) * 1e3
        times = []
        for i in range(runs):
            t = time.perf_counter()
            con.execute(sql).fetchall()
            times.append((time.perf_counter() - t) * 1e3)
        out[name] = {"rows": [[canon(v) for v in r] for r in rows], "first_ms": first, "times_ms": times}
    except Exception as e:
        out[name] = {"error": str(e)}

# The same queries again while a second connection runs New-Order and Payment transactions
# (the statements of TPC-C's clauses 2.4 and 2.5, without the customer-by-name and remote
# cases; DuckDB has no indexes here, so each statement scans its table's matching row groups).
def writer(stop, stats):
    cur = con.cursor()
    rnd = random.Random(42)
    items = cur.execute("SELECT max(i_id) FROM item").fetchone()[0]
    customers = cur.execute("SELECT max(c_id) FROM customer").fetchone()[0]
    while not stop.is_set():
        w, d, c = rnd.randint(1, warehouses), rnd.randint(1, 10), rnd.randint(1, customers)
        new_order = rnd.random() < 0.51
        try:
            cur.execute("BEGIN TRANSACTION")
            now = datetime.datetime.now()
            if new_order:
                o_id = cur.execute("UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = ? AND d_id = ? RETURNING d_next_o_id - 1", [w, d]).fetchone()[0]
                lines = [rnd.randint(1, items) for _ in range(rnd.randint(5, 15))]
                cur.execute("INSERT INTO oorder VALUES (?, ?, ?, ?, NULL, ?, 1, ?)", [w, d, o_id, c, len(lines), now])
                cur.execute("INSERT INTO new_order VALUES (?, ?, ?)", [w, d, o_id])
                for number, i in enumerate(lines, 1):
                    q = rnd.randint(1, 10)
                    price = cur.execute("SELECT i_price FROM item WHERE i_id = ?", [i]).fetchone()[0]
                    cur.execute("UPDATE stock SET s_quantity = CASE WHEN s_quantity >= ? + 10 THEN s_quantity - ? ELSE s_quantity - ? + 91 END, "
                                "s_ytd = s_ytd + ?, s_order_cnt = s_order_cnt + 1 WHERE s_w_id = ? AND s_i_id = ?", [q, q, q, q, w, i])
                    cur.execute("INSERT INTO order_line VALUES (?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)", [w, d, o_id, number, i, price * q, w, q, "x" * 24])
            else:
                h = decimal.Decimal(rnd.randint(100, 500000)) / 100
                cur.execute("UPDATE warehouse SET w_ytd = w_ytd + ? WHERE w_id = ?", [h, w])
                cur.execute("UPDATE district SET d_ytd = d_ytd + ? WHERE d_w_id = ? AND d_id = ?", [h, w, d])
                cur.execute("UPDATE customer SET c_balance = c_balance - ?, c_ytd_payment = c_ytd_payment + ?, c_payment_cnt = c_payment_cnt + 1 "
                            "WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?", [h, h, w, d, c])
                cur.execute("INSERT INTO history VALUES (?, ?, ?, ?, ?, ?, ?, 'payment')", [c, d, w, d, w, now, h])
            cur.execute("COMMIT")
            stats["committed"] += 1
        except Exception as e:
            try:
                cur.execute("ROLLBACK")
            except Exception:
                pass
            stats["aborted"] += 1
            stats["error"] = str(e)

writes = None
if with_writes:
    stop, stats = threading.Event(), {"committed": 0, "aborted": 0, "error": None}
    thread = threading.Thread(target=writer, args=(stop, stats))
    t0 = time.perf_counter()
    thread.start()
    for name, sql in spec["queries"]:
        if "error" in out[name]:
            continue
        times = []
        for i in range(max(runs, 1)):
            t = time.perf_counter()
            con.execute(sql).fetchall()
            times.append((time.perf_counter() - t) * 1e3)
        out[name]["times_with_writes_ms"] = times
    stop.set()
    thread.join()
    writes = dict(stats, seconds=time.perf_counter() - t0)
print(json.dumps({"version": duckdb.__version__, "load_s": load, "queries": out, "writes": writes}))
"#;

struct DuckDbRun {
    version: String,
    load_s: f64,
    generate_s: f64,
    /// Per query: answer or error, and timed runs.
    queries: Vec<DuckQuery>,
    /// The concurrent write stream of the second round, if it ran.
    writes: Option<DuckWrites>,
}

struct DuckQuery {
    name: String,
    result: Result<answers::Answer, String>,
    /// Timed runs on the loaded data, then while the write stream ran.
    times: Vec<f64>,
    times_with_writes: Vec<f64>,
}

struct DuckWrites {
    committed: u64,
    aborted: u64,
    seconds: f64,
    error: Option<String>,
}

fn run_duckdb(args: &ChArgs) -> anyhow::Result<DuckDbRun> {
    println!("DuckDB: generating CSV files and loading {} warehouses …", args.tpcc.warehouses);
    let dir = std::env::temp_dir().join(format!("freshet-bench-ch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let generated = write_csv(&dir, LoadSpec { progress: false, ..args.tpcc.load_spec() })?;
    let spec = json!({
        "ddl": schema::ddl(Flavor::DuckDb, false),
        "tables": schema::TABLES,
        "queries": args.tpcc.ch_queries().into_iter().map(|(n, q)| json!([n, q])).collect::<Vec<_>>(),
    });
    std::fs::write(dir.join("spec.json"), spec.to_string())?;
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let out = run_cmd(Command::new("python3").args([
        "-c",
        DUCKDB_SCRIPT,
        dir.to_str().unwrap_or_default(),
        &args.duckdb_runs.to_string(),
        &threads.to_string(),
        &args.tpcc.warehouses.to_string(),
        if args.no_duckdb_writes { "0" } else { "1" },
    ]));
    let _ = std::fs::remove_dir_all(&dir);
    let out = out?;
    // The result is the last line; anything else the script's libraries print comes before it.
    let last = out.lines().flat_map(|l| l.split('\r')).rfind(|l| l.trim_start().starts_with('{')).unwrap_or("");
    let v: Value = serde_json::from_str(last).context("DuckDB's output")?;
    let mut queries = Vec::new();
    for (name, _) in args.tpcc.ch_queries() {
        let q = &v["queries"][&name];
        let result = match q["error"].as_str() {
            Some(e) => Err(e.to_string()),
            None => Ok(q["rows"]
                .as_array()
                .map(|rows| {
                    rows.iter()
                        .map(|r| r.as_array().map(|c| c.iter().map(|x| x.as_str().unwrap_or("").to_string()).collect()).unwrap_or_default())
                        .collect()
                })
                .unwrap_or_default()),
        };
        let times_of = |key: &str| q[key].as_array().map(|a| a.iter().filter_map(Value::as_f64).collect()).unwrap_or_default();
        queries.push(DuckQuery { name, result, times: times_of("times_ms"), times_with_writes: times_of("times_with_writes_ms") });
    }
    let w = &v["writes"];
    let writes = w.is_object().then(|| DuckWrites {
        committed: w["committed"].as_u64().unwrap_or(0),
        aborted: w["aborted"].as_u64().unwrap_or(0),
        seconds: w["seconds"].as_f64().unwrap_or(f64::NAN),
        error: w["error"].as_str().map(str::to_string),
    });
    println!("  loaded in {:.1} s (CSV generated in {:.1} s)", v["load_s"].as_f64().unwrap_or(f64::NAN), generated.seconds);
    if let Some(w) = &writes {
        println!(
            "  write stream during the second round: {} transactions committed in {:.1} s ({:.1}/s), {} rolled back{}",
            w.committed,
            w.seconds,
            w.committed as f64 / w.seconds,
            w.aborted,
            w.error.as_deref().map(|e| format!(" (last error: {e})")).unwrap_or_default()
        );
    }
    Ok(DuckDbRun {
        version: v["version"].as_str().unwrap_or("").to_string(),
        load_s: v["load_s"].as_f64().unwrap_or(f64::NAN),
        generate_s: generated.seconds,
        queries,
        writes,
    })
}

fn write_answers(path: &std::path::Path, duck: &DuckDbRun) -> anyhow::Result<()> {
    let mut text = String::new();
    for DuckQuery { name, result, .. } in &duck.queries {
        match result {
            Ok(a) => text.push_str(&format!("== {name}\n{}\n", answers::to_text(a))),
            Err(e) => bail!("DuckDB failed on {name}: {e}"),
        }
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    println!("DuckDB's answers written to {}", path.display());
    Ok(())
}

fn mean(t: &[f64]) -> f64 {
    if t.is_empty() { f64::NAN } else { t.iter().sum::<f64>() / t.len() as f64 }
}

pub fn run_ch(args: ChArgs) -> anyhow::Result<()> {
    if let Some(unknown) = args.tpcc.unknown_query() {
        bail!("no CH query is named {unknown:?} (the names are top10 and Q1 … Q22)");
    }
    let duck = if args.no_duckdb { None } else { Some(run_duckdb(&args)?) };
    if let (Some(path), Some(d)) = (&args.answers_out, &duck) {
        write_answers(path, d)?;
    }
    let mut runs = vec![run_freshet(&args.tpcc, args.streams, true)?];
    if !args.tpcc.no_postgres {
        runs.push(run_postgres(&args.tpcc, args.streams, true)?);
    }
    print_runs(&runs, &args.tpcc);

    let duck_query = |name: &str| duck.as_ref()?.queries.iter().find(|q| q.name == name);
    // Answers after loading: every system against PostgreSQL (exact NUMERIC) and DuckDB.
    let answer_of = |r: &SystemRun, name: &str| r.answers.iter().find(|a| a.name == name).map(|a| a.result.clone());
    let reference = |name: &str| -> Option<answers::Answer> {
        let pg = runs.iter().find(|r| r.system == "postgresql").and_then(|r| answer_of(r, name)).and_then(Result::ok);
        pg.or_else(|| duck_query(name)?.result.clone().ok())
    };
    let duck_answer = |name: &str| duck_query(name).map(|q| q.result.clone());
    let correct = |system: &str, name: &str| -> Option<bool> {
        let mine = match system {
            "duckdb" => duck_answer(name)?,
            _ => answer_of(runs.iter().find(|r| r.system == system)?, name)?,
        };
        let Ok(mine) = mine else { return Some(false) };
        let mut ok = reference(name).is_none_or(|r| answers::agree(&mine, &r));
        if let Some(Ok(d)) = duck_answer(name) {
            ok &= answers::agree(&mine, &d);
        }
        Some(ok)
    };

    println!();
    println!(
        "CH-benCHmark queries: answers after loading (before TPC-C), then {} stream(s) during the TPC-C run; DuckDB {} on the loaded data, then while another connection writes",
        args.streams,
        duck.as_ref().map(|d| d.version.as_str()).unwrap_or("(skipped)")
    );
    let mut rows = Vec::new();
    let mut totals = [0.0f64; 5];
    // Per query, for the chart: Freshet under TPC-C, Freshet after loading, PostgreSQL,
    // DuckDB, DuckDB with writes.
    let mut bars: [Vec<Option<f64>>; 5] = Default::default();
    for (name, _) in args.tpcc.ch_queries() {
        let fr = &runs[0];
        let once = fr.answers.iter().find(|a| a.name == name).map(|a| a.ms).unwrap_or(f64::NAN);
        let during = fr.stats.queries.iter().find(|(n, _)| *n == name).map(|(_, q)| q.clone()).unwrap_or_default();
        let pg = runs.get(1).and_then(|p| p.answers.iter().find(|a| a.name == name)).map(|a| a.ms);
        let dq = duck_query(&name);
        let dd = dq.map(|q| mean(&q.times));
        let dw = dq.filter(|q| !q.times_with_writes.is_empty()).map(|q| mean(&q.times_with_writes));
        for (b, v) in bars.iter_mut().zip([(!during.times_ms.is_empty()).then(|| during.mean_ms()), Some(once), pg, dd, dw]) {
            b.push(v);
        }
        totals[0] += once;
        totals[1] += during.mean_ms();
        totals[2] += pg.unwrap_or(0.0);
        totals[3] += dd.unwrap_or(0.0);
        totals[4] += dw.unwrap_or(0.0);
        let mark = |c: Option<bool>| match c {
            Some(true) => "correct",
            Some(false) => "INCORRECT",
            None => "-",
        };
        let fr_error = fr.answers.iter().find(|a| a.name == name).and_then(|a| a.result.as_ref().err().cloned());
        rows.push(vec![
            name.clone(),
            format!("{once:.1}"),
            format!("{:.1}", during.mean_ms()),
            format!("{:.1}", during.percentile_ms(0.99)),
            during.times_ms.len().to_string(),
            pg.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into()),
            dd.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into()),
            dw.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into()),
            mark(correct("freshet", &name)).to_string(),
            mark(correct("postgresql", &name)).to_string(),
            mark(correct("duckdb", &name)).to_string(),
            fr_error.map(|e| e.chars().take(60).collect()).unwrap_or_default(),
        ]);
    }
    print_table(
        &["query", "Freshet ms (loaded)", "Freshet mean ms (under TPC-C)", "p99 ms", "runs", "PostgreSQL ms (loaded)", "DuckDB mean ms", "DuckDB ms (writes)", "Freshet", "PostgreSQL", "DuckDB", "Freshet error"],
        &rows,
    );
    // Only the systems that ran (`--no-postgres`, `--no-duckdb`).
    let mut line = format!("total of the {} queries: Freshet {:.0} ms after loading, {:.0} ms (means) under TPC-C", rows.len(), totals[0], totals[1]);
    if runs.get(1).is_some() {
        line += &format!("; PostgreSQL {:.0} ms after loading", totals[2]);
    }
    if totals[3] > 0.0 {
        line += &format!("; DuckDB {:.0} ms", totals[3]);
        if totals[4] > 0.0 {
            line += &format!(", {:.0} ms with writes", totals[4]);
        }
    }
    println!("{line}");
    if totals[3] > 0.0 {
        println!(
            "Freshet / DuckDB total query time = {:.2}x after loading, {:.2}x with TPC-C running in Freshet",
            totals[0] / totals[3],
            totals[1] / totals[3]
        );
    }
    if let (Some(w), true) = (duck.as_ref().and_then(|d| d.writes.as_ref()), totals[4] > 0.0) {
        println!(
            "with writes on both: Freshet / DuckDB total query time = {:.2}x, while Freshet committed {:.0} TPC-C transactions/s and DuckDB {:.1} New-Order/Payment transactions/s",
            totals[1] / totals[4],
            runs[0].stats.tps(),
            w.committed as f64 / w.seconds
        );
    }

    let mut objects: Vec<Value> = runs
        .iter()
        .map(|r| {
            let system = r.system;
            let mut o = run_json(r, &args.tpcc, args.streams, &|name| correct(system, name));
            o["answers_after_load_ms"] = json!(r.answers.iter().map(|a| (a.name.clone(), json!(a.ms))).collect::<serde_json::Map<_, _>>());
            o
        })
        .collect();
    if let Some(d) = &duck {
        let queries: serde_json::Map<String, Value> = d
            .queries
            .iter()
            .map(|DuckQuery { name, result, times, times_with_writes }| {
                let max = |t: &[f64]| t.iter().copied().fold(f64::NAN, f64::max);
                let with_writes = (!times_with_writes.is_empty())
                    .then(|| json!({ "runs": times_with_writes.len(), "mean_ms": mean(times_with_writes), "p99_ms": max(times_with_writes) }));
                (name.clone(), json!({ "runs": times.len(), "mean_ms": mean(times), "p99_ms": max(times), "correct": correct("duckdb", name), "error": result.as_ref().err(), "with_writes": with_writes }))
            })
            .collect();
        objects.push(json!({
            "system": "duckdb", "mode": "static", "version": d.version, "warehouses": args.tpcc.warehouses, "machine": machine(),
            "load_s": d.load_s, "csv_generate_s": d.generate_s, "queries": queries,
            "writes": d.writes.as_ref().map(|w| json!({
                "committed": w.committed, "aborted": w.aborted, "seconds": w.seconds, "tps": w.committed as f64 / w.seconds, "error": w.error,
            })),
        }));
    }
    write_json(args.tpcc.json.as_deref(), &json!(objects))?;
    if let Some(dir) = &args.tpcc.charts {
        throughput_chart(dir, &runs, &args.tpcc)?;
        let names: Vec<String> = args.tpcc.ch_queries().into_iter().map(|(n, _)| n).collect();
        let labels = ["Freshet, TPC-C running", "Freshet, after loading", "PostgreSQL, after loading", "DuckDB", "DuckDB, with writes"];
        let series: Vec<(String, Vec<Option<f64>>)> =
            labels.iter().zip(bars).filter(|(_, v)| v.iter().any(Option::is_some)).map(|(l, v)| (l.to_string(), v)).collect();
        let title = format!("CH-benCHmark query times, W={}", args.tpcc.warehouses);
        bar_chart(&dir.join("queries.svg"), &title, "ms (log scale)", true, &names, &series)?;
    }
    finish(&runs)
}
