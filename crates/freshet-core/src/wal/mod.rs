//! Durability: the redo log ([`log`]), its records ([`record`]), and the file layer under it
//! ([`fs`]). Checkpoints, which need Arrow, live in the `freshet` crate and use the same file
//! layer and record encoding.

pub mod fs;
pub mod log;
pub mod record;

pub use fs::{Fs, RealFs};
pub use log::{Logged, Lsn, Wal};
pub use record::{RedoRecord, RowChange};
