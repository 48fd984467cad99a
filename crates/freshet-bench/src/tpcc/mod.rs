//! TPC-C (revision 5.11): the nine tables, the initial database, the five transactions in the
//! standard mix from terminals without keying or think time, and the consistency conditions.
//!
//! Data flow of a run: [`load::load`] creates the schema and copies each warehouse's
//! generated CSV ([`generate`]) in; [`run::run`] starts one thread per terminal, each with its
//! own connection and [`txn::StatementDriver`], drawing transactions and inputs from a
//! [`terminal::Terminal`]; [`consistency::check`] then verifies conditions 1–4.

pub mod consistency;
pub mod generate;
pub mod load;
mod native;
pub mod procedures;
pub mod random;
pub mod run;
pub mod schema;
pub mod terminal;
pub mod txn;

pub use txn::{StatementDriver, TpccDriver, TxnKind};
