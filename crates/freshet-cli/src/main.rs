//! The `freshet` command: `freshet serve` runs the PostgreSQL-protocol server; `freshet bench`
//! runs the benchmarks side by side with the systems a user would compare against.

mod bench;

mod alloc;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use freshet::{Config, Database};
use freshet_server::{Server, ServerConfig};

#[derive(Parser)]
#[command(name = "freshet", version, about = "Freshet: an in-memory HTAP SQL database")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve SQL over the PostgreSQL wire protocol.
    Serve(ServeArgs),
    /// Run a benchmark (see `freshet bench --help`).
    Bench(bench::BenchArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on.
    #[arg(long, default_value_t = 5433)]
    port: u16,
    /// Directory for a Unix-domain socket `.s.PGSQL.<port>`, as PostgreSQL's
    /// `unix_socket_directories`: clients on this machine connect with `psql -h <dir>` or
    /// `host=<dir>`, at a much lower cost per message than over TCP. An empty value listens on
    /// TCP only.
    // An OsString, not a PathBuf: clap refuses an empty path, and '' is how TCP only is asked.
    #[arg(long, default_value = "/tmp")]
    unix_socket_dir: std::ffi::OsString,
    /// Directory that keeps the database: its redo log and checkpoints. Created if missing;
    /// recovered from at start. One server at a time may use it.
    #[arg(long, default_value = "./freshet-data")]
    data_dir: PathBuf,
    /// Keep nothing on disk: everything is lost when the server stops.
    #[arg(long, conflicts_with = "data_dir")]
    in_memory: bool,
    /// The default of the `synchronous_commit` setting: `on` acknowledges a commit once its
    /// redo record is on stable storage (group commit), `off` at once (asynchronous commit;
    /// a crash may lose the last few milliseconds of commits, never part of a transaction).
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    synchronous_commit: String,
    /// Log growth, in MiB, after which a checkpoint is written in the background.
    #[arg(long, default_value_t = 256)]
    checkpoint_mb: u64,
    /// Seconds after which a checkpoint is written if anything was logged since the last.
    #[arg(long, default_value_t = 300)]
    checkpoint_seconds: u64,
    /// Give each partition's executor a CPU of its own (the last CPUs the server may use) and
    /// keep every other thread of the server on the CPUs left; nothing is pinned when there
    /// are no more CPUs than partitions. Worth it when the executors are busy beside
    /// analytical queries; off by default, since with statement-by-statement clients the
    /// network threads need the CPUs more than a pinned, half-idle executor does.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pin_cpus: bool,
    /// Let an executor hold back the wakes of replies while more jobs are queued and send them
    /// together. Off by default for the server: over the wire a held reply delays the client's
    /// next request (procedure calls ran 25% slower with it); an embedded database has it on.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    batch_reply_wakes: bool,
    /// Scheduling niceness of the partition executors, −20 to 0: negative lets an executor
    /// that has work take its CPU ahead of the network threads and of clients on the same
    /// machine (procedure calls over the wire ran 14% faster at −10). Needs CAP_SYS_NICE
    /// (e.g. root); without it the executors keep the process's niceness (logged).
    #[arg(long, default_value_t = -10, allow_negative_numbers = true, value_parser = clap::value_parser!(i32).range(-20..=0))]
    executor_nice: i32,
    /// Microseconds an executor keeps polling its empty queue, yielding its CPU between polls,
    /// before it sleeps, 0–10000; 0 sleeps at once, and each job then costs its sender a
    /// wake-up. Without `--pin-cpus` only a busy executor polls (one that waited for jobs
    /// during at most half of its last millisecond).
    #[arg(long, default_value_t = Config::DEFAULT_EXECUTOR_POLL.as_micros() as u64, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    executor_poll_us: u64,
    /// Let a connection that finds its partition's executor idle run its statement, commit
    /// or rollback on its own network thread instead of handing it to the executor thread,
    /// saving two thread wakes per statement; jobs still run one at a time, in order.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    inline_statements: bool,
    /// Likewise for procedure calls. Off by default: a call runs for tens of microseconds,
    /// and on the executor (at its raised priority) it overlaps the network threads'
    /// protocol work instead of holding one of them.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    inline_calls: bool,
    /// Worker threads of the analytical engine (default: the number of CPUs minus the
    /// partition executors, at least one; 0 also means that).
    #[arg(long)]
    olap_threads: Option<usize>,
    /// Scheduling niceness of the analytical workers, 0–19: higher gives the transaction
    /// executors more of the CPU when both sides are busy.
    #[arg(long, default_value_t = 0)]
    olap_nice: i32,
    /// MiB the analytical queries may hold together in hash tables, sorts and aggregates
    /// (default: a quarter of physical memory; 0 also means that). Past it a query spills
    /// where it can and otherwise fails with SQLSTATE 53200.
    #[arg(long, default_value_t = 0)]
    olap_memory_mb: u64,
    /// Threads that serve client connections (protocol, parsing, planning, and with
    /// `--inline-statements` the statements an idle executor leaves them; default: the number
    /// of CPUs, or with `--inline-statements false` the CPUs minus the partition executors, at
    /// least one).
    #[arg(long)]
    net_threads: Option<usize>,
    /// Microseconds a network thread that has nothing to do waits, yielding its CPU, for the
    /// reply of an executor job some connection awaits before it sleeps, 0–1000 (0: it
    /// sleeps at once). A reply that comes meanwhile is taken without a wake-up, which the
    /// executor would otherwise pay for each (a futex call, on a virtual machine an
    /// interrupt to another CPU). Waits only while a connection awaits a job.
    #[arg(long, default_value_t = DEFAULT_NET_SPIN_US, value_parser = clap::value_parser!(u64).range(0..=1000))]
    net_spin_us: u64,
    /// Partitions, each owned by one executor thread. Tables declared with
    /// `PARTITION BY HASH (column)` spread over them; other tables are replicated on each.
    #[arg(long, default_value_t = 1)]
    partitions: usize,
    /// The default of `freshet.max_staleness`: how old a snapshot an analytical query may
    /// read (0, or a duration such as 250ms or 1s). Queries that accept the same staleness
    /// share one snapshot.
    #[arg(long, default_value = "0", value_parser = parse_staleness)]
    max_staleness: std::time::Duration,
    /// The default of `freshet.snapshot_mode`: `cow` (copy-on-write of column segments) or
    /// `fork` (each analytical query runs in a child process forked at a transaction boundary).
    #[arg(long, default_value = "cow", value_parser = ["cow", "fork"])]
    snapshot_mode: String,
    /// The default of `freshet.foreign_keys`: what CREATE TABLE does with a FOREIGN KEY
    /// constraint, which Freshet does not enforce: `refuse` (the statement fails with 0A000)
    /// or `ignore` (the table is created without it, with a notice; for schemas written for
    /// PostgreSQL, such as BenchBase's).
    #[arg(long, default_value = "refuse", value_parser = ["refuse", "ignore"])]
    foreign_keys: String,
}

fn parse_staleness(s: &str) -> Result<std::time::Duration, String> {
    freshet::snapshots::parse_duration(s).ok_or_else(|| format!("not a duration: {s} (use e.g. 0, 250ms, 1s)"))
}

fn main() -> anyhow::Result<()> {
    alloc::keep_freed_memory();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_target(false)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Bench(args) => bench::run(args),
    }
}

/// The default of `serve --net-spin-us`.
const DEFAULT_NET_SPIN_US: u64 = 200;

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let mut config = Config {
        partitions: args.partitions,
        pin_cpus: args.pin_cpus,
        batch_reply_wakes: args.batch_reply_wakes,
        executor_nice: args.executor_nice,
        executor_poll: std::time::Duration::from_micros(args.executor_poll_us),
        inline_statements: args.inline_statements,
        inline_calls: args.inline_calls,
        synchronous_commit: args.synchronous_commit == "on",
        checkpoint_bytes: args.checkpoint_mb.max(1) << 20,
        checkpoint_interval: std::time::Duration::from_secs(args.checkpoint_seconds.max(1)),
        max_staleness: args.max_staleness,
        snapshot_mode: freshet::SnapshotMode::parse(&args.snapshot_mode).unwrap_or(freshet::SnapshotMode::Cow),
        olap_nice: args.olap_nice,
        olap_memory_limit: args.olap_memory_mb << 20,
        foreign_keys: if args.foreign_keys == "ignore" { freshet::ForeignKeys::Ignore } else { freshet::ForeignKeys::Refuse },
        ..Config::default()
    };
    if let Some(n) = args.olap_threads {
        config.olap_threads = n;
    }
    if args.in_memory {
        tracing::info!("in-memory mode: nothing is written to disk");
    } else {
        tracing::info!(data_dir = %args.data_dir.display(), synchronous_commit = %args.synchronous_commit, "opening the data directory");
        config.data_dir = Some(args.data_dir.clone());
    }
    let db = match Database::open(config) {
        Ok(db) => db,
        Err(e) => {
            // A clear message and a non-zero exit, without a backtrace.
            eprintln!("freshet: cannot open the database: {e}");
            if let Some(hint) = &e.hint {
                eprintln!("hint: {hint}");
            }
            std::process::exit(1);
        }
    };
    // The network threads (started from this thread) stay off the executors' CPUs.
    db.keep_off_executors();
    // Without inline statements every partition has an executor thread that is busy whenever
    // its clients are, and network threads beyond the remaining cores only add context
    // switches. With them, the network threads run the statements while the executors idle.
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let net_threads = args.net_threads.unwrap_or_else(|| if args.inline_statements { cpus } else { cpus.saturating_sub(args.partitions).max(1) });
    let runtime = freshet_server::network_runtime(net_threads, std::time::Duration::from_micros(args.net_spin_us)).context("cannot start the network runtime")?;
    runtime.block_on(async {
        let unix_socket_dir = Some(PathBuf::from(&args.unix_socket_dir)).filter(|d| !d.as_os_str().is_empty());
        let server = Server::bind(db.clone(), &ServerConfig { host: args.host.clone(), port: args.port, unix_socket_dir })
            .await
            .context("cannot start the server")?;
        server.run(shutdown_signal()).await.context("server failed")?;
        Ok::<(), anyhow::Error>(())
    })?;
    // Asynchronous commits still in flight become durable before the process ends.
    if let Err(e) = db.close() {
        tracing::error!("could not make the last commits durable: {e}");
        std::process::exit(1);
    }
    tracing::info!("stopped");
    Ok(())
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("cannot install the SIGTERM handler: {e}");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received, shutting down"),
        _ = term.recv() => tracing::info!("SIGTERM received, shutting down"),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Cli, Command};

    fn serve_args(args: &[&str]) -> super::ServeArgs {
        match Cli::try_parse_from(["freshet", "serve"].iter().chain(args)).unwrap().command {
            Command::Serve(a) => a,
            Command::Bench(_) => unreachable!("parsed a serve command"),
        }
    }

    /// `--unix-socket-dir ''` (TCP only) parses, as the README says; the default is /tmp.
    #[test]
    fn an_empty_unix_socket_dir_means_tcp_only() {
        assert_eq!(serve_args(&["--unix-socket-dir", ""]).unix_socket_dir, "");
        assert_eq!(serve_args(&[]).unix_socket_dir, "/tmp");
        assert!(Cli::try_parse_from(["freshet", "serve", "--executor-poll-us", "10001"]).is_err());
    }

    /// `--net-spin-us`: 200 unless given, 0 allowed (sleep at once), at most 1000.
    #[test]
    fn network_threads_wait_for_replies_within_the_documented_range() {
        assert_eq!(serve_args(&[]).net_spin_us, super::DEFAULT_NET_SPIN_US);
        assert_eq!(super::DEFAULT_NET_SPIN_US, 200, "the README's default");
        assert_eq!(serve_args(&["--net-spin-us", "0"]).net_spin_us, 0);
        assert!(Cli::try_parse_from(["freshet", "serve", "--net-spin-us", "1001"]).is_err());
    }
}
