//! The crash test. Clients commit transactions over the wire and record every commit that was
//! acknowledged; the server process is killed with SIGKILL at a random moment; after a restart
//! every acknowledged commit is present and no transaction is partly present. Checkpoints run
//! often during the rounds, so kills also land in the middle of writing one.
//!
//! The server is this test binary started again as a child process (running only
//! `crash_server_child`). `FRESHET_CRASH_ROUNDS` sets the number of rounds (default 3).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use freshet::{Config, Database};
use freshet_server::{Server, ServerConfig};
use rand::RngExt;
use tokio_postgres::NoTls;

use crate::durability::{durable_config, TempDir};

const CHILD_DIR: &str = "FRESHET_CRASH_CHILD_DIR";
const CHILD_SYNC: &str = "FRESHET_CRASH_CHILD_SYNC";
const PARTITIONS: usize = 2;
const CLIENTS: i32 = 6;

/// The server side of the crash test; does nothing unless the crash test started it.
#[test]
#[ignore = "the server process of the crash test, which starts it"]
fn crash_server_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else { return };
    let sync = std::env::var(CHILD_SYNC).map_or(true, |v| v != "off");
    let config = Config { synchronous_commit: sync, checkpoint_bytes: 64 << 10, ..durable_config(Path::new(&dir), PARTITIONS) };
    let db = Database::open(config).expect("open the database");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let server = Server::bind(db, &ServerConfig { host: "127.0.0.1".into(), port: 0, unix_socket_dir: None }).await.expect("bind");
        println!("FRESHET_CRASH_PORT={}", server.local_addr().port());
        server.run(std::future::pending()).await.expect("serve");
    });
}

struct ServerProcess {
    child: std::process::Child,
    port: u16,
}

impl ServerProcess {
    fn start(dir: &Path, sync: bool) -> ServerProcess {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "crash::crash_server_child", "--ignored", "--nocapture", "--test-threads", "1"])
            .env(CHILD_DIR, dir)
            .env(CHILD_SYNC, if sync { "on" } else { "off" })
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the server process");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let port = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    // The test harness may print its own words before it on the line.
                    if let Some((_, p)) = line.split_once("FRESHET_CRASH_PORT=") {
                        break p.trim().parse().unwrap();
                    }
                }
                _ => panic!("the server process ended before it listened (status {:?})", child.wait()),
            }
        };
        // Keep reading so that the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        ServerProcess { child, port }
    }

    fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        let _ = self.child.wait();
    }
}

async fn connect(port: u16) -> tokio_postgres::Client {
    let conninfo = format!("host=127.0.0.1 port={port} user=crash dbname=crash");
    let (client, connection) = tokio_postgres::connect(&conninfo, NoTls).await.expect("connect");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// What one client has had acknowledged.
#[derive(Clone, Copy, Debug, Default)]
struct Acked {
    /// Transactions 1..=txn (each: an event row and its counter update) were acknowledged.
    txn: i64,
    /// Autocommit inserts 1..=single were acknowledged.
    single: i64,
}

/// One client's work until the connection breaks: transactions over a partitioned table and a
/// replicated one (so, over every partition), and autocommit inserts.
async fn client_loop(port: u16, c: i32, mut acked: Acked) -> Acked {
    let conninfo = format!("host=127.0.0.1 port={port} user=crash dbname=crash");
    let Ok((client, connection)) = tokio_postgres::connect(&conninfo, NoTls).await else { return acked };
    tokio::spawn(async move {
        let _ = connection.await;
    });
    loop {
        let k = acked.txn + 1;
        let txn = format!(
            "BEGIN; INSERT INTO ev VALUES ({c}, {k}, repeat('x', {len})); \
             UPDATE counters SET n = n + 1, last = {k} WHERE c = {c}; COMMIT",
            len = (k % 50) * 7
        );
        if client.batch_execute(&txn).await.is_err() {
            return acked;
        }
        acked.txn = k;
        let s = acked.single + 1;
        if client.batch_execute(&format!("INSERT INTO single VALUES ({c}, {s})")).await.is_err() {
            return acked;
        }
        acked.single = s;
    }
}

async fn rows(client: &tokio_postgres::Client, sql: &str) -> Vec<Vec<i64>> {
    client
        .simple_query(sql)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).unwrap().parse::<i64>().unwrap()).collect())
            }
            _ => None,
        })
        .collect()
}

/// Checks the recovered database against what was acknowledged; returns what is present
/// (the clients go on from there). With `sync`, every acknowledged commit must be there; with
/// asynchronous commit, a prefix of each client's commits may be (the last ones may be lost).
async fn verify(port: u16, acked: &HashMap<i32, Acked>, sync: bool) -> HashMap<i32, Acked> {
    let client = connect(port).await;
    let mut present = HashMap::new();
    for c in 0..CLIENTS {
        let a = acked[&c];
        let ks: Vec<i64> = rows(&client, &format!("SELECT k FROM ev WHERE c = {c} ORDER BY k")).await.into_iter().map(|r| r[0]).collect();
        let m = ks.len() as i64;
        assert_eq!(ks, (1..=m).collect::<Vec<_>>(), "client {c}: events have no holes");
        let counter = rows(&client, &format!("SELECT n, last FROM counters WHERE c = {c}")).await;
        assert_eq!(counter, vec![vec![m, m]], "client {c}: the counter update committed with each event, never apart");
        let singles: Vec<i64> =
            rows(&client, &format!("SELECT k FROM single WHERE c = {c} ORDER BY k")).await.into_iter().map(|r| r[0]).collect();
        let s = singles.len() as i64;
        assert_eq!(singles, (1..=s).collect::<Vec<_>>(), "client {c}: autocommit inserts have no holes");
        if sync {
            // At most the one transaction in flight at the kill may be there unacknowledged.
            assert!(m == a.txn || m == a.txn + 1, "client {c}: {m} transactions present, {} acknowledged", a.txn);
            assert!(s == a.single || s == a.single + 1, "client {c}: {s} inserts present, {} acknowledged", a.single);
        } else {
            assert!(m <= a.txn + 1 && s <= a.single + 1, "client {c}: more present than was ever sent");
        }
        present.insert(c, Acked { txn: m, single: s });
    }
    present
}

fn crash_rounds(rounds: usize, sync: bool) {
    let dir = TempDir::new("crash");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut acked: HashMap<i32, Acked> = (0..CLIENTS).map(|c| (c, Acked::default())).collect();
    let mut server = ServerProcess::start(&dir.0, sync);
    runtime.block_on(async {
        let client = connect(server.port).await;
        client
            .batch_execute(
                "CREATE TABLE ev (c INT, k BIGINT, payload TEXT, PRIMARY KEY (c, k)) PARTITION BY HASH (c); \
                 CREATE TABLE counters (c INT PRIMARY KEY, n BIGINT NOT NULL, last BIGINT NOT NULL); \
                 CREATE TABLE single (c INT, k BIGINT, PRIMARY KEY (c, k))",
            )
            .await
            .unwrap();
        for c in 0..CLIENTS {
            client.batch_execute(&format!("INSERT INTO counters VALUES ({c}, 0, 0)")).await.unwrap();
        }
    });
    let mut rng = rand::rng();
    let mut total = 0;
    for round in 0..rounds {
        let port = server.port;
        let clients: Vec<_> = acked.iter().map(|(&c, &a)| (c, runtime.spawn(client_loop(port, c, a)))).collect();
        std::thread::sleep(Duration::from_millis(rng.random_range(300..1500)));
        server.kill();
        for (c, h) in clients {
            acked.insert(c, runtime.block_on(h).unwrap());
        }
        let started = Instant::now();
        server = ServerProcess::start(&dir.0, sync);
        let recovery = started.elapsed();
        let present = runtime.block_on(verify(server.port, &acked, sync));
        let committed: i64 = present.values().map(|a| a.txn).sum();
        total = committed;
        eprintln!("crash round {round}: {committed} transactions present after recovery ({recovery:?} to restart)");
        acked = present;
    }
    server.kill();
    assert!(total > 0, "the clients committed something");
}

#[test]
fn acknowledged_commits_survive_sigkill() {
    let rounds = std::env::var("FRESHET_CRASH_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(3);
    crash_rounds(rounds, true);
}

#[test]
fn asynchronous_commit_loses_at_most_a_suffix() {
    crash_rounds(2, false);
}
