//! COPY … FROM STDIN and COPY … TO STDOUT in PostgreSQL's text and CSV formats.
//!
//! Input is parsed as it arrives and inserted in batches of [`COPY_BATCH_ROWS`] rows, each one
//! job on the executor, all as statements of one transaction: the session's transaction block
//! if there is one, otherwise a transaction of the COPY's own that commits when the data ends.
//! Nobody sees the rows before that commit, and a failed COPY leaves nothing behind.

use std::borrow::Cow;
use std::sync::Arc;

use freshet_core::catalog::TableDef;
use freshet_core::engine::{Engine, TxnCtx};
use freshet_core::txn::Isolation;
use freshet_core::types::Value;
use freshet_core::{Error, Result, SqlState};
use sqlparser::ast;

use crate::result::{batch_rows, ColumnInfo, RowBatch, RowStream};

/// Rows per insert job.
pub const COPY_BATCH_ROWS: usize = 16_384;

/// The options of a COPY statement.
#[derive(Clone, Debug, PartialEq)]
pub struct CopyFormat {
    pub csv: bool,
    pub delimiter: char,
    pub null: String,
    pub header: bool,
    pub quote: char,
    pub escape: char,
}

impl CopyFormat {
    pub fn text() -> Self {
        CopyFormat { csv: false, delimiter: '\t', null: "\\N".into(), header: false, quote: '"', escape: '"' }
    }

    pub fn csv() -> Self {
        CopyFormat { csv: true, delimiter: ',', null: String::new(), header: false, quote: '"', escape: '"' }
    }

    /// Reads the options of `COPY … WITH (…)` and the legacy `CSV HEADER` spelling.
    pub fn from_options(options: &[ast::CopyOption], legacy: &[ast::CopyLegacyOption]) -> Result<CopyFormat> {
        let csv = options.iter().any(|o| matches!(o, ast::CopyOption::Format(f) if f.value.eq_ignore_ascii_case("csv")))
            || legacy.iter().any(|o| matches!(o, ast::CopyLegacyOption::Csv(_)));
        let mut f = if csv { CopyFormat::csv() } else { CopyFormat::text() };
        for o in options {
            match o {
                ast::CopyOption::Format(name) => {
                    let n = name.value.to_lowercase();
                    if n != "csv" && n != "text" {
                        return Err(Error::unsupported(format!("COPY format \"{n}\"")));
                    }
                }
                ast::CopyOption::Freeze(_) | ast::CopyOption::Encoding(_) => {}
                ast::CopyOption::Delimiter(c) => f.delimiter = *c,
                ast::CopyOption::Null(s) => f.null = s.clone(),
                ast::CopyOption::Header(h) => f.header = *h,
                ast::CopyOption::Quote(c) => f.quote = *c,
                ast::CopyOption::Escape(c) => f.escape = *c,
                other => return Err(Error::unsupported(format!("COPY option {other}"))),
            }
        }
        for o in legacy {
            match o {
                ast::CopyLegacyOption::Csv(opts) => {
                    for c in opts {
                        match c {
                            ast::CopyLegacyCsvOption::Header => f.header = true,
                            ast::CopyLegacyCsvOption::Quote(q) => f.quote = *q,
                            ast::CopyLegacyCsvOption::Escape(e) => f.escape = *e,
                            other => return Err(Error::unsupported(format!("COPY option {other}"))),
                        }
                    }
                }
                ast::CopyLegacyOption::Delimiter(c) => f.delimiter = *c,
                ast::CopyLegacyOption::Null(s) => f.null = s.clone(),
                ast::CopyLegacyOption::Header => f.header = true,
                other => return Err(Error::unsupported(format!("COPY option {other}"))),
            }
        }
        if f.header && !f.csv {
            return Err(Error::unsupported("COPY HEADER in text format"));
        }
        Ok(f)
    }
}

/// What the columns COPY does not fill take their defaults from: the statement's start time and
/// the session's sequences.
pub(crate) struct CopyDefaults {
    pub now: i64,
    pub sequences: Arc<crate::sequences::SessionSequences>,
}

/// The receiving end of COPY … FROM STDIN.
pub struct CopyIn {
    engine: Arc<Engine>,
    table: Arc<TableDef>,
    /// Target columns in input order.
    columns: Vec<usize>,
    format: CopyFormat,
    pending: Vec<u8>,
    rows: Vec<Vec<Value>>,
    inserted: u64,
    line: u64,
    header_pending: bool,
    ended: bool,
    txn: TxnCtx,
    /// Whether the COPY runs in a transaction of its own (outside a transaction block).
    own_txn: bool,
    /// Whether its commit waits for the redo log (synchronous_commit).
    sync: bool,
    /// The statement's time: CURRENT_TIMESTAMP defaults of every row.
    now: i64,
    /// Sequence defaults (SERIAL, identity) take their values through the session.
    sequences: Arc<crate::sequences::SessionSequences>,
    /// The columns COPY does not fill, which take their defaults (a sequence is not advanced
    /// for a column whose value the data gives).
    defaulted: Vec<usize>,
}

impl CopyIn {
    /// A COPY into `table`, as part of the transaction block `txn`, or in a transaction of
    /// its own.
    pub(crate) fn new(engine: Arc<Engine>, table: Arc<TableDef>, columns: Vec<usize>, format: CopyFormat, txn: Option<TxnCtx>, sync: bool, defaults: CopyDefaults) -> Self {
        let CopyDefaults { now, sequences } = defaults;
        let defaulted = (0..table.columns.len()).filter(|c| !columns.contains(c)).collect();
        let header_pending = format.header;
        let own_txn = txn.is_none();
        let txn = txn.unwrap_or_else(|| {
            let registry = engine.registry();
            let id = registry.new_txn_id();
            engine.txn_began(id);
            TxnCtx { id, start: registry.begin_snapshot(), isolation: Isolation::RepeatableRead }
        });
        CopyIn {
            engine,
            table,
            columns,
            format,
            pending: Vec::new(),
            rows: Vec::new(),
            inserted: 0,
            line: 0,
            header_pending,
            ended: false,
            txn,
            own_txn,
            sync,
            now,
            sequences,
            defaulted,
        }
    }

    pub fn column_count(&self) -> usize {
        self.columns.len()
    }

    /// Feeds a chunk of COPY data.
    pub async fn write(&mut self, data: &[u8]) -> Result<()> {
        if self.ended {
            return Ok(());
        }
        self.pending.extend_from_slice(data);
        let mut start = 0;
        let mut in_quotes = false;
        let mut i = 0;
        // Find complete records; in CSV a newline inside quotes does not end a record.
        while i < self.pending.len() {
            let b = self.pending[i];
            if self.format.csv && b == self.format.quote as u8 {
                in_quotes = !in_quotes;
            } else if b == b'\n' && !in_quotes {
                let record = self.pending[start..i].to_vec();
                start = i + 1;
                self.record(&record)?;
                if self.ended {
                    break;
                }
            }
            i += 1;
        }
        self.pending.drain(..start);
        if self.rows.len() >= COPY_BATCH_ROWS {
            self.flush().await?;
        }
        Ok(())
    }

    fn record(&mut self, raw: &[u8]) -> Result<()> {
        self.line += 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let text = std::str::from_utf8(raw).map_err(|_| {
            Error::new(SqlState::CharacterNotInRepertoire, "invalid byte sequence for encoding \"UTF8\"")
        })?;
        if text == "\\." {
            self.ended = true;
            return Ok(());
        }
        if self.header_pending {
            self.header_pending = false;
            return Ok(());
        }
        let width = self.columns.len();
        let fields = if self.format.csv { split_csv(text, &self.format, width) } else { split_text(text, &self.format, width) }
            .map_err(|e| self.context(e))?;
        if fields.len() != self.columns.len() {
            let message = if fields.len() < self.columns.len() {
                format!("missing data for column \"{}\"", self.table.columns[self.columns[fields.len()]].name)
            } else {
                "extra data after last expected column".to_string()
            };
            return Err(self.context(Error::new(SqlState::BadCopyFileFormat, message)));
        }
        let mut row = self.default_row()?;
        for (field, &c) in fields.into_iter().zip(&self.columns) {
            let col = &self.table.columns[c];
            row[c] = match field {
                None => Value::Null,
                Some(s) => Value::parse(&s, col.ty).map_err(|e| self.context(e))?,
            };
        }
        self.rows.push(row);
        Ok(())
    }

    fn default_row(&self) -> Result<Vec<Value>> {
        let cx = freshet_core::sql::expr::EvalContext { params: &[], now: self.now, session: Some(&*self.sequences) };
        let mut row = vec![Value::Null; self.table.columns.len()];
        for &c in &self.defaulted {
            row[c] = crate::session::default_value(&self.table.columns[c], &cx)?;
        }
        Ok(row)
    }

    fn context(&self, e: Error) -> Error {
        let detail = format!("COPY {}, line {}", self.table.name, self.line);
        let detail = match e.detail.clone() {
            Some(d) => format!("{d}; {detail}"),
            None => detail,
        };
        let mut e = e;
        e.detail = Some(detail);
        e
    }

    async fn flush(&mut self) -> Result<()> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let rows = std::mem::take(&mut self.rows);
        self.inserted += self.engine.insert_rows(&self.table, rows, Some(self.txn), self.sync).await?;
        Ok(())
    }

    /// Ends the COPY: inserts what is left and returns the number of rows copied. On error,
    /// a COPY in its own transaction rolls back; in a transaction block the block fails.
    pub async fn finish(mut self) -> Result<u64> {
        let result = async {
            if !self.pending.is_empty() {
                let rest = std::mem::take(&mut self.pending);
                if !self.ended {
                    self.record(&rest)?;
                }
            }
            self.flush().await?;
            if self.own_txn {
                self.engine.commit(self.txn, self.sync).await?;
                self.end_own();
            }
            Ok(self.inserted)
        }
        .await;
        if result.is_err() {
            self.abort().await;
        }
        result
    }

    /// Abandons the COPY (client sent CopyFail, or an error). A COPY in its own transaction
    /// rolls it back; in a transaction block, the block is left to the session.
    pub async fn abort(mut self) {
        if self.own_txn {
            let _ = self.engine.rollback(self.txn.id).await;
            self.end_own();
        }
    }

    fn end_own(&mut self) {
        if self.own_txn {
            self.engine.release_snapshot(self.txn.start);
            self.own_txn = false;
        }
    }
}

impl Drop for CopyIn {
    /// A COPY abandoned without `finish` or `abort` (its connection went away) must not leave
    /// its transaction behind.
    fn drop(&mut self) {
        if self.own_txn {
            self.engine.rollback_detached(self.txn.id);
            self.end_own();
        }
    }
}

/// Splits a text-format line into fields, undoing backslash escapes; `\N` is NULL.
/// A field without a backslash (most fields) is borrowed from the line rather than copied
/// character by character. `width` is the number of fields expected.
fn split_text<'a>(line: &'a str, f: &CopyFormat, width: usize) -> Result<Vec<Option<Cow<'a, str>>>> {
    let mut out = Vec::with_capacity(width);
    for raw in line.split(f.delimiter) {
        if raw == f.null {
            out.push(None);
            continue;
        }
        if !raw.contains('\\') {
            if raw.contains('\0') {
                return Err(nul_in_field());
            }
            out.push(Some(Cow::Borrowed(raw)));
            continue;
        }
        let mut s = String::with_capacity(raw.len());
        let mut chars = raw.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '\\' {
                s.push(c);
                continue;
            }
            match chars.next() {
                Some('b') => s.push('\u{8}'),
                Some('f') => s.push('\u{c}'),
                Some('n') => s.push('\n'),
                Some('r') => s.push('\r'),
                Some('t') => s.push('\t'),
                Some('v') => s.push('\u{b}'),
                Some(d @ '0'..='7') => {
                    let mut v = d.to_digit(8).unwrap_or(0);
                    for _ in 0..2 {
                        match chars.peek().and_then(|c| c.to_digit(8)) {
                            Some(n) => {
                                v = v * 8 + n;
                                chars.next();
                            }
                            None => break,
                        }
                    }
                    s.push(char::from_u32(v).unwrap_or('\u{fffd}'));
                }
                Some('x') => {
                    let mut v = 0;
                    for _ in 0..2 {
                        match chars.peek().and_then(|c| c.to_digit(16)) {
                            Some(n) => {
                                v = v * 16 + n;
                                chars.next();
                            }
                            None => break,
                        }
                    }
                    s.push(char::from_u32(v).unwrap_or('\u{fffd}'));
                }
                Some(other) => s.push(other),
                None => {}
            }
        }
        if s.contains('\0') {
            return Err(nul_in_field());
        }
        out.push(Some(Cow::Owned(s)));
    }
    Ok(out)
}

fn nul_in_field() -> Error {
    Error::new(SqlState::CharacterNotInRepertoire, "invalid byte sequence for encoding \"UTF8\": 0x00")
}

/// Splits a CSV record; an unquoted field equal to the NULL string is NULL. A field without a
/// quote character is borrowed from the line; one with a quote is read character by character
/// (quoted parts may hold delimiters, and a doubled quote or an escaped one stands for a
/// quote). `width` is the number of fields expected.
fn split_csv<'a>(line: &'a str, f: &CopyFormat, width: usize) -> Result<Vec<Option<Cow<'a, str>>>> {
    let mut out = Vec::with_capacity(width);
    let mut rest = line;
    loop {
        let stop = rest.find([f.quote, f.delimiter]);
        let (field, next) = match stop {
            Some(i) if rest[i..].starts_with(f.quote) => {
                let (field, next) = quoted_csv_field(rest, f)?;
                (csv_field(Cow::Owned(field), true, f), next)
            }
            Some(i) => (csv_field(Cow::Borrowed(&rest[..i]), false, f), Some(&rest[i + f.delimiter.len_utf8()..])),
            None => (csv_field(Cow::Borrowed(rest), false, f), None),
        };
        out.push(field);
        match next {
            Some(n) => rest = n,
            None => return Ok(out),
        }
    }
}

/// The CSV field at the start of `text`, which holds a quote character: its value, and the
/// text after its delimiter (`None` at the end of the record).
fn quoted_csv_field<'a>(text: &'a str, f: &CopyFormat) -> Result<(String, Option<&'a str>)> {
    let mut s = String::with_capacity(text.len().min(64));
    let mut chars = text.char_indices().peekable();
    let mut in_quotes = false;
    while let Some((i, c)) = chars.next() {
        if in_quotes {
            if c == f.escape && chars.peek().map(|&(_, n)| n) == Some(f.quote) && (f.escape != f.quote || c == f.quote) {
                s.push(f.quote);
                chars.next();
            } else if c == f.quote {
                in_quotes = false;
            } else {
                s.push(c);
            }
        } else if c == f.quote {
            in_quotes = true;
        } else if c == f.delimiter {
            return Ok((s, Some(&text[i + c.len_utf8()..])));
        } else {
            s.push(c);
        }
    }
    if in_quotes {
        return Err(Error::new(SqlState::BadCopyFileFormat, "unterminated CSV quoted field"));
    }
    Ok((s, None))
}

fn csv_field<'a>(s: Cow<'a, str>, quoted: bool, f: &CopyFormat) -> Option<Cow<'a, str>> {
    if !quoted && s == f.null.as_str() { None } else { Some(s) }
}

/// COPY … TO STDOUT: rows to send, and how to format them.
pub struct CopyOut {
    pub format: CopyFormat,
    pub columns: Arc<Vec<ColumnInfo>>,
    pub rows: RowStream,
}

impl CopyOut {
    /// The header line of CSV output with HEADER, if any.
    pub fn header(&self) -> Option<Vec<u8>> {
        if !self.format.header {
            return None;
        }
        let names: Vec<String> = self.columns.iter().map(|c| csv_quote(&c.name, &self.format, false)).collect();
        let mut line = names.join(&self.format.delimiter.to_string()).into_bytes();
        line.push(b'\n');
        Some(line)
    }

    /// Formats a batch as COPY data lines.
    pub fn format_batch(&self, batch: &RowBatch, out: &mut Vec<u8>) {
        let converted;
        let rows = match batch {
            RowBatch::Values(rows) => rows,
            RowBatch::Arrow(b) => {
                converted = batch_rows(b, &self.columns);
                &converted
            }
        };
        let mut text = String::new();
        for row in rows {
            text.clear();
            for (i, (v, c)) in row.iter().zip(self.columns.iter()).enumerate() {
                if i > 0 {
                    text.push(self.format.delimiter);
                }
                match v.to_text(c.ty) {
                    None => text.push_str(&self.format.null),
                    Some(s) if self.format.csv => text.push_str(&csv_quote(&s, &self.format, s == self.format.null)),
                    Some(s) => escape_text(&s, self.format.delimiter, &mut text),
                }
            }
            text.push('\n');
            out.extend_from_slice(text.as_bytes());
        }
    }
}

fn escape_text(s: &str, delimiter: char, out: &mut String) {
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' if delimiter == '\t' => out.push_str("\\t"),
            c if c == delimiter => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
}

fn csv_quote(s: &str, f: &CopyFormat, force: bool) -> String {
    let needs = force
        || s.is_empty() && f.null.is_empty()
        || s.contains(f.delimiter)
        || s.contains(f.quote)
        || s.contains('\n')
        || s.contains('\r');
    if !needs {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push(f.quote);
    for c in s.chars() {
        if c == f.quote || c == f.escape {
            out.push(f.escape);
        }
        out.push(c);
    }
    out.push(f.quote);
    out
}

/// The columns a COPY names, or all of them.
pub(crate) fn copy_columns(table: &TableDef, names: &[ast::Ident]) -> Result<Vec<usize>> {
    if names.is_empty() {
        return Ok((0..table.columns.len()).collect());
    }
    names
        .iter()
        .map(|n| {
            let name = freshet_core::sql::names::fold_ident(n);
            table.column_index(&name).ok_or_else(|| {
                Error::new(SqlState::UndefinedColumn, format!("column \"{name}\" of relation \"{}\" does not exist", table.name))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_fields_unescape() {
        let f = CopyFormat::text();
        let fields = split_text("1\ta\\tb\t\\N\tx\\\\y\t\\101", &f, 5).unwrap();
        assert_eq!(
            fields,
            vec![Some("1".into()), Some("a\tb".into()), None, Some("x\\y".into()), Some("A".into())]
        );
    }

    #[test]
    fn csv_fields_quote_and_null() {
        let f = CopyFormat::csv();
        let fields = split_csv("1,\"a,b\",,\"\",\"say \"\"hi\"\"\"", &f, 5).unwrap();
        assert_eq!(
            fields,
            vec![Some("1".into()), Some("a,b".into()), None, Some("".into()), Some("say \"hi\"".into())]
        );
        assert!(split_csv("\"open", &f, 1).is_err());
    }

    #[test]
    fn fields_without_quotes_or_escapes_are_borrowed_and_the_others_read_as_before() {
        let csv = CopyFormat::csv();
        let fields = split_csv("plain,a\"b,c\"d,,x,", &csv, 5).unwrap();
        assert_eq!(fields, vec![Some("plain".into()), Some("ab,cd".into()), None, Some("x".into()), None]);
        assert!(matches!(fields[0], Some(Cow::Borrowed(_))) && matches!(fields[1], Some(Cow::Owned(_))));
        assert_eq!(split_csv("", &csv, 1).unwrap(), vec![None]);
        assert_eq!(split_csv("\"\"", &csv, 1).unwrap(), vec![Some("".into())], "a quoted empty string is not NULL");
        let semi = CopyFormat { delimiter: ';', quote: '\'', escape: '\\', ..CopyFormat::csv() };
        assert_eq!(split_csv("'a;\\'b';c", &semi, 2).unwrap(), vec![Some("a;'b".into()), Some("c".into())]);
        let text = CopyFormat::text();
        let fields = split_text("é\tb\\tc\t", &text, 3).unwrap();
        assert_eq!(fields, vec![Some("é".into()), Some("b\tc".into()), Some("".into())]);
        assert!(matches!(fields[0], Some(Cow::Borrowed(_))));
        assert_eq!(split_text("a\0b", &text, 1).unwrap_err().state, SqlState::CharacterNotInRepertoire);
    }

    #[test]
    fn output_escapes() {
        let mut s = String::new();
        escape_text("a\tb\\c\nd", '\t', &mut s);
        assert_eq!(s, "a\\tb\\\\c\\nd");
        assert_eq!(csv_quote("a,b", &CopyFormat::csv(), false), "\"a,b\"");
        assert_eq!(csv_quote("", &CopyFormat::csv(), false), "\"\"");
        assert_eq!(csv_quote("plain", &CopyFormat::csv(), false), "plain");
    }
}
