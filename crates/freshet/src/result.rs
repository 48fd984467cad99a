//! What executing a statement produces.

use std::sync::Arc;

use freshet_core::types::{DataType, Value};
use freshet_core::{Error, Result};
use freshet_olap::datafusion::arrow::array::ArrayRef;
use freshet_olap::datafusion::arrow::compute::cast;
use freshet_olap::datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use freshet_olap::datafusion::arrow::record_batch::RecordBatch;
use freshet_olap::types::arrow_type;
use freshet_olap::values::build_array;
use freshet_olap::BatchStream;

use crate::copy::{CopyIn, CopyOut};

/// A result column: its name and SQL type.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnInfo {
    pub name: String,
    pub ty: DataType,
}

/// How serious a message sent beside a statement's result is (PostgreSQL's severities below
/// ERROR that reach a client at the default `client_min_messages`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoticeSeverity {
    Warning,
    Notice,
    Info,
}

impl NoticeSeverity {
    /// The name PostgreSQL sends (and psql prints).
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeSeverity::Warning => "WARNING",
            NoticeSeverity::Notice => "NOTICE",
            NoticeSeverity::Info => "INFO",
        }
    }

    /// The SQLSTATE PostgreSQL gives such a message when nothing names another: 01000
    /// (warning) for a WARNING, 00000 otherwise.
    pub fn default_code(self) -> &'static str {
        match self {
            NoticeSeverity::Warning => "01000",
            _ => "00000",
        }
    }
}

/// A message for the client beside a statement's result (e.g. NOTICE "table \"t\" does not
/// exist, skipping", WARNING "you don't own a lock of type ExclusiveLock").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub severity: NoticeSeverity,
    pub message: String,
}

impl Notice {
    pub fn warning(message: impl Into<String>) -> Notice {
        Notice { severity: NoticeSeverity::Warning, message: message.into() }
    }

    pub fn info(message: impl Into<String>) -> Notice {
        Notice { severity: NoticeSeverity::Info, message: message.into() }
    }
}

/// A NOTICE: most of what a statement tells besides its result.
impl From<String> for Notice {
    fn from(message: String) -> Notice {
        Notice { severity: NoticeSeverity::Notice, message }
    }
}

impl From<&str> for Notice {
    fn from(message: &str) -> Notice {
        Notice::from(message.to_string())
    }
}

impl std::fmt::Display for Notice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:  {}", self.severity.as_str(), self.message)
    }
}

/// The result of one statement.
pub struct StatementResult {
    pub output: Output,
    /// Messages for the client, in the order the statement produced them.
    pub notices: Vec<Notice>,
    /// Run-time parameters whose value the statement changed and that a PostgreSQL server
    /// reports to the client (ParameterStatus).
    pub parameter_status: Vec<(String, String)>,
}

impl StatementResult {
    pub fn command(tag: impl Into<String>) -> Self {
        StatementResult { output: Output::Command { tag: tag.into() }, notices: vec![], parameter_status: vec![] }
    }

    pub fn rows(columns: Arc<Vec<ColumnInfo>>, rows: RowStream) -> Self {
        Self::returning("SELECT", columns, rows)
    }

    /// Rows of a statement whose command tag is `verb` and the row count: "SELECT", or
    /// "INSERT 0", "UPDATE", "DELETE" for the rows of a RETURNING clause, as PostgreSQL tags them.
    pub fn returning(verb: &'static str, columns: Arc<Vec<ColumnInfo>>, rows: RowStream) -> Self {
        StatementResult { output: Output::Rows { columns, rows, verb }, notices: vec![], parameter_status: vec![] }
    }

    pub fn with_notices<N: Into<Notice>>(mut self, notices: impl IntoIterator<Item = N>) -> Self {
        self.notices = notices.into_iter().map(Into::into).collect();
        self
    }
}

pub enum Output {
    /// A statement without rows; `tag` is PostgreSQL's command tag ("INSERT 0 3", "CREATE TABLE").
    Command { tag: String },
    /// Rows; the command tag is `<verb> <rows sent>`.
    Rows { columns: Arc<Vec<ColumnInfo>>, rows: RowStream, verb: &'static str },
    /// COPY … FROM STDIN: the client now sends data.
    CopyIn(CopyIn),
    /// COPY … TO STDOUT: rows to send as COPY data.
    CopyOut(CopyOut),
    /// An empty query string.
    Empty,
}

/// A batch of result rows, in whichever form its producer made it.
pub enum RowBatch {
    /// From the short-statement path.
    Values(Vec<Vec<Value>>),
    /// From the analytical side; columns are in the order of the statement's [`ColumnInfo`].
    Arrow(RecordBatch),
}

impl RowBatch {
    pub fn num_rows(&self) -> usize {
        match self {
            RowBatch::Values(v) => v.len(),
            RowBatch::Arrow(b) => b.num_rows(),
        }
    }
}

enum Source {
    Values(Option<Vec<Vec<Value>>>),
    Arrow(BatchStream),
    /// Batches already at hand (of the statement's column types).
    Batches(std::vec::IntoIter<RowBatch>),
}

/// A stream of result batches.
pub struct RowStream {
    source: Source,
    /// Arrow types the batches must have (casts are applied when a producer differs).
    target: Option<SchemaRef>,
    /// Set for the rows of a statement outside a transaction block: the statement counts as
    /// committed once its rows are done, as rolled back if producing them fails.
    ending: Ending,
}

#[derive(Default)]
struct Ending(Option<Arc<crate::pg_catalog::Activity>>);

impl Ending {
    fn end(&mut self, committed: bool) {
        if let Some(activity) = self.0.take() {
            activity.transaction_ended(committed);
        }
    }
}

impl Drop for Ending {
    fn drop(&mut self) {
        self.end(true);
    }
}

impl RowStream {
    pub fn from_values(rows: Vec<Vec<Value>>) -> Self {
        RowStream { source: Source::Values(Some(rows)), target: None, ending: Ending::default() }
    }

    /// Batches already made: values, and Arrow batches with the columns' types.
    pub(crate) fn from_row_batches(batches: Vec<RowBatch>) -> Self {
        RowStream { source: Source::Batches(batches.into_iter()), target: None, ending: Ending::default() }
    }

    pub(crate) fn from_batches(stream: BatchStream, columns: &[ColumnInfo]) -> Self {
        RowStream { source: Source::Arrow(stream), target: Some(arrow_schema(columns)), ending: Ending::default() }
    }

    /// Counts the statement these rows answer as a transaction that ends with them.
    pub(crate) fn ends_transaction(&mut self, activity: Arc<crate::pg_catalog::Activity>) {
        self.ending = Ending(Some(activity));
    }

    pub async fn next(&mut self) -> Option<Result<RowBatch>> {
        match &mut self.source {
            Source::Values(rows) => rows.take().map(|r| Ok(RowBatch::Values(r))),
            Source::Batches(batches) => batches.next().map(Ok),
            Source::Arrow(stream) => {
                let batch = stream.next_batch().await?.and_then(|b| conform(b, self.target.as_ref()));
                if batch.is_err() {
                    self.ending.end(false);
                }
                Some(batch.map(RowBatch::Arrow))
            }
        }
    }

    /// Collects every remaining batch as Arrow record batches with `columns`' names and types.
    pub async fn collect_arrow(mut self, columns: &[ColumnInfo]) -> Result<Vec<RecordBatch>> {
        let schema = arrow_schema(columns);
        let mut out = Vec::new();
        while let Some(batch) = self.next().await {
            out.push(match batch? {
                RowBatch::Arrow(b) => b,
                RowBatch::Values(rows) => values_batch(&rows, columns, schema.clone())?,
            });
        }
        Ok(out)
    }

    /// Collects every remaining row as values.
    pub async fn collect_values(mut self, columns: &[ColumnInfo]) -> Result<Vec<Vec<Value>>> {
        let mut out = Vec::new();
        while let Some(batch) = self.next().await {
            match batch? {
                RowBatch::Values(rows) => out.extend(rows),
                RowBatch::Arrow(b) => out.extend(batch_rows(&b, columns)),
            }
        }
        Ok(out)
    }
}

/// The rows of a record batch as values of the given column types.
pub fn batch_rows(batch: &RecordBatch, columns: &[ColumnInfo]) -> Vec<Vec<Value>> {
    (0..batch.num_rows())
        .map(|i| {
            batch
                .columns()
                .iter()
                .zip(columns)
                .map(|(a, c)| freshet_olap::values::value_at(a, i, c.ty))
                .collect()
        })
        .collect()
}

/// Whether a column of type `t` is sent as text in PostgreSQL's own form
/// ([`freshet_olap::values::value_at`]): arrays and intervals.
fn in_postgres_text(t: &freshet_olap::datafusion::arrow::datatypes::DataType) -> bool {
    use freshet_olap::datafusion::arrow::datatypes::DataType as A;
    matches!(t, A::List(_) | A::LargeList(_) | A::FixedSizeList(..) | A::Duration(_) | A::Interval(_))
}

/// An Arrow schema with the statement's column names and types.
pub fn arrow_schema(columns: &[ColumnInfo]) -> SchemaRef {
    Arc::new(Schema::new(
        columns.iter().map(|c| Field::new(&c.name, arrow_type(c.ty), true)).collect::<Vec<_>>(),
    ))
}

fn values_batch(rows: &[Vec<Value>], columns: &[ColumnInfo], schema: SchemaRef) -> Result<RecordBatch> {
    let arrays: Vec<ArrayRef> = columns.iter().enumerate().map(|(i, c)| build_array(rows, i, c.ty)).collect();
    let options = freshet_olap::datafusion::arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(rows.len()));
    RecordBatch::try_new_with_options(schema, arrays, &options).map_err(|e| Error::internal(e.to_string()))
}

/// Renames a batch's columns to the statement's names and casts any column whose type
/// differs from the described one.
fn conform(batch: RecordBatch, target: Option<&SchemaRef>) -> Result<RecordBatch> {
    let Some(target) = target else { return Ok(batch) };
    if batch.num_columns() != target.fields().len() {
        return Err(Error::internal("result has a different number of columns than described"));
    }
    let mut columns = Vec::with_capacity(batch.num_columns());
    for (array, field) in batch.columns().iter().zip(target.fields()) {
        if array.data_type() == field.data_type() || is_text_like(field.data_type()) && is_text_like(array.data_type()) {
            columns.push(array.clone());
        } else if is_text_like(field.data_type()) && in_postgres_text(array.data_type()) {
            // Arrays and intervals are described as text and sent in PostgreSQL's form
            // (`{1,2}`, `1 day 01:30:00`), which Arrow's cast to text does not produce.
            let text = (0..array.len()).map(|i| match freshet_olap::values::value_at(array, i, DataType::Text) {
                Value::Text(s) => Some(s),
                _ => None,
            });
            columns.push(Arc::new(freshet_olap::datafusion::arrow::array::StringArray::from_iter(text)) as ArrayRef);
        } else {
            // A type without an Arrow counterpart (described as text) is formatted when sent.
            columns.push(cast(array, field.data_type()).unwrap_or_else(|_| array.clone()));
        }
    }
    let fields: Vec<Field> = target
        .fields()
        .iter()
        .zip(&columns)
        .map(|(f, a)| Field::new(f.name(), a.data_type().clone(), true))
        .collect();
    let options = freshet_olap::datafusion::arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), columns, &options).map_err(|e| Error::internal(e.to_string()))
}

fn is_text_like(t: &freshet_olap::datafusion::arrow::datatypes::DataType) -> bool {
    use freshet_olap::datafusion::arrow::datatypes::DataType as A;
    matches!(t, A::Utf8 | A::LargeUtf8 | A::Utf8View)
}
