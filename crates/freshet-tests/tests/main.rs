//! Freshet's integration tests, in one binary so that the large debug executable links once.

mod crash;
mod durability;
mod embedded;
mod freshness;
mod locking;
mod procedures;
mod protocol;
mod robustness;
mod slt;
mod snapshot;
mod tpcc;
mod transactions;
