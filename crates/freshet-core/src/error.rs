//! Errors of the transactional core.
//!
//! One error type for the layer, [`Error`]. Every error a user can cause carries the SQLSTATE
//! class it belongs to ([`SqlState`]), so the edge (the wire protocol, the embedded API) maps it
//! without string matching. [`SqlState::Internal`] means a bug in Freshet, never bad input.
//! Retryable conflicts are their own code (40001) so clients can tell them apart.

use std::fmt;

/// The SQLSTATE codes Freshet raises. The string form is PostgreSQL's five-character code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SqlState {
    SyntaxError,
    UndefinedTable,
    UndefinedColumn,
    UndefinedObject,
    UndefinedFunction,
    DuplicateTable,
    DuplicateObject,
    DuplicateColumn,
    InvalidTableDefinition,
    AmbiguousColumn,
    UniqueViolation,
    NotNullViolation,
    ForeignKeyViolation,
    CheckViolation,
    InvalidTextRepresentation,
    InvalidDatetimeFormat,
    DatetimeFieldOverflow,
    InvalidTimeZoneDisplacement,
    DivisionByZero,
    NumericValueOutOfRange,
    StringDataRightTruncation,
    CharacterNotInRepertoire,
    InvalidParameterValue,
    InvalidEscapeSequence,
    BadCopyFileFormat,
    DatatypeMismatch,
    CannotCoerce,
    GroupingError,
    InvalidColumnReference,
    WrongObjectType,
    DependentObjectsStillExist,
    FeatureNotSupported,
    ProtocolViolation,
    UndefinedParameter,
    InvalidParameterReference,
    CardinalityViolation,
    InvalidCursorName,
    DuplicateCursor,
    InvalidSqlStatementName,
    DuplicatePreparedStatement,
    InvalidTransactionState,
    ActiveSqlTransaction,
    InFailedSqlTransaction,
    NoActiveSqlTransaction,
    InvalidSavepointSpecification,
    ReadOnlySqlTransaction,
    SerializationFailure,
    DeadlockDetected,
    LockNotAvailable,
    QueryCanceled,
    ProgramLimitExceeded,
    OutOfMemory,
    ObjectInUse,
    DiskFull,
    IoError,
    AdminShutdown,
    /// P0001: RAISE EXCEPTION without an ERRCODE.
    RaiseException,
    /// 42723: a procedure or function of that name exists already.
    DuplicateFunction,
    /// 42725: a call or DROP that several routines of one name could mean.
    AmbiguousFunction,
    /// 42P13: a routine's definition that cannot be (e.g. a changed return type).
    InvalidFunctionDefinition,
    /// 2200H: nextval past the end of a sequence without CYCLE.
    SequenceGeneratorLimitExceeded,
    /// 55000: e.g. currval before nextval in the session.
    ObjectNotInPrerequisiteState,
    /// 428C9: a value given for a GENERATED ALWAYS identity column.
    GeneratedAlways,
    /// Another five-character code, as `RAISE … USING ERRCODE = '…'` gives it (interned by
    /// [`SqlState::custom`]).
    Custom(&'static str),
    Internal,
}

impl SqlState {
    /// PostgreSQL's five-character code.
    pub fn code(self) -> &'static str {
        use SqlState::*;
        match self {
            SyntaxError => "42601",
            UndefinedTable => "42P01",
            UndefinedColumn => "42703",
            UndefinedObject => "42704",
            UndefinedFunction => "42883",
            DuplicateTable => "42P07",
            DuplicateObject => "42710",
            DuplicateColumn => "42701",
            InvalidTableDefinition => "42P16",
            AmbiguousColumn => "42702",
            UniqueViolation => "23505",
            NotNullViolation => "23502",
            ForeignKeyViolation => "23503",
            CheckViolation => "23514",
            InvalidTextRepresentation => "22P02",
            InvalidDatetimeFormat => "22007",
            DatetimeFieldOverflow => "22008",
            InvalidTimeZoneDisplacement => "22009",
            DivisionByZero => "22012",
            NumericValueOutOfRange => "22003",
            StringDataRightTruncation => "22001",
            CharacterNotInRepertoire => "22021",
            InvalidParameterValue => "22023",
            InvalidEscapeSequence => "22025",
            BadCopyFileFormat => "22P04",
            DatatypeMismatch => "42804",
            CannotCoerce => "42846",
            GroupingError => "42803",
            InvalidColumnReference => "42P10",
            WrongObjectType => "42809",
            DependentObjectsStillExist => "2BP01",
            FeatureNotSupported => "0A000",
            ProtocolViolation => "08P01",
            UndefinedParameter => "42P02",
            InvalidParameterReference => "42P08",
            CardinalityViolation => "21000",
            InvalidCursorName => "34000",
            DuplicateCursor => "42P03",
            InvalidSqlStatementName => "26000",
            DuplicatePreparedStatement => "42P05",
            InvalidTransactionState => "25000",
            ActiveSqlTransaction => "25001",
            InFailedSqlTransaction => "25P02",
            NoActiveSqlTransaction => "25P01",
            InvalidSavepointSpecification => "3B001",
            ReadOnlySqlTransaction => "25006",
            SerializationFailure => "40001",
            DeadlockDetected => "40P01",
            LockNotAvailable => "55P03",
            QueryCanceled => "57014",
            ProgramLimitExceeded => "54000",
            OutOfMemory => "53200",
            ObjectInUse => "55006",
            DiskFull => "53100",
            IoError => "58030",
            AdminShutdown => "57P01",
            RaiseException => "P0001",
            DuplicateFunction => "42723",
            AmbiguousFunction => "42725",
            InvalidFunctionDefinition => "42P13",
            SequenceGeneratorLimitExceeded => "2200H",
            ObjectNotInPrerequisiteState => "55000",
            GeneratedAlways => "428C9",
            Custom(code) => code,
            Internal => "XX000",
        }
    }

    /// The condition with the five-character code `code` (the inverse of [`Self::code`]).
    pub fn from_code(code: &str) -> Option<SqlState> {
        use SqlState::*;
        Some(match code {
            "42601" => SyntaxError,
            "42P01" => UndefinedTable,
            "42703" => UndefinedColumn,
            "42704" => UndefinedObject,
            "42883" => UndefinedFunction,
            "42P07" => DuplicateTable,
            "42710" => DuplicateObject,
            "42701" => DuplicateColumn,
            "42P16" => InvalidTableDefinition,
            "42702" => AmbiguousColumn,
            "23505" => UniqueViolation,
            "23502" => NotNullViolation,
            "23503" => ForeignKeyViolation,
            "23514" => CheckViolation,
            "22P02" => InvalidTextRepresentation,
            "22007" => InvalidDatetimeFormat,
            "22008" => DatetimeFieldOverflow,
            "22009" => InvalidTimeZoneDisplacement,
            "22012" => DivisionByZero,
            "22003" => NumericValueOutOfRange,
            "22001" => StringDataRightTruncation,
            "22021" => CharacterNotInRepertoire,
            "22023" => InvalidParameterValue,
            "22025" => InvalidEscapeSequence,
            "22P04" => BadCopyFileFormat,
            "42804" => DatatypeMismatch,
            "42846" => CannotCoerce,
            "42803" => GroupingError,
            "42P10" => InvalidColumnReference,
            "42809" => WrongObjectType,
            "2BP01" => DependentObjectsStillExist,
            "0A000" => FeatureNotSupported,
            "08P01" => ProtocolViolation,
            "42P02" => UndefinedParameter,
            "42P08" => InvalidParameterReference,
            "21000" => CardinalityViolation,
            "34000" => InvalidCursorName,
            "42P03" => DuplicateCursor,
            "26000" => InvalidSqlStatementName,
            "42P05" => DuplicatePreparedStatement,
            "25000" => InvalidTransactionState,
            "25001" => ActiveSqlTransaction,
            "25P02" => InFailedSqlTransaction,
            "25P01" => NoActiveSqlTransaction,
            "3B001" => InvalidSavepointSpecification,
            "25006" => ReadOnlySqlTransaction,
            "40001" => SerializationFailure,
            "40P01" => DeadlockDetected,
            "55P03" => LockNotAvailable,
            "57014" => QueryCanceled,
            "54000" => ProgramLimitExceeded,
            "53200" => OutOfMemory,
            "55006" => ObjectInUse,
            "53100" => DiskFull,
            "58030" => IoError,
            "57P01" => AdminShutdown,
            "P0001" => RaiseException,
            "42723" => DuplicateFunction,
            "42725" => AmbiguousFunction,
            "42P13" => InvalidFunctionDefinition,
            "2200H" => SequenceGeneratorLimitExceeded,
            "55000" => ObjectNotInPrerequisiteState,
            "428C9" => GeneratedAlways,
            "XX000" => Internal,
            _ => return None,
        })
    }
}

impl SqlState {
    /// The condition with code `code`: a known one, or a [`SqlState::Custom`] one for any other
    /// five characters of digits and upper-case letters (PostgreSQL's rule for SQLSTATEs).
    /// Custom codes are interned: each distinct code is allocated once for the process.
    pub fn custom(code: &str) -> Option<SqlState> {
        let code = code.to_ascii_uppercase();
        if code.len() != 5 || !code.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()) || code.starts_with("00") {
            return None;
        }
        if let Some(known) = SqlState::from_code(&code) {
            return Some(known);
        }
        static INTERNED: std::sync::OnceLock<parking_lot::Mutex<std::collections::HashSet<&'static str>>> = std::sync::OnceLock::new();
        let mut set = INTERNED.get_or_init(Default::default).lock();
        let interned = match set.get(code.as_str()) {
            Some(s) => *s,
            None => {
                let leaked: &'static str = Box::leak(code.into_boxed_str());
                set.insert(leaked);
                leaked
            }
        };
        Some(SqlState::Custom(interned))
    }
}

/// An error of the core: a SQLSTATE, a message in PostgreSQL's style (lower case, no final
/// period), and optionally a detail and a 1-based character position in the statement text.
///
/// The fields live behind one allocation (`ErrorFields`, reached through `Deref`), so that a
/// `Result` of a value is the value's size plus a word: results of the expression evaluator,
/// casts and the interpreter are moved and returned on every row and statement, and errors
/// are rare.
#[derive(Clone, PartialEq, Eq)]
pub struct Error(Box<ErrorFields>);

impl std::ops::Deref for Error {
    type Target = ErrorFields;
    fn deref(&self) -> &ErrorFields {
        &self.0
    }
}

impl std::ops::DerefMut for Error {
    fn deref_mut(&mut self) -> &mut ErrorFields {
        &mut self.0
    }
}

impl Error {
    /// The error's fields, to take them apart.
    pub fn into_fields(self) -> ErrorFields {
        *self.0
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ErrorFields { state, message, detail, hint, position, context, blocked_by } = &*self.0;
        f.debug_struct("Error")
            .field("state", state)
            .field("message", message)
            .field("detail", detail)
            .field("hint", hint)
            .field("position", position)
            .field("context", context)
            .field("blocked_by", blocked_by)
            .finish()
    }
}

/// What an [`Error`] says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorFields {
    pub state: SqlState,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
    pub position: Option<u32>,
    /// Where the error happened, innermost first, one line each (PostgreSQL's CONTEXT: the
    /// routine and line that raised it, `PL/pgSQL function f(integer) line 3 at RAISE`).
    pub context: Option<String>,
    /// For a write that met another transaction's uncommitted change: that transaction's id.
    /// The session may wait for it to end and run the statement again.
    pub blocked_by: Option<u64>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(state: SqlState, message: impl Into<String>) -> Self {
        Error(Box::new(ErrorFields { state, message: message.into(), detail: None, hint: None, position: None, context: None, blocked_by: None }))
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Adds a line to the error's context (after the lines of inner places).
    pub fn within(mut self, place: impl Into<String>) -> Self {
        let place = place.into();
        self.context = Some(match self.context.take() {
            Some(inner) => format!("{inner}\n{place}"),
            None => place,
        });
        self
    }

    pub fn with_position(mut self, position: u32) -> Self {
        self.position = Some(position);
        self
    }

    pub fn syntax(message: impl Into<String>) -> Self {
        Self::new(SqlState::SyntaxError, message)
    }

    /// 0A000, naming the feature that is missing.
    pub fn unsupported(feature: impl fmt::Display) -> Self {
        Self::new(SqlState::FeatureNotSupported, format!("{feature} is not supported"))
    }

    pub fn undefined_table(name: &str) -> Self {
        Self::new(SqlState::UndefinedTable, format!("relation \"{name}\" does not exist"))
    }

    pub fn undefined_column(name: &str) -> Self {
        Self::new(SqlState::UndefinedColumn, format!("column \"{name}\" does not exist"))
    }

    pub fn invalid_text(type_name: &str, input: &str) -> Self {
        Self::new(
            SqlState::InvalidTextRepresentation,
            format!("invalid input syntax for type {type_name}: \"{input}\""),
        )
    }

    pub fn out_of_range(type_name: &str) -> Self {
        Self::new(SqlState::NumericValueOutOfRange, format!("{type_name} out of range"))
    }

    pub fn division_by_zero() -> Self {
        Self::new(SqlState::DivisionByZero, "division by zero")
    }

    pub fn mismatch(message: impl Into<String>) -> Self {
        Self::new(SqlState::DatatypeMismatch, message)
    }

    /// A bug in Freshet: an invariant did not hold.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(SqlState::Internal, message)
    }

    pub fn serialization(message: impl Into<String>) -> Self {
        Self::new(SqlState::SerializationFailure, message)
    }

    /// 40P01: waiting would close a cycle of transactions waiting for each other.
    pub fn deadlock() -> Self {
        Self::new(SqlState::DeadlockDetected, "deadlock detected")
            .with_detail("This transaction waited for a transaction that (indirectly) waits for it.")
            .with_hint("The transaction might succeed if retried.")
    }

    pub fn canceled() -> Self {
        Self::new(SqlState::QueryCanceled, "canceling statement due to user request")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)?;
        if let Some(detail) = &self.detail {
            write!(f, " ({detail})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// Collects fallible items into a `Vec` allocated once, at the iterator's length. (`collect`
/// into `Result<Vec<_>>` cannot rely on the length, since an error ends the items early, so it
/// starts with room for four and grows: two reallocations for a row of ten columns. On the
/// statement path that was a reallocation for every few values.)
#[inline]
pub fn try_vec<T, E>(items: impl IntoIterator<Item = std::result::Result<T, E>>) -> std::result::Result<Vec<T>, E> {
    let items = items.into_iter();
    let (low, high) = items.size_hint();
    let mut out = Vec::with_capacity(high.unwrap_or(low));
    for item in items {
        out.push(item?);
    }
    Ok(out)
}
