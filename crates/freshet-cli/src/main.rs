//! The `freshet` command: `freshet serve` runs the PostgreSQL-protocol server; `freshet bench`
//! runs the benchmarks side by side with the systems a user would compare against.

mod bench;

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
    /// Directory that keeps the database. Accepted now; the database is kept in memory only
    /// until the redo log and checkpoints exist.
    #[arg(long, default_value = "./freshet-data")]
    data_dir: PathBuf,
    /// Keep nothing on disk.
    #[arg(long)]
    in_memory: bool,
    /// Worker threads of the analytical engine (default: number of CPUs).
    #[arg(long)]
    olap_threads: Option<usize>,
    /// Partitions, each owned by one executor thread. Tables declared with
    /// `PARTITION BY HASH (column)` spread over them; other tables are replicated on each.
    #[arg(long, default_value_t = 1)]
    partitions: usize,
}

fn main() -> anyhow::Result<()> {
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

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let mut config = Config { partitions: args.partitions, ..Config::default() };
    if let Some(n) = args.olap_threads {
        config.olap_threads = n;
    }
    if args.in_memory {
        tracing::info!("in-memory mode: nothing is written to disk");
    } else {
        tracing::warn!(
            data_dir = %args.data_dir.display(),
            "durability is not implemented yet: the database lives in memory and is lost when the server stops"
        );
        config.data_dir = Some(args.data_dir.clone());
    }
    let db = Database::open(config).map_err(|e| anyhow::anyhow!("cannot open the database: {e}"))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .thread_name("freshet-net")
        .enable_all()
        .build()
        .context("cannot start the network runtime")?;
    runtime.block_on(async {
        let server = Server::bind(db, &ServerConfig { host: args.host.clone(), port: args.port })
            .await
            .with_context(|| format!("cannot listen on {}:{}", args.host, args.port))?;
        server.run(shutdown_signal()).await.context("server failed")?;
        tracing::info!("stopped");
        Ok(())
    })
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
