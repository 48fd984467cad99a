//! Reading a result in parts through a cursor, as psql's `FETCH_COUNT` and drivers' named
//! cursors do (`BEGIN; DECLARE c NO SCROLL CURSOR FOR q; FETCH FORWARD n FROM c` until no
//! rows come), over the wire against PostgreSQL 15 and a Freshet server on the same data.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::json;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

use super::postgres::{FreshetServer, Postgres};
use super::report::{machine, print_table, write_json};

#[derive(clap::Args)]
pub struct CursorsArgs {
    /// Rows in the table.
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// Timed reads of each query and part size (the best is reported).
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// The queries read through the cursor: every row, and a selective sorted one.
const QUERIES: [(&str, &str); 2] = [
    ("all rows", "SELECT id, grp, amount, note FROM big"),
    ("grp = 7, sorted", "SELECT id, amount FROM big WHERE grp = 7 ORDER BY amount DESC"),
];

const PARTS: [u64; 2] = [1_000, 10_000];

async fn connect(port: u16, user: &str) -> anyhow::Result<Client> {
    let (client, connection) = tokio_postgres::connect(&format!("host=127.0.0.1 port={port} user={user} dbname=postgres"), NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// Reads `query` through a cursor in parts of `part` rows (text rows, as psql reads them):
/// seconds, rows, and the sum of the first column.
async fn read(client: &Client, query: &str, part: u64) -> anyhow::Result<(f64, u64, i64)> {
    let started = Instant::now();
    client.batch_execute(&format!("BEGIN; DECLARE c NO SCROLL CURSOR FOR {query}")).await?;
    let fetch = format!("FETCH FORWARD {part} FROM c");
    let (mut rows, mut sum) = (0u64, 0i64);
    loop {
        let mut got = 0;
        for m in client.simple_query(&fetch).await? {
            if let SimpleQueryMessage::Row(r) = m {
                got += 1;
                sum += r.get(0).unwrap_or("0").parse::<i64>().context("an id")?;
            }
        }
        rows += got;
        if got == 0 {
            break;
        }
    }
    client.batch_execute("CLOSE c; COMMIT").await?;
    Ok((started.elapsed().as_secs_f64(), rows, sum))
}

/// Per query and part size: the best time, rows and sum.
async fn measure(client: &Client, args: &CursorsArgs) -> anyhow::Result<Vec<(f64, u64, i64)>> {
    client.batch_execute("CREATE TABLE big (id INT PRIMARY KEY, grp INT, amount BIGINT, note TEXT)").await?;
    client.batch_execute(&format!("INSERT INTO big SELECT g, g % 100, g * 3, 'row ' || g FROM generate_series(1, {}) g", args.rows)).await?;
    let mut out = Vec::new();
    for (_, query) in QUERIES {
        for part in PARTS {
            let mut best: Option<(f64, u64, i64)> = None;
            for _ in 0..args.runs.max(1) {
                let r = read(client, query, part).await?;
                if best.is_none_or(|b| r.0 < b.0) {
                    best = Some(r);
                }
            }
            out.extend(best);
        }
    }
    Ok(out)
}

pub fn run(args: CursorsArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    println!("PostgreSQL 15 …");
    let pg = Postgres::start(&[])?;
    let postgres = runtime.block_on(async { measure(&connect(pg.port, "postgres").await?, &args).await })?;
    drop(pg);
    println!("Freshet (server, in memory) …");
    let server = FreshetServer::in_memory(&[])?;
    let freshet = runtime.block_on(async { measure(&connect(server.port, "freshet").await?, &args).await })?;
    drop(server);
    let mut rows = Vec::new();
    let mut results = Vec::new();
    let cases = QUERIES.iter().flat_map(|(name, _)| PARTS.iter().map(move |p| (*name, *p)));
    for ((name, part), (p, f)) in cases.zip(postgres.iter().zip(&freshet)) {
        if (p.1, p.2) != (f.1, f.2) {
            bail!("{name}, parts of {part}: PostgreSQL read {} rows (sum {}), Freshet {} (sum {})", p.1, p.2, f.1, f.2);
        }
        rows.push(vec![name.to_string(), part.to_string(), p.1.to_string(), format!("{:.3}", p.0), format!("{:.3}", f.0), format!("{:.2}", p.0 / f.0)]);
        results.push(json!({"query": name, "part": part, "rows": p.1, "postgresql_s": p.0, "freshet_s": f.0, "ratio": p.0 / f.0}));
    }
    println!("\nReading through a cursor in parts ({} rows in the table, best of {}; same machine, one run)", args.rows, args.runs);
    print_table(&["query", "FETCH n", "rows", "PostgreSQL s", "Freshet s", "PostgreSQL/Freshet"], &rows);
    write_json(args.json.as_deref(), &json!({"benchmark": "cursors", "machine": machine(), "table_rows": args.rows, "results": results}))
}
