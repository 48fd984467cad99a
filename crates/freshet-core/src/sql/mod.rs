//! The short-statement SQL path and DDL.
//!
//! `parse` turns text into sqlparser statements (once; the analytical side receives the same
//! AST). `bind` resolves names and types; `plan` builds [`plan::OltpPlan`]s with an access
//! path; `exec` runs them inside an executor job; `ddl` plans schema changes. One SELECT on
//! this path: `SELECT abalance FROM pgbench_accounts WHERE aid = $1` binds to
//! `Expr::Column{index: 2}` over the primary key `Access::Index{eq: [Param 0]}`, and runs as
//! one hash lookup on the partition's executor.

pub mod array_params;
pub mod bind;
pub mod copy_options;
pub mod ddl;
pub mod dml_with;
pub mod exec;
pub mod expr;
pub mod functions;
pub mod names;
pub mod parse;
pub mod plan;
pub mod plpgsql;

pub use parse::parse;
