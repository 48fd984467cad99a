//! The socket of one connection: framed reads and buffered writes.
//!
//! Reads go through a buffer and are cancel-safe: dropping a pending read loses no bytes, so
//! a read can be raced against a cancel request. Writes collect in `out` and reach the socket
//! only at [`Wire::flush`] (Sync, Flush, the end of a simple query, before waiting for COPY
//! data) or when `out` grows past [`FLUSH_THRESHOLD`], so a pipeline of many small results
//! leaves in a few large writes.
//!
//! The socket is TCP or, for a client on the same machine, a Unix-domain socket ([`Socket`]);
//! the protocol is the same on both.

use std::os::fd::AsRawFd;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::{TcpStream, UnixStream};

use crate::error::ConnError;
use crate::message::MAX_MESSAGE_LEN;

/// Buffered output is written out once it reaches this size.
pub const FLUSH_THRESHOLD: usize = 64 * 1024;

/// Largest startup packet accepted (PostgreSQL's limit).
pub const MAX_STARTUP_LEN: usize = 10_000;

/// A client's connection.
pub enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Socket {
    async fn read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.read_buf(buf).await,
            Socket::Unix(s) => s.read_buf(buf).await,
        }
    }

    async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Socket::Tcp(s) => s.write_all(bytes).await,
            Socket::Unix(s) => s.write_all(bytes).await,
        }
    }

    async fn shutdown(&mut self) -> std::io::Result<()> {
        match self {
            Socket::Tcp(s) => s.shutdown().await,
            Socket::Unix(s) => s.shutdown().await,
        }
    }

    /// Waits until a byte can be read, and says how many were there without taking them: 0
    /// when the peer has closed its end.
    async fn peek_byte(&self) -> std::io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.peek(&mut [0u8; 1]).await,
            Socket::Unix(s) => loop {
                s.readable().await?;
                let fd = s.as_raw_fd();
                let peeked = s.try_io(Interest::READABLE, || {
                    let mut byte = 0u8;
                    // SAFETY: `fd` is this open socket's descriptor and `byte` a writable
                    // buffer of the one byte asked for.
                    let n = unsafe { libc::recv(fd, (&raw mut byte).cast(), 1, libc::MSG_PEEK) };
                    usize::try_from(n).map_err(|_| std::io::Error::last_os_error())
                });
                match peeked {
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                    other => return other,
                }
            },
        }
    }
}

pub struct Wire {
    socket: Socket,
    input: BytesMut,
    /// Messages waiting to be written.
    pub out: BytesMut,
}

impl Wire {
    pub fn new(socket: Socket) -> Self {
        Wire { socket, input: BytesMut::with_capacity(8 * 1024), out: BytesMut::with_capacity(16 * 1024) }
    }

    /// Reads until `n` bytes are buffered; `Ok(false)` if the client closed the connection first.
    async fn fill(&mut self, n: usize) -> Result<bool, ConnError> {
        while self.input.len() < n {
            self.input.reserve((n - self.input.len()).min(FLUSH_THRESHOLD));
            if self.socket.read_buf(&mut self.input).await? == 0 {
                if self.input.is_empty() {
                    return Ok(false);
                }
                return Err(ConnError::protocol("unexpected EOF within message"));
            }
        }
        Ok(true)
    }

    /// Whether a complete message is already buffered (reading it will not wait).
    /// Completes when the client has closed its end of the connection while a result is
    /// being computed. A client that has sent more (pipelined messages not read yet) is not
    /// considered gone: this then never completes.
    pub async fn client_gone(&self) {
        match self.socket.peek_byte().await {
            Ok(0) | Err(_) => {}
            Ok(_) => std::future::pending::<()>().await,
        }
    }

    pub fn has_message(&self) -> bool {
        if self.input.len() < 5 {
            return false;
        }
        let len = i32::from_be_bytes([self.input[1], self.input[2], self.input[3], self.input[4]]);
        usize::try_from(len).is_ok_and(|len| self.input.len() > len)
    }

    /// Reads one message: its type byte and body. `None` when the client closed the connection
    /// between messages.
    pub async fn read_message(&mut self) -> Result<Option<(u8, Bytes)>, ConnError> {
        if !self.fill(5).await? {
            return Ok(None);
        }
        let tag = self.input[0];
        let len = i32::from_be_bytes([self.input[1], self.input[2], self.input[3], self.input[4]]);
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| (4..=MAX_MESSAGE_LEN).contains(&l))
            .ok_or_else(|| ConnError::protocol(format!("invalid message length {len}")))?;
        if !self.fill(1 + len).await? {
            return Err(ConnError::protocol("unexpected EOF within message"));
        }
        self.input.advance(5);
        Ok(Some((tag, self.input.split_to(len - 4).freeze())))
    }

    /// Reads the untyped startup packet: its body after the length word. `None` on EOF.
    pub async fn read_startup(&mut self) -> Result<Option<Bytes>, ConnError> {
        if !self.fill(4).await? {
            return Ok(None);
        }
        let len = i32::from_be_bytes([self.input[0], self.input[1], self.input[2], self.input[3]]);
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| (8..=MAX_STARTUP_LEN).contains(&l))
            .ok_or_else(|| ConnError::protocol(format!("invalid length of startup packet {len}")))?;
        if !self.fill(len).await? {
            return Err(ConnError::protocol("incomplete startup packet"));
        }
        self.input.advance(4);
        Ok(Some(self.input.split_to(len - 4).freeze()))
    }

    /// Whether the client sent bytes after its startup packet (only legal after SSLRequest
    /// or GSSENCRequest was answered).
    pub fn has_buffered_input(&self) -> bool {
        !self.input.is_empty()
    }

    /// Writes one byte immediately (the answer to SSLRequest / GSSENCRequest).
    pub async fn write_byte(&mut self, b: u8) -> Result<(), ConnError> {
        self.socket.write_all(&[b]).await?;
        Ok(())
    }

    /// Sends everything buffered.
    pub async fn flush(&mut self) -> Result<(), ConnError> {
        if !self.out.is_empty() {
            self.socket.write_all(&self.out).await?;
            self.out.clear();
        }
        Ok(())
    }

    /// Sends what is buffered if it has grown large.
    pub async fn flush_if_large(&mut self) -> Result<(), ConnError> {
        if self.out.len() >= FLUSH_THRESHOLD {
            self.flush().await?;
        }
        Ok(())
    }

    pub async fn shutdown(&mut self) {
        let _ = self.socket.shutdown().await;
    }
}
