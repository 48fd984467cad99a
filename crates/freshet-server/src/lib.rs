//! Freshet's PostgreSQL server: the v3 wire protocol over a [`freshet::Database`].
//!
//! ```no_run
//! # async fn serve() -> std::io::Result<()> {
//! let db = freshet::Database::open(freshet::Config::default()).map_err(std::io::Error::other)?;
//! let server = freshet_server::Server::bind(db, &freshet_server::ServerConfig::default()).await?;
//! server.run(async { let _ = tokio::signal::ctrl_c().await; }).await
//! # }
//! ```
//!
//! The server listens on TCP and, when [`ServerConfig::unix_socket_dir`] names a directory, on
//! a Unix-domain socket there named as PostgreSQL names its own (`.s.PGSQL.<port>`), so that
//! `psql -h <dir> -p <port>` and libpq-style `host=<dir>` connection strings reach it; on
//! one machine that socket costs clients and the server much less per message than TCP.
//!
//! Each accepted connection runs in its own task: startup ([`startup`]), then a loop over
//! frontend messages ([`connection`]) that drives one [`freshet::Session`]. Statements of the
//! simple and the extended protocol, COPY, and cancellation map onto the session's
//! prepare/execute API; this crate adds only the wire formats ([`encode`], [`decode`],
//! [`numeric`]) and the protocol's state (prepared statements, portals, error recovery).
//!
//! INVARIANTS
//! - Nothing a client sends can panic the server or affect another connection: a malformed
//!   message closes its own connection with FATAL 08P01; a statement error is an
//!   ErrorResponse and the session continues. Should a connection task panic anyway (a bug),
//!   the panic is caught and logged, and the accept loop goes on.
//! - Output is buffered and written at Sync, Flush, the end of a simple query, before waiting
//!   for COPY data, and whenever 64 KiB have accumulated.
//!
//! Not implemented: TLS and GSSAPI encryption (requests are declined), password
//! authentication, the function call protocol, replication, binary COPY.

mod backend;
mod cancel;
mod connection;
mod copy;
mod decode;
mod encode;
mod error;
mod extended;
mod message;
mod numeric;
mod results;
mod startup;
mod wire;

use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::net::{TcpListener, UnixListener};

use crate::cancel::CancelRegistry;
use crate::connection::Connection;
use crate::error::{codes, ConnError, SqlError};
use crate::wire::{Socket, Wire};

pub use crate::error::{ConnError as Error, Severity};

/// Where the server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    pub host: String,
    pub port: u16,
    /// A directory for a Unix-domain socket `.s.PGSQL.<port>` (the port the TCP listener
    /// got), as PostgreSQL's `unix_socket_directories`; `None`: TCP only.
    pub unix_socket_dir: Option<PathBuf>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig { host: "127.0.0.1".into(), port: 5433, unix_socket_dir: None }
    }
}

/// The runtime whose `threads` worker threads ("freshet-net") serve the connections: the
/// protocol, parsing and planning, and the statements a session runs inline. A worker with
/// nothing left to do waits up to `reply_wait` for an awaited executor reply before it sleeps
/// ([`freshet::await_reply_briefly`]; zero sleeps at once).
pub fn network_runtime(threads: usize, reply_wait: Duration) -> std::io::Result<tokio::runtime::Runtime> {
    if !reply_wait.is_zero() {
        freshet::watch_replies();
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .on_thread_park(move || freshet::await_reply_briefly(reply_wait))
        .thread_name("freshet-net")
        // Sessions run on these threads; planning a statement and nested procedure calls need
        // more than the default 2 MiB in a debug build (see .cargo/config.toml).
        .thread_stack_size(8 << 20)
        .enable_all()
        .build()
}

/// The name of the Unix-domain socket for `port` in `dir`, as libpq looks for it.
pub fn unix_socket_path(dir: &Path, port: u16) -> PathBuf {
    dir.join(format!(".s.PGSQL.{port}"))
}

/// A listening Unix-domain socket; its file is removed when the server stops.
struct UnixSocket {
    listener: UnixListener,
    path: PathBuf,
}

impl UnixSocket {
    /// Binds `path`. A socket file left there by a server that is gone (nothing accepts on
    /// it) is replaced; one a running server accepts on is an error, as is any other file.
    fn bind(path: PathBuf) -> std::io::Result<UnixSocket> {
        use std::os::unix::fs::{FileTypeExt, PermissionsExt};
        if let Ok(meta) = std::fs::symlink_metadata(&path) {
            if !meta.file_type().is_socket() {
                return Err(std::io::Error::new(std::io::ErrorKind::AlreadyExists, format!("{} exists and is not a socket", path.display())));
            }
            if std::os::unix::net::UnixStream::connect(&path).is_ok() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    format!("another server is listening on {}", path.display()),
                ));
            }
            std::fs::remove_file(&path)?;
        }
        let listener = UnixListener::bind(&path)?;
        // Anyone on the machine may connect, as PostgreSQL's default socket permissions allow.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777))?;
        Ok(UnixSocket { listener, path })
    }
}

impl Drop for UnixSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// State shared by every connection of a server.
struct Shared {
    db: freshet::Database,
    cancels: Arc<CancelRegistry>,
}

/// A bound PostgreSQL server.
pub struct Server {
    listener: TcpListener,
    unix: Option<UnixSocket>,
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Server {
    /// Binds the listening sockets (port 0 picks a free port, which the Unix-domain socket's
    /// name then carries).
    pub async fn bind(db: freshet::Database, config: &ServerConfig) -> std::io::Result<Server> {
        let listener = TcpListener::bind((config.host.as_str(), config.port))
            .await
            .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {}:{}: {e}", config.host, config.port)))?;
        let addr = listener.local_addr()?;
        let unix = match &config.unix_socket_dir {
            Some(dir) => {
                let path = unix_socket_path(dir, addr.port());
                let socket = UnixSocket::bind(path.clone())
                    .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on Unix-domain socket {}: {e}", path.display())))?;
                Some(socket)
            }
            None => None,
        };
        tracing::info!(
            "listening on {}:{}{}; authentication is trust: any user and database name, no password",
            config.host,
            addr.port(),
            unix.as_ref().map_or(String::new(), |u| format!(" and on {}", u.path.display()))
        );
        let shared = Arc::new(Shared { db, cancels: Arc::new(CancelRegistry::default()) });
        Ok(Server { listener, unix, addr, shared })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The Unix-domain socket's path, if the server listens on one.
    pub fn unix_socket_path(&self) -> Option<&Path> {
        self.unix.as_ref().map(|u| u.path.as_path())
    }

    /// Serves until `shutdown` completes, then stops accepting and lets connections end.
    /// Open connections keep running in their tasks until their clients leave.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()> + Send) -> std::io::Result<()> {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                () = &mut shutdown => break,
                accepted = self.listener.accept() => accepted.map(|(s, peer)| (Socket::Tcp(s), Some(peer))),
                accepted = accept_unix(self.unix.as_ref()) => accepted.map(|s| (Socket::Unix(s), None)),
            };
            match accepted {
                Ok((socket, peer)) => {
                    tokio::spawn(connection_task(socket, peer, self.shared.clone()));
                }
                Err(e) => {
                    // E.g. out of file descriptors: wait a moment instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        tracing::info!(addr = %self.addr, "no longer accepting connections");
        Ok(())
    }
}

/// The next connection on the Unix-domain socket; never, without one.
async fn accept_unix(unix: Option<&UnixSocket>) -> std::io::Result<tokio::net::UnixStream> {
    match unix {
        Some(u) => u.listener.accept().await.map(|(s, _)| s),
        None => std::future::pending().await,
    }
}

/// Runs one connection (`peer`: the client's address over TCP), containing any panic to it.
async fn connection_task(socket: Socket, peer: Option<SocketAddr>, shared: Arc<Shared>) {
    if AssertUnwindSafe(serve(socket, shared)).catch_unwind().await.is_err() {
        tracing::error!(?peer, "connection task panicked; connection closed");
    }
}

async fn serve(socket: Socket, shared: Arc<Shared>) {
    if let Socket::Tcp(s) = &socket {
        if let Err(e) = s.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
    }
    let mut wire = Wire::new(socket);
    let result = match startup::handshake(&mut wire, &shared).await {
        Ok(Some(started)) => Connection::new(&mut wire, started.session, started.registration).run().await,
        Ok(None) => Ok(()),
        Err(e) => Err(e),
    };
    let fatal = match result {
        Ok(()) => None,
        Err(ConnError::Io(e)) => {
            tracing::debug!(error = %e, "connection i/o failed");
            None
        }
        Err(ConnError::Protocol(message)) => Some(SqlError::fatal(codes::PROTOCOL_VIOLATION, message)),
        Err(ConnError::Sql(e)) => Some(SqlError { severity: Severity::Fatal, ..e }),
    };
    if let Some(e) = fatal {
        tracing::debug!(error = %e, "closing connection");
        backend::error_response(&mut wire.out, &e);
        let _ = wire.flush().await;
    }
    wire.shutdown().await;
}
