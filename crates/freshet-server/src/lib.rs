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
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::net::{TcpListener, TcpStream};

use crate::cancel::CancelRegistry;
use crate::connection::Connection;
use crate::error::{codes, ConnError, SqlError};
use crate::wire::Wire;

pub use crate::error::{ConnError as Error, Severity};

/// Where the server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    pub host: String,
    pub port: u16,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig { host: "127.0.0.1".into(), port: 5433 }
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
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Server {
    /// Binds the listening socket (port 0 picks a free port).
    pub async fn bind(db: freshet::Database, config: &ServerConfig) -> std::io::Result<Server> {
        let listener = TcpListener::bind((config.host.as_str(), config.port)).await?;
        let addr = listener.local_addr()?;
        tracing::info!(
            "listening on {}:{}; authentication is trust: any user and database name, no password",
            config.host,
            addr.port()
        );
        let shared = Arc::new(Shared { db, cancels: Arc::new(CancelRegistry::default()) });
        Ok(Server { listener, addr, shared })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `shutdown` completes, then stops accepting and lets connections end.
    /// Open connections keep running in their tasks until their clients leave.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()> + Send) -> std::io::Result<()> {
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                accepted = self.listener.accept() => match accepted {
                    Ok((socket, _)) => {
                        tokio::spawn(connection_task(socket, self.shared.clone()));
                    }
                    Err(e) => {
                        // E.g. out of file descriptors: wait a moment instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
            }
        }
        tracing::info!(addr = %self.addr, "no longer accepting connections");
        Ok(())
    }
}

/// Runs one connection, containing any panic to it.
async fn connection_task(socket: TcpStream, shared: Arc<Shared>) {
    let peer = socket.peer_addr().ok();
    if AssertUnwindSafe(serve(socket, shared)).catch_unwind().await.is_err() {
        tracing::error!(?peer, "connection task panicked; connection closed");
    }
}

async fn serve(socket: TcpStream, shared: Arc<Shared>) {
    if let Err(e) = socket.set_nodelay(true) {
        tracing::debug!(error = %e, "cannot set TCP_NODELAY");
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
