//! A throw-away PostgreSQL 15 instance from Debian's packages, and a Freshet server child
//! process, for side-by-side runs.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

/// Runs a command and fails with its output if it fails.
pub fn run_cmd(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Installs PostgreSQL 15 (server, client, pgbench) if it is missing.
pub fn ensure_installed() -> anyhow::Result<()> {
    if Path::new(PG_BIN).join("postgres").exists() && Path::new(PG_BIN).join("pgbench").exists() {
        return Ok(());
    }
    println!("installing PostgreSQL from Debian's packages …");
    run_cmd(Command::new("apt-get").arg("update").arg("-q"))?;
    run_cmd(Command::new("apt-get").args(["install", "-y", "-q", "postgresql", "postgresql-contrib"]).env("DEBIAN_FRONTEND", "noninteractive"))?;
    Ok(())
}

pub fn pgbench_path() -> PathBuf {
    Path::new(PG_BIN).join("pgbench")
}

pub fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

pub fn wait_for_port(port: u16, timeout: Duration) -> anyhow::Result<()> {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("nothing listens on port {port} after {timeout:?}")
}

/// A PostgreSQL cluster in a temporary directory, run as the `postgres` user.
pub struct Postgres {
    pub port: u16,
    dir: PathBuf,
}

impl Postgres {
    /// Creates and starts a cluster with `settings` (`name=value` server options).
    pub fn start(settings: &[&str]) -> anyhow::Result<Postgres> {
        ensure_installed()?;
        let port = free_port()?;
        let dir = std::env::temp_dir().join(format!("freshet-bench-pg-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        run_cmd(Command::new("chown").args(["postgres:postgres"]).arg(&dir))?;
        let data = dir.join("data");
        as_postgres(&[&format!("{PG_BIN}/initdb"), "-D", data.to_str().unwrap_or_default(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])?;
        let mut options = format!("-p {port} -k {} -c listen_addresses=127.0.0.1", dir.display());
        for s in settings {
            options.push_str(&format!(" -c {s}"));
        }
        let log = dir.join("server.log");
        as_postgres(&[
            &format!("{PG_BIN}/pg_ctl"),
            "-D",
            data.to_str().unwrap_or_default(),
            "-o",
            &options,
            "-l",
            log.to_str().unwrap_or_default(),
            "-w",
            "start",
        ])?;
        Ok(Postgres { port, dir })
    }

    /// The directory of its Unix-domain socket.
    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = as_postgres(&[&format!("{PG_BIN}/pg_ctl"), "-D", data.to_str().unwrap_or_default(), "-m", "fast", "-w", "stop"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn as_postgres(args: &[&str]) -> anyhow::Result<String> {
    run_cmd(Command::new("runuser").args(["-u", "postgres", "--"]).args(args).current_dir("/tmp"))
}

/// Where a `freshet serve` child listens on a Unix-domain socket (the server's default).
const SOCKET_DIR: &str = "/tmp";

/// A `freshet serve` child process on a free port, in memory or with a data directory of its
/// own (removed when it stops).
pub struct FreshetServer {
    pub port: u16,
    pub data_dir: Option<PathBuf>,
    child: Child,
}

impl FreshetServer {
    /// `--in-memory`, with `extra` arguments.
    pub fn in_memory(extra: &[&str]) -> anyhow::Result<FreshetServer> {
        Self::spawn(None, extra)
    }

    /// With a fresh data directory under the system's temporary directory.
    pub fn durable(extra: &[&str]) -> anyhow::Result<FreshetServer> {
        let dir = std::env::temp_dir().join(format!("freshet-bench-data-{}-{}", std::process::id(), free_port()?));
        let _ = std::fs::remove_dir_all(&dir);
        Self::spawn(Some(dir), extra)
    }

    /// Starts a server on an existing data directory (after a crash, to time recovery).
    pub fn reopen(dir: PathBuf, extra: &[&str]) -> anyhow::Result<FreshetServer> {
        Self::spawn(Some(dir), extra)
    }

    fn spawn(data_dir: Option<PathBuf>, extra: &[&str]) -> anyhow::Result<FreshetServer> {
        let port = free_port()?;
        let exe = std::env::current_exe()?;
        let mut cmd = Command::new(exe);
        cmd.args(["serve", "--port", &port.to_string()]).arg("--unix-socket-dir").arg(SOCKET_DIR);
        match &data_dir {
            Some(d) => cmd.arg("--data-dir").arg(d),
            None => cmd.arg("--in-memory"),
        };
        let log = std::env::temp_dir().join(format!("freshet-bench-server-{port}.log"));
        let child = cmd
            .args(extra)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::from(std::fs::File::create(&log)?))
            .stderr(Stdio::null())
            .spawn()
            .context("starting freshet serve")?;
        let server = FreshetServer { port, data_dir, child };
        wait_for_port(port, Duration::from_secs(600))?;
        Ok(server)
    }

    /// What the server has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(std::env::temp_dir().join(format!("freshet-bench-server-{}.log", self.port))).unwrap_or_default()
    }

    /// The directory of its Unix-domain socket.
    pub fn socket_dir(&self) -> &Path {
        Path::new(SOCKET_DIR)
    }

    /// Stops the server with SIGKILL, keeping its data directory; returns it.
    pub fn crash(mut self) -> Option<PathBuf> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.remove_socket();
        self.data_dir.take()
    }
}

impl Drop for FreshetServer {
    fn drop(&mut self) {
        // SIGTERM first, so that it shuts down cleanly; then make sure.
        let _ = Command::new("kill").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                self.cleanup();
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.cleanup();
    }
}

impl FreshetServer {
    /// Removes the socket file a killed server leaves (one that stopped removed it itself).
    fn remove_socket(&self) {
        let _ = std::fs::remove_file(freshet_server::unix_socket_path(self.socket_dir(), self.port));
    }

    fn cleanup(&mut self) {
        self.remove_socket();
        let _ = std::fs::remove_file(std::env::temp_dir().join(format!("freshet-bench-server-{}.log", self.port)));
        if let Some(d) = self.data_dir.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
