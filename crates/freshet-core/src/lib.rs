//! Freshet's transactional core.
//!
//! It builds without Arrow or DataFusion: the catalog ([`catalog`]), columnar storage with
//! copy-on-write segments ([`storage`]), the partition executors that own the data and run
//! every write ([`executor`]), and SQL types ([`types`]). The analytical side (the
//! `freshet-olap` crate) reads the immutable snapshots this crate hands out.

pub mod catalog;
pub mod engine;
pub mod error;
pub mod executor;
pub mod sequence;
pub mod sql;
pub mod storage;
pub mod txn;
pub mod types;
pub mod wal;

pub use error::{try_vec, Error, ErrorFields, Result, SqlState};
