//! Errors of the protocol layer.
//!
//! Two kinds of failure reach a client, and they end differently:
//! - a statement fails ([`SqlError`], from the engine or from decoding a parameter): the client
//!   gets an ErrorResponse and the session goes on;
//! - the client breaks the protocol ([`ConnError::Protocol`]): it gets a FATAL 08P01 and that
//!   connection, and only that one, is closed.
//!
//! This is the edge where Freshet's errors become SQLSTATE codes on the wire.

use std::fmt;

/// The severity word of an ErrorResponse or NoticeResponse (fields `S` and `V`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Fatal,
    /// WARNING, NOTICE or INFO: sent as a NoticeResponse.
    Notice(freshet::NoticeSeverity),
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "ERROR",
            Severity::Fatal => "FATAL",
            Severity::Notice(n) => n.as_str(),
        }
    }
}

/// An error (or notice) as PostgreSQL reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlError {
    pub severity: Severity,
    /// The five-character SQLSTATE.
    pub code: &'static str,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
    /// 1-based character position in the statement text.
    pub position: Option<u32>,
    /// PostgreSQL's "where" field (CONTEXT).
    pub context: Option<String>,
}

impl SqlError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        SqlError { severity: Severity::Error, code, message: message.into(), detail: None, hint: None, position: None, context: None }
    }

    pub fn fatal(code: &'static str, message: impl Into<String>) -> Self {
        SqlError { severity: Severity::Fatal, ..SqlError::new(code, message) }
    }

    pub fn notice(notice: &freshet::Notice) -> Self {
        SqlError { severity: Severity::Notice(notice.severity), ..SqlError::new(notice.severity.default_code(), notice.message.clone()) }
    }

    /// 08P01 as an ordinary statement error (the session goes on).
    pub fn protocol(message: impl Into<String>) -> Self {
        SqlError::new(codes::PROTOCOL_VIOLATION, message)
    }

    /// 22P03: a binary parameter that does not have its type's layout.
    pub fn binary_format(param: usize) -> Self {
        SqlError::new(codes::INVALID_BINARY_REPRESENTATION, format!("incorrect binary data format in bind parameter {}", param + 1))
    }

    pub fn canceled() -> Self {
        freshet::Error::canceled().into()
    }
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.severity.as_str(), self.code, self.message)
    }
}

impl From<freshet::Error> for SqlError {
    fn from(e: freshet::Error) -> Self {
        let e = e.into_fields();
        SqlError {
            severity: Severity::Error,
            code: e.state.code(),
            message: e.message,
            detail: e.detail,
            hint: e.hint,
            position: e.position,
            context: e.context,
        }
    }
}

/// SQLSTATE codes the protocol layer raises itself (the engine's come from `freshet::SqlState`).
pub mod codes {
    pub const PROTOCOL_VIOLATION: &str = "08P01";
    pub const FEATURE_NOT_SUPPORTED: &str = "0A000";
    pub const INVALID_BINARY_REPRESENTATION: &str = "22P03";
    pub const INVALID_PARAMETER_VALUE: &str = "22023";
    pub const CHARACTER_NOT_IN_REPERTOIRE: &str = "22021";
    pub const NUMERIC_VALUE_OUT_OF_RANGE: &str = "22003";
    pub const INVALID_CURSOR_NAME: &str = "34000";
    pub const INVALID_SQL_STATEMENT_NAME: &str = "26000";
    pub const DUPLICATE_PREPARED_STATEMENT: &str = "42P05";
    pub const DUPLICATE_CURSOR: &str = "42P03";
    pub const OBJECT_NOT_IN_PREREQUISITE_STATE: &str = "55000";
    pub const QUERY_CANCELED: &str = "57014";
    pub const INTERNAL: &str = "XX000";
}

/// Why handling a message failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    /// The socket failed or the client went away; nothing more can be sent.
    #[error("connection i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The client broke the protocol; it gets a FATAL error and the connection closes.
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// A statement failed; the client gets an ErrorResponse and the session goes on.
    #[error("{0}")]
    Sql(SqlError),
}

impl ConnError {
    pub fn protocol(message: impl Into<String>) -> Self {
        ConnError::Protocol(message.into())
    }
}

impl From<SqlError> for ConnError {
    fn from(e: SqlError) -> Self {
        ConnError::Sql(e)
    }
}

impl From<freshet::Error> for ConnError {
    fn from(e: freshet::Error) -> Self {
        ConnError::Sql(e.into())
    }
}
