//! The extended query protocol: Parse, Bind, Describe, Execute, Close.
//!
//! A [`PreparedStatement`] is a planned statement plus the parameter types the client
//! declared (the binary layout of its parameters). Named statements live until closed or the
//! connection ends; the unnamed one is replaced by the next Parse or simple Query. A
//! [`Portal`] is a statement with its parameter values and result formats; it is executed in
//! one go or, with a row limit, in steps (PortalSuspended between them), and portals end with
//! the transaction (at Sync, outside a transaction block).

use std::sync::Arc;

use freshet::{DataType, Prepared, Statement, Value};

use crate::backend;
use crate::connection::Connection;
use crate::decode;
use crate::error::{codes, ConnError, SqlError};
use crate::message::{Bind, Target};
use crate::results::{RowCursor, Started};

pub struct PreparedStatement {
    pub prepared: Arc<Prepared>,
    /// Types the client declared per parameter (`None`: OID 0 or unknown).
    pub declared: Vec<Option<DataType>>,
    /// COPY describes as NoData, whatever its rows are.
    pub is_copy: bool,
}

impl PreparedStatement {
    /// The result columns a Describe reports, if any.
    fn described_columns(&self) -> Option<&Arc<Vec<freshet::ColumnInfo>>> {
        if self.is_copy { None } else { self.prepared.columns.as_ref() }
    }

    /// The type whose binary layout parameter `i` arrives in.
    fn wire_type(&self, i: usize) -> Option<DataType> {
        let declared = self.declared.get(i).copied().flatten();
        declared.or_else(|| self.prepared.param_types.get(i).copied())
    }
}

pub struct Portal {
    statement: Arc<PreparedStatement>,
    /// Result format per column.
    formats: Vec<i16>,
    state: PortalState,
}

enum PortalState {
    /// Bound, not executed yet.
    Ready(Vec<Value>),
    /// Suspended after a row limit.
    Rows(RowCursor),
    /// All rows sent; executing again sends none.
    Exhausted,
    /// A command that ran; it cannot run again.
    Done,
}

impl Connection<'_> {
    pub async fn parse(&mut self, name: String, sql: String, oids: &[u32]) -> Result<(), ConnError> {
        if name.is_empty() {
            self.statements.remove("");
        } else if self.statements.contains_key(&name) {
            let message = format!("prepared statement \"{name}\" already exists");
            return Err(SqlError::new(codes::DUPLICATE_PREPARED_STATEMENT, message).into());
        }
        let planning: Vec<Option<DataType>> = oids.iter().map(|&o| decode::planning_type(o)).collect();
        let arrays: Vec<bool> = oids.iter().map(|&o| decode::is_array(o)).collect();
        let mut parsed = self.session.parse(&sql)?;
        let (prepared, is_copy) = match parsed.len() {
            0 => (Box::pin(self.session.prepare(&sql, &planning)).await?, false),
            1 => {
                let statement = parsed.remove(0);
                let is_copy = matches!(statement, Statement::Copy { .. });
                let prepare = Box::pin(self.session.prepare_typed(statement, &sql, &planning, &arrays));
                (self.cancel.race(prepare, freshet::Error::canceled).await?, is_copy)
            }
            _ => return Err(freshet::Error::syntax("cannot insert multiple commands into a prepared statement").into()),
        };
        let declared = oids.iter().map(|&o| decode::declared_type(o)).collect();
        self.statements.insert(name, Arc::new(PreparedStatement { prepared, declared, is_copy }));
        backend::parse_complete(&mut self.wire.out);
        Ok(())
    }

    pub fn bind(&mut self, bind: Bind) -> Result<(), ConnError> {
        if bind.portal.is_empty() {
            self.portals.remove("");
        } else if self.portals.contains_key(&bind.portal) {
            return Err(SqlError::new(codes::DUPLICATE_CURSOR, format!("portal \"{}\" already exists", bind.portal)).into());
        }
        let statement = self.statement(&bind.statement)?;
        let values = bind_params(&statement, &bind)?;
        let columns = statement.prepared.columns.as_ref().map_or(0, |c| c.len());
        let formats = decode::result_formats(&bind.result_formats, columns)?;
        self.portals.insert(bind.portal, Portal { statement, formats, state: PortalState::Ready(values) });
        backend::bind_complete(&mut self.wire.out);
        Ok(())
    }

    fn statement(&self, name: &str) -> Result<Arc<PreparedStatement>, SqlError> {
        self.statements.get(name).cloned().ok_or_else(|| {
            SqlError::new(codes::INVALID_SQL_STATEMENT_NAME, format!("prepared statement \"{name}\" does not exist"))
        })
    }

    pub fn describe(&mut self, target: Target, name: &str) -> Result<(), ConnError> {
        let out = &mut self.wire.out;
        match target {
            Target::Statement => {
                let statement = self.statements.get(name).cloned().ok_or_else(|| {
                    SqlError::new(codes::INVALID_SQL_STATEMENT_NAME, format!("prepared statement \"{name}\" does not exist"))
                })?;
                backend::parameter_description(out, &statement.prepared.param_oids());
                match statement.described_columns() {
                    Some(columns) => backend::row_description(out, columns, &vec![0; columns.len()]),
                    None => backend::no_data(out),
                }
            }
            Target::Portal => {
                let Some(portal) = self.portals.get(name) else {
                    // A cursor DECLARE opened is a portal too (in text, as FETCH sends it).
                    let columns = self.session.cursor_columns(name).ok_or_else(|| missing_portal(name))?;
                    backend::row_description(out, &columns, &vec![0; columns.len()]);
                    return Ok(());
                };
                match portal.statement.described_columns() {
                    Some(columns) => backend::row_description(out, columns, &portal.formats),
                    None => backend::no_data(out),
                }
            }
        }
        Ok(())
    }

    pub async fn execute(&mut self, name: String, max_rows: i32) -> Result<(), ConnError> {
        let mut portal = self.portals.remove(&name).ok_or_else(|| missing_portal(&name))?;
        let limit = usize::try_from(max_rows).unwrap_or(0);
        self.run_portal(&mut portal, limit).await?;
        self.portals.insert(name, portal);
        self.wire.flush_if_large().await
    }

    async fn run_portal(&mut self, portal: &mut Portal, limit: usize) -> Result<(), ConnError> {
        let mut cursor = match std::mem::replace(&mut portal.state, PortalState::Done) {
            PortalState::Ready(params) => {
                let result = self.execute_prepared(&portal.statement.prepared, params).await?;
                self.side_messages(&result);
                match self.start_output(result.output, Some(portal.formats.clone())).await? {
                    Started::Done => return Ok(()),
                    Started::Rows(cursor) => cursor,
                }
            }
            PortalState::Rows(cursor) => cursor,
            PortalState::Exhausted => {
                portal.state = PortalState::Exhausted;
                backend::command_complete(&mut self.wire.out, "SELECT 0");
                return Ok(());
            }
            PortalState::Done => {
                let message = "portal cannot be run again: its command has completed";
                return Err(SqlError::new(codes::OBJECT_NOT_IN_PREREQUISITE_STATE, message).into());
            }
        };
        let (sent, exhausted) = self.send_rows(&mut cursor, limit).await?;
        if exhausted {
            backend::command_complete(&mut self.wire.out, &format!("{} {sent}", cursor.verb));
            portal.state = PortalState::Exhausted;
        } else {
            backend::portal_suspended(&mut self.wire.out);
            portal.state = PortalState::Rows(cursor);
        }
        Ok(())
    }

    /// Close never fails: closing what does not exist is not an error.
    pub fn close(&mut self, target: Target, name: &str) {
        match target {
            Target::Statement => self.statements.remove(name).map(|_| ()),
            Target::Portal => self.portals.remove(name).map(|_| ()),
        };
        backend::close_complete(&mut self.wire.out);
    }
}

fn missing_portal(name: &str) -> SqlError {
    SqlError::new(codes::INVALID_CURSOR_NAME, format!("portal \"{name}\" does not exist"))
}

/// The parameter values of a Bind, decoded to the statement's parameter types.
fn bind_params(statement: &PreparedStatement, bind: &Bind) -> Result<Vec<Value>, SqlError> {
    let types = &statement.prepared.param_types;
    if bind.params.len() != types.len() {
        return Err(SqlError::protocol(format!(
            "bind message supplies {} parameters, but prepared statement \"{}\" requires {}",
            bind.params.len(),
            bind.statement,
            types.len()
        )));
    }
    let formats = decode::param_formats(&bind.param_formats, bind.params.len())?;
    let mut values = Vec::with_capacity(types.len());
    for (i, (raw, &ty)) in bind.params.iter().zip(types).enumerate() {
        if let Some(elem) = statement.prepared.array_param(i) {
            values.push(decode::decode_array_param(i, raw.as_ref(), formats[i], elem)?);
            continue;
        }
        let wire = statement.wire_type(i).unwrap_or(ty);
        values.push(decode::decode_param(i, raw.as_ref(), formats[i], wire, ty)?);
    }
    Ok(values)
}
