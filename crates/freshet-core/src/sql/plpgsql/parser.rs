//! Recursive descent over PL/pgSQL tokens: the CREATE PROCEDURE/FUNCTION header, the DROP
//! statement, and the body's statements.
//!
//! Expressions and embedded SQL statements are not parsed here: their source text (between
//! the tokens that bound them — `THEN`, `LOOP`, `..`, `;` at nesting depth 0) goes to
//! sqlparser, so they accept exactly the SQL the rest of Freshet accepts. `INTO targets` is
//! cut out of a SELECT (or out of the RETURNING clause of INSERT/UPDATE/DELETE) before that.

use sqlparser::ast;
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser as SqlParser;

use super::lexer::{tokenize, Tok, Token};
use super::PlType;
use crate::types::DataType;
use crate::error::{Error, Result};
use crate::sql::bind::sql_type;

/// A parsed `CREATE [OR REPLACE] PROCEDURE|FUNCTION` statement.
#[derive(Clone, Debug)]
pub struct Header {
    pub name: String,
    pub function: bool,
    pub or_replace: bool,
    pub params: Vec<(String, PlType)>,
    /// The types of the input parameters (IN and INOUT; not a procedure's OUT ones, which are
    /// in `params`): with the name, what identifies the routine, as in PostgreSQL, so several
    /// routines may share a name (overloading).
    pub signature: Vec<PlType>,
    /// Per parameter, whether it is a procedure's OUT parameter (not an input).
    pub out_only: Vec<bool>,
    /// The last parameter is `VARIADIC name type[]`: a call may give its elements as
    /// arguments of their own (`f(1, 2, 3)`), which become the array.
    pub variadic: bool,
    /// Per parameter, its default (`DEFAULT expr` or `= expr`): a call may leave out the
    /// parameters from the first one with a default on.
    pub defaults: Vec<Option<ast::Expr>>,
    /// The OUT and INOUT parameters, in order: a function's result (its value for one, a row
    /// of them for several), a procedure's result row. An INOUT parameter is in `params` too,
    /// and so is a procedure's OUT parameter (CALL passes an argument for it, as in
    /// PostgreSQL).
    pub outs: Vec<(String, DataType)>,
    /// A function's result type (`None` for a procedure, `RETURNS void` or a set).
    pub returns: Option<PlType>,
    /// A set-returning function's result (`RETURNS TABLE (…)` or `RETURNS SETOF type`).
    pub set: Option<SetResult>,
    /// The PL/pgSQL body (for a LANGUAGE sql routine, the one [`sql_as_plpgsql`] made).
    pub body: String,
    /// A LANGUAGE sql routine's body as written (`AS '…'`'s text, or the `RETURN …` or
    /// `BEGIN ATOMIC … END` clause); `None` for PL/pgSQL.
    pub sql: Option<String>,
    /// STRICT or RETURNS NULL ON NULL INPUT.
    pub strict: bool,
    /// The input parameters declared `refcursor` (of type text, as a refcursor's value is its
    /// portal's name): the body may OPEN them, as cursor variables.
    pub refcursors: Vec<String>,
}

/// The rows a set-returning function produces.
#[derive(Clone, Debug, PartialEq)]
pub struct SetResult {
    /// The result columns: those of `RETURNS TABLE`, or for `RETURNS SETOF type` one column
    /// named after the function.
    pub columns: Vec<(String, DataType)>,
    /// `RETURNS TABLE`: the columns are also variables of the body, and `RETURN NEXT` (without
    /// an expression) appends their current values.
    pub table: bool,
    /// Not a set: the one row of a function with several OUT parameters (or of a procedure
    /// with OUT parameters), made of their values when it returns.
    pub single: bool,
    /// `RETURNS SETOF table`: rows of that table's columns (`columns` is empty until the
    /// session learns them, see `compile::compile_with`).
    pub relation: Option<String>,
}

/// `DROP PROCEDURE|FUNCTION [IF EXISTS] name [(types)] [, …]`.
#[derive(Clone, Debug)]
pub struct DropRoutines {
    pub function: bool,
    pub if_exists: bool,
    /// Each routine named: its name and, if an argument list was written, the types of its
    /// input parameters (OUT ones left out).
    pub names: Vec<(String, Option<Vec<PlType>>)>,
}

#[derive(Clone, Debug)]
pub struct Decl {
    pub name: String,
    pub ty: DeclType,
    pub default: Option<ast::Expr>,
    pub constant: bool,
}

/// A declared variable's type as written.
#[derive(Clone, Debug, PartialEq)]
pub enum DeclType {
    Plain(PlType),
    /// `record`: a row of whatever query assigns it.
    Record,
    /// `table%ROWTYPE`: a row of the table's columns (the table's name as written).
    RowType(String),
    /// `table.column%TYPE`: the column's type.
    ColumnType { table: String, column: String },
    /// `variable%TYPE`: the type of a variable declared before.
    VariableType(String),
    /// `[NO] [SCROLL] CURSOR [(arguments)] FOR query`: a bound cursor.
    Cursor(Box<CursorDecl>),
    /// `refcursor`: a cursor variable that `OPEN … FOR query` binds.
    RefCursor,
}

/// A bound cursor's declaration.
#[derive(Clone, Debug, PartialEq)]
pub struct CursorDecl {
    /// `SCROLL` (true), `NO SCROLL` (false), or neither.
    pub scroll: Option<bool>,
    pub args: Vec<(String, PlType)>,
    pub statement: ast::Statement,
    pub text: String,
}

/// The direction of a FETCH or MOVE; counts are expressions, evaluated when it runs.
#[derive(Clone, Debug, PartialEq)]
pub enum FetchDir {
    /// `NEXT`, `FORWARD`, or none.
    Next,
    /// `PRIOR`, `BACKWARD`.
    Prior,
    First,
    Last,
    Absolute(ast::Expr),
    Relative(ast::Expr),
    /// `FORWARD count`, or a count alone (MOVE only: it may pass several rows).
    Forward(ast::Expr),
    /// `BACKWARD count` (MOVE only).
    Backward(ast::Expr),
    /// `ALL`, `FORWARD ALL` (MOVE only).
    ForwardAll,
    /// `BACKWARD ALL` (MOVE only).
    BackwardAll,
}

impl FetchDir {
    /// Whether it may pass more than one row, which FETCH … INTO cannot.
    fn many(&self) -> bool {
        matches!(self, FetchDir::Forward(_) | FetchDir::Backward(_) | FetchDir::ForwardAll | FetchDir::BackwardAll)
    }
}

impl DeclType {
    fn parse(text: &str) -> Result<DeclType> {
        let Some((name, attribute)) = text.rsplit_once('%') else {
            if text.trim().eq_ignore_ascii_case("record") {
                return Ok(DeclType::Record);
            }
            if text.trim().eq_ignore_ascii_case("refcursor") {
                return Ok(DeclType::RefCursor);
            }
            return Ok(DeclType::Plain(parse_type(text)?));
        };
        let bad = || err(format!("syntax error in type \"{}\"", text.trim()));
        let mut p = SqlParser::new(&PostgreSqlDialect {}).try_with_sql(name).map_err(|e| crate::sql::parse::syntax_error(name, e))?;
        let object = p.parse_object_name(false).map_err(|e| crate::sql::parse::syntax_error(name, e))?;
        if p.peek_token().token != sqlparser::tokenizer::Token::EOF {
            return Err(bad());
        }
        let mut parts: Vec<String> = object.0.iter().map(|p| p.as_ident().map(crate::sql::names::fold_ident).ok_or_else(bad)).collect::<Result<_>>()?;
        if parts.first().is_some_and(|s| s == "public") && parts.len() > 1 {
            parts.remove(0);
        }
        match (attribute.trim().to_ascii_lowercase().as_str(), parts.as_slice()) {
            ("rowtype", [table]) => Ok(DeclType::RowType(table.clone())),
            ("type", [table, column]) => Ok(DeclType::ColumnType { table: table.clone(), column: column.clone() }),
            ("type", [variable]) => Ok(DeclType::VariableType(variable.clone())),
            _ => Err(bad()),
        }
    }
}

/// RAISE's level. WARNING, NOTICE and INFO reach the client with that severity; LOG and DEBUG
/// are below PostgreSQL's default `client_min_messages` and reach no client (`Quiet`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaiseLevel {
    Exception,
    Warning,
    Notice,
    Info,
    Quiet,
}

#[derive(Clone, Debug)]
pub enum SynStmt {
    Assign { target: String, value: ast::Expr },
    /// `target[index] := value`: one element of an array variable.
    AssignElement { target: String, index: ast::Expr, value: ast::Expr },
    /// An SQL statement; `into` are the targets of `SELECT … INTO` / `RETURNING … INTO`.
    Sql { statement: Box<ast::Statement>, text: String, into: Vec<String>, strict: bool },
    If { branches: Vec<(ast::Expr, Vec<SynStmt>)>, otherwise: Vec<SynStmt> },
    /// `FOR var IN [REVERSE] lo..hi [BY step]`: the bounds are (lo, hi, step).
    ForRange { var: String, reverse: bool, bounds: Box<(ast::Expr, ast::Expr, Option<ast::Expr>)>, body: Vec<SynStmt> },
    Foreach { var: String, array: ast::Expr, body: Vec<SynStmt> },
    /// `FOR a [, b …] IN query LOOP`: each row of the query (a SELECT, or a command with
    /// RETURNING) assigned to the targets in turn.
    ForQuery { targets: Vec<String>, statement: Box<ast::Statement>, text: String, body: Vec<SynStmt> },
    While { cond: ast::Expr, body: Vec<SynStmt> },
    Loop { body: Vec<SynStmt> },
    /// `EXIT [label] [WHEN cond]`: leaves the innermost loop, or the loop or block labelled.
    Exit { label: Option<String>, cond: Option<ast::Expr> },
    /// `CONTINUE [label] [WHEN cond]`: the next iteration of the innermost or labelled loop.
    Continue { label: Option<String>, cond: Option<ast::Expr> },
    Return(Option<ast::Expr>),
    /// `RETURN NEXT [expr]`: appends a row to a set-returning function's result.
    ReturnNext(Option<ast::Expr>),
    /// `RETURN QUERY query`: appends the query's rows to a set-returning function's result.
    ReturnQuery { statement: Box<ast::Statement>, text: String },
    Raise { level: RaiseLevel, format: Option<String>, args: Vec<ast::Expr>, options: Vec<(String, ast::Expr)> },
    /// `RAISE;` in an exception handler: raises the error it caught again.
    Reraise,
    /// `EXECUTE text [INTO [STRICT] targets] [USING values]` or `RETURN QUERY EXECUTE …`.
    Execute(Box<Dynamic>),
    /// `FOR targets IN EXECUTE text [USING values] LOOP`.
    ForExecute { targets: Vec<String>, exec: Box<Dynamic>, body: Vec<SynStmt> },
    /// `OPEN c [(args)]`, `OPEN r [[NO] SCROLL] FOR query` or `OPEN r [[NO] SCROLL] FOR EXECUTE
    /// text [USING …]` (`execute`).
    Open { cursor: String, args: Vec<ast::Expr>, query: Option<(Box<ast::Statement>, String)>, execute: Option<Box<Dynamic>>, scroll: Option<bool> },
    /// `FETCH [direction] [FROM | IN] cursor INTO targets`, or `MOVE [direction] [FROM | IN]
    /// cursor` (`into` `None`).
    Fetch { cursor: String, into: Option<Vec<String>>, direction: FetchDir },
    /// `CLOSE cursor`.
    Close { cursor: String },
    /// `FOR record IN cursor [(arguments)] LOOP`: the record is declared by the loop.
    ForCursor { target: String, cursor: String, args: Vec<ast::Expr>, body: Vec<SynStmt> },
    /// `COMMIT` or `ROLLBACK` `[AND [NO] CHAIN]` in a procedure: ends the call's transaction
    /// and starts the next.
    EndTransaction { rollback: bool, chain: bool },
    /// `GET [CURRENT | STACKED] DIAGNOSTICS target = item [, …]`.
    GetDiagnostics { stacked: bool, items: Vec<(String, String)> },
    /// `ASSERT condition [, message]`.
    Assert { cond: ast::Expr, message: Option<ast::Expr> },
    /// `CASE [subject] WHEN … THEN … [ELSE …] END CASE`: with a subject, each WHEN lists
    /// values compared with it; without, each WHEN is a condition. `otherwise` is `None`
    /// without ELSE (no branch taken is then error 20000).
    Case { subject: Option<ast::Expr>, branches: Vec<(Vec<ast::Expr>, Vec<SynStmt>)>, otherwise: Option<Vec<SynStmt>> },
    Null,
    /// A statement of a body with where it starts: its line in the body (1 is the line the
    /// body starts on) and what PostgreSQL's CONTEXT calls it (`RAISE`, `SQL statement`).
    At { line: u32, kind: &'static str, statement: Box<SynStmt> },
    /// `[DECLARE …] BEGIN … [EXCEPTION WHEN … THEN …] END`.
    Block { decls: Vec<Decl>, body: Vec<SynStmt>, handlers: Vec<Handler> },
    /// `<<label>>` before a loop or a block (`statement` is one), which EXIT and CONTINUE
    /// name.
    Labeled { label: String, statement: Box<SynStmt> },
}

/// `WHEN condition [OR condition …] THEN statements` of a block's EXCEPTION section.
#[derive(Clone, Debug)]
pub struct Handler {
    /// SQLSTATE codes (a code ending in `000` stands for its whole class), or `OTHERS`.
    pub conditions: Vec<String>,
    pub body: Vec<SynStmt>,
}

/// PostgreSQL's condition names (Appendix A of its manual) for the errors Freshet raises.
const CONDITIONS: [(&str, &str); 40] = [
    ("others", "OTHERS"),
    ("raise_exception", "P0001"),
    ("no_data_found", "P0002"),
    ("too_many_rows", "P0003"),
    ("assert_failure", "P0004"),
    ("plpgsql_error", "P0000"),
    ("data_exception", "22000"),
    ("division_by_zero", "22012"),
    ("numeric_value_out_of_range", "22003"),
    ("string_data_right_truncation", "22001"),
    ("invalid_text_representation", "22P02"),
    ("invalid_parameter_value", "22023"),
    ("null_value_not_allowed", "22004"),
    ("invalid_datetime_format", "22007"),
    ("datetime_field_overflow", "22008"),
    ("character_not_in_repertoire", "22021"),
    ("invalid_escape_sequence", "22025"),
    ("integrity_constraint_violation", "23000"),
    ("not_null_violation", "23502"),
    ("foreign_key_violation", "23503"),
    ("unique_violation", "23505"),
    ("check_violation", "23514"),
    ("cardinality_violation", "21000"),
    ("transaction_rollback", "40000"),
    ("serialization_failure", "40001"),
    ("deadlock_detected", "40P01"),
    ("syntax_error_or_access_rule_violation", "42000"),
    ("syntax_error", "42601"),
    ("undefined_column", "42703"),
    ("undefined_table", "42P01"),
    ("undefined_function", "42883"),
    ("datatype_mismatch", "42804"),
    ("insufficient_privilege", "42501"),
    ("duplicate_table", "42P07"),
    ("feature_not_supported", "0A000"),
    ("lock_not_available", "55P03"),
    ("object_not_in_prerequisite_state", "55000"),
    ("program_limit_exceeded", "54000"),
    ("read_only_sql_transaction", "25006"),
    ("in_failed_sql_transaction", "25P02"),
];

fn err(msg: impl Into<String>) -> Error {
    Error::syntax(msg)
}

/// The SQLSTATE of a condition name (`unique_violation`), or `OTHERS`.
pub fn condition_code(name: &str) -> Option<&'static str> {
    CONDITIONS.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, code)| *code)
}

/// One condition of a WHEN clause: a name or `SQLSTATE 'code'`.
fn condition(c: &mut Cursor) -> Result<String> {
    if c.eat_word("sqlstate") {
        return match c.peek().map(|t| t.tok.clone()) {
            Some(Tok::Str(code)) if code.len() == 5 && code.bytes().all(|b| b.is_ascii_alphanumeric()) && !code.starts_with("00") => {
                c.pos += 1;
                Ok(code.to_ascii_uppercase())
            }
            Some(Tok::Str(code)) => Err(Error::new(crate::error::SqlState::custom("42704").unwrap_or(crate::error::SqlState::SyntaxError), format!("invalid SQLSTATE code \"{code}\""))),
            _ => Err(err(c.near())),
        };
    }
    let name = c.ident()?;
    CONDITIONS.iter().find(|(n, _)| *n == name).map(|(_, code)| code.to_string()).ok_or_else(|| {
        Error::new(crate::error::SqlState::custom("42704").unwrap_or(crate::error::SqlState::SyntaxError), format!("unrecognized exception condition \"{name}\""))
    })
}

/// Parses `text` as one SQL expression.
pub fn parse_expr(text: &str) -> Result<ast::Expr> {
    let mut p = SqlParser::new(&PostgreSqlDialect {}).try_with_sql(text).map_err(|e| crate::sql::parse::syntax_error(text, e))?;
    let e = p.parse_expr().map_err(|e| crate::sql::parse::syntax_error(text, e))?;
    if p.peek_token().token != sqlparser::tokenizer::Token::EOF {
        return Err(err(format!("syntax error at or near \"{}\" in expression \"{text}\"", p.peek_token().token)));
    }
    Ok(e)
}

/// Parses the type of a result column: a SQL type, not an array.
fn scalar_type(text: &str) -> Result<DataType> {
    match parse_type(text)? {
        PlType::Scalar(t) => Ok(t),
        PlType::Array(_) => Err(Error::unsupported("array result columns")),
    }
}

/// Parses a type name: a SQL type, or an array of one (`INT[]`). `refcursor` is text: a
/// cursor's value is its portal's name.
pub fn parse_type(text: &str) -> Result<PlType> {
    if text.trim().eq_ignore_ascii_case("refcursor") {
        return Ok(PlType::Scalar(DataType::Text));
    }
    let mut p = SqlParser::new(&PostgreSqlDialect {}).try_with_sql(text).map_err(|e| crate::sql::parse::syntax_error(text, e))?;
    let t = p.parse_data_type().map_err(|e| crate::sql::parse::syntax_error(text, e))?;
    if p.peek_token().token != sqlparser::tokenizer::Token::EOF {
        return Err(err(format!("syntax error in type \"{text}\"")));
    }
    match &t {
        ast::DataType::Array(ast::ArrayElemTypeDef::SquareBracket(inner, _) | ast::ArrayElemTypeDef::AngleBracket(inner)) => {
            Ok(PlType::Array(sql_type(inner)?))
        }
        other => Ok(PlType::Scalar(sql_type(other)?)),
    }
}

struct Cursor<'a> {
    src: &'a str,
    toks: Vec<Token>,
    pos: usize,
    /// The label of the loop or block being parsed, from `<<label>>` to where the loop's
    /// body or the block's DECLARE begins.
    label: Option<String>,
}

impl<'a> Cursor<'a> {
    fn new(src: &'a str) -> Result<Self> {
        Ok(Cursor { src, toks: tokenize(src)?, pos: 0, label: None })
    }

    fn peek(&self) -> Option<&Token> {
        self.toks.get(self.pos)
    }

    fn peek_word(&self, w: &str) -> bool {
        self.peek().is_some_and(|t| t.is_word(w))
    }

    fn peek_op(&self, o: &str) -> bool {
        self.peek().is_some_and(|t| t.is_op(o))
    }

    fn eat_word(&mut self, w: &str) -> bool {
        let yes = self.peek_word(w);
        if yes {
            self.pos += 1;
        }
        yes
    }

    fn eat_op(&mut self, o: &str) -> bool {
        let yes = self.peek_op(o);
        if yes {
            self.pos += 1;
        }
        yes
    }

    fn near(&self) -> String {
        match self.peek() {
            Some(t) => format!("syntax error at or near \"{}\"", &self.src[t.start..t.end]),
            None => "syntax error at end of input".to_string(),
        }
    }

    fn expect_word(&mut self, w: &str) -> Result<()> {
        if self.eat_word(w) { Ok(()) } else { Err(err(format!("{} (expected {})", self.near(), w.to_uppercase()))) }
    }

    fn expect_op(&mut self, o: &str) -> Result<()> {
        if self.eat_op(o) { Ok(()) } else { Err(err(format!("{} (expected \"{o}\")", self.near()))) }
    }

    fn ident(&mut self) -> Result<String> {
        match self.peek().map(|t| t.tok.clone()) {
            Some(Tok::Word(w)) | Some(Tok::Quoted(w)) => {
                self.pos += 1;
                Ok(w)
            }
            _ => Err(err(format!("{} (expected a name)", self.near()))),
        }
    }

    /// A possibly schema-qualified routine name (`public.f` is `f`: there is one schema).
    fn routine_name(&mut self) -> Result<String> {
        let first = self.ident()?;
        if self.eat_op(".") {
            let second = self.ident()?;
            if first != "public" {
                return Err(Error::new(crate::error::SqlState::UndefinedObject, format!("schema \"{first}\" does not exist")));
            }
            return Ok(second);
        }
        Ok(first)
    }

    /// Advances to the first token at nesting depth 0 for which `stop` holds; returns the
    /// source text skipped and the index of the stopping token (or the end).
    fn until(&mut self, stop: impl Fn(&Token) -> bool) -> (String, usize) {
        let begin = self.pos;
        let mut depth = 0i32;
        while let Some(t) = self.toks.get(self.pos) {
            if depth == 0 && stop(t) {
                break;
            }
            match &t.tok {
                Tok::Op(o) if o == "(" || o == "[" => depth += 1,
                Tok::Op(o) if o == ")" || o == "]" => depth -= 1,
                Tok::Word(w) if w == "case" => depth += 1,
                Tok::Word(w) if w == "end" && depth > 0 => depth -= 1,
                _ => {}
            }
            self.pos += 1;
        }
        (self.text(begin, self.pos), self.pos)
    }

    fn text(&self, from: usize, to: usize) -> String {
        if from >= to {
            return String::new();
        }
        self.src[self.toks[from].start..self.toks[to - 1].end].to_string()
    }

    fn expr_until(&mut self, stop: impl Fn(&Token) -> bool) -> Result<ast::Expr> {
        let (text, _) = self.until(stop);
        if text.trim().is_empty() {
            return Err(err(format!("{} (expected an expression)", self.near())));
        }
        parse_expr(&text)
    }
}

/// Parses a whole `CREATE [OR REPLACE] PROCEDURE|FUNCTION …` statement (its body is parsed
/// separately by [`parse_body`]).
pub fn parse_header(sql: &str) -> Result<Header> {
    let mut c = Cursor::new(sql)?;
    c.expect_word("create")?;
    let or_replace = c.eat_word("or");
    if or_replace {
        c.expect_word("replace")?;
    }
    let function = routine_kind(&mut c)?;
    let name = c.routine_name()?;
    c.expect_op("(")?;
    let mut params = Vec::new();
    let mut defaults = Vec::new();
    let mut signature = Vec::new();
    let mut out_only = Vec::new();
    let mut outs = Vec::new();
    let mut refcursors = Vec::new();
    let mut variadic = false;
    if !c.eat_op(")") {
        loop {
            let this_variadic = c.eat_word("variadic");
            let out_only_param = c.peek_word("out");
            let (input, output) = if c.eat_word("out") {
                (!function, true)
            } else if c.eat_word("inout") {
                (true, true)
            } else {
                c.eat_word("in");
                (true, false)
            };
            if variadic && !out_only_param {
                return Err(Error::new(crate::error::SqlState::InvalidFunctionDefinition, "VARIADIC parameter must be the last input parameter"));
            }
            if variadic && input {
                // A procedure's OUT parameter is passed in CALL: the elements would end before it.
                return Err(Error::unsupported("a procedure's OUT parameter after its VARIADIC one"));
            }
            variadic |= this_variadic;
            let first = c.pos;
            let mut pname = c.ident()?;
            let (mut ty, _) = c.until(|t| t.is_op(",") || t.is_op(")") || t.is_word("default") || t.is_op("="));
            // A parameter without a name (`f(INT, double precision)`): what was read as its
            // name starts its type. The body reads it as `$n`.
            let typed = |text: &str| parse_type(text).is_ok();
            if ty.trim().is_empty() || (!typed(&ty) && typed(&format!("{pname} {ty}"))) {
                let (whole, _) = {
                    c.pos = first;
                    c.until(|t| t.is_op(",") || t.is_op(")") || t.is_word("default") || t.is_op("="))
                };
                ty = whole;
                pname = format!("${}", params.len() + 1);
            }
            let default = if c.eat_word("default") || c.eat_op("=") { Some(c.expr_until(|t| t.is_op(",") || t.is_op(")"))?) } else { None };
            if default.is_none() && defaults.iter().any(Option::is_some) {
                return Err(Error::new(
                    crate::error::SqlState::InvalidFunctionDefinition,
                    "input parameters after one with a default value must also have defaults",
                ));
            }
            if input && ty.trim().eq_ignore_ascii_case("refcursor") {
                refcursors.push(pname.clone());
            }
            let ty = parse_type(&ty)?;
            if this_variadic && !matches!(ty, PlType::Array(_)) {
                return Err(Error::new(crate::error::SqlState::InvalidFunctionDefinition, "VARIADIC parameter must be an array"));
            }
            if output {
                let PlType::Scalar(t) = ty else { return Err(Error::unsupported("array OUT parameters")) };
                outs.push((pname.clone(), t));
            }
            if input && !out_only_param {
                signature.push(ty);
            }
            if input {
                out_only.push(out_only_param);
                params.push((pname, ty));
                defaults.push(default);
            } else if default.is_some() {
                return Err(err("only input parameters can have default values"));
            }
            if c.eat_op(")") {
                break;
            }
            c.expect_op(",")?;
        }
    }
    let mut returns = None;
    let mut set = None;
    let mut body = None;
    let mut language = None;
    let mut standard = None;
    let mut strict = false;
    while let Some(t) = c.peek().cloned() {
        if c.eat_op(";") {
            continue;
        }
        match &t.tok {
            Tok::Word(w) if w == "returns" && c.toks.get(c.pos + 1).is_some_and(|t| t.is_word("null")) => {
                // RETURNS NULL ON NULL INPUT
                c.pos += 1;
                for word in ["null", "on", "null", "input"] {
                    c.expect_word(word)?;
                }
                strict = true;
            }
            Tok::Word(w) if w == "returns" => {
                c.pos += 1;
                if c.eat_word("table") {
                    c.expect_op("(")?;
                    let mut columns = Vec::new();
                    loop {
                        let cname = c.ident()?;
                        let (ty, _) = c.until(|t| t.is_op(",") || t.is_op(")"));
                        columns.push((cname, scalar_type(&ty)?));
                        if c.eat_op(")") {
                            break;
                        }
                        c.expect_op(",")?;
                    }
                    set = Some(SetResult { columns, table: true, single: false, relation: None });
                    continue;
                }
                let setof = c.eat_word("setof");
                let (ty, _) = c.until(|t| {
                    [
                        "language", "as", "immutable", "stable", "volatile", "strict", "security", "external", "parallel", "cost", "rows", "support",
                        "called", "returns", "return", "begin", "set", "leakproof", "not", "window", "transform",
                    ]
                        .iter()
                        .any(|k| t.is_word(k))
                        || t.is_op(";")
                });
                if setof {
                    let relation = ty.trim().chars().all(|ch| ch.is_alphanumeric() || ch == '_' || ch == '.' || ch == '"');
                    set = Some(match scalar_type(&ty) {
                        Ok(t) => SetResult { columns: vec![(name.clone(), t)], table: false, single: false, relation: None },
                        // Not a type: a table's rows.
                        Err(_) if relation => {
                            let table = ty.trim().trim_start_matches("public.");
                            let table = if table.contains('"') { table.trim_matches('"').to_string() } else { table.to_lowercase() };
                            SetResult { columns: Vec::new(), table: false, single: false, relation: Some(table) }
                        }
                        Err(e) => return Err(e),
                    });
                    continue;
                }
                // `RETURNS record` with OUT parameters: their row (see below).
                let record = ty.trim().eq_ignore_ascii_case("record") && !outs.is_empty();
                returns = if ty.eq_ignore_ascii_case("void") || record { None } else { Some(parse_type(&ty)?) };
            }
            Tok::Word(w) if w == "language" => {
                c.pos += 1;
                language = Some(match c.peek().map(|t| t.tok.clone()) {
                    Some(Tok::Str(s)) => {
                        c.pos += 1;
                        s.to_lowercase()
                    }
                    _ => c.ident()?,
                });
            }
            Tok::Word(w) if w == "as" => {
                c.pos += 1;
                body = Some(match c.peek().map(|t| t.tok.clone()) {
                    Some(Tok::Dollar(s)) | Some(Tok::Str(s)) => {
                        c.pos += 1;
                        s
                    }
                    _ => return Err(err(format!("{} (expected the body as a string)", c.near()))),
                });
            }
            // SQL-standard bodies of LANGUAGE sql routines: `RETURN expr` and `BEGIN ATOMIC
            // statement; … END`, the routine's last clause.
            Tok::Word(w) if w == "return" => {
                c.pos += 1;
                let rest = c.toks[c.pos..].iter().rev().find(|t| !t.is_op(";")).map_or(c.src.len(), |t| t.end);
                let from = c.toks.get(c.pos).map_or(rest, |t| t.start);
                standard = Some(SqlBody::Return(c.src[from..rest.max(from)].to_string()));
                c.pos = c.toks.len();
            }
            Tok::Word(w) if w == "begin" && c.toks.get(c.pos + 1).is_some_and(|t| t.is_word("atomic")) => {
                c.pos += 2;
                let from = c.toks.get(c.pos).map_or(c.src.len(), |t| t.start);
                let end = c.toks[c.pos..].iter().rposition(|t| t.is_word("end")).map(|i| c.pos + i).ok_or_else(|| err("BEGIN ATOMIC without END"))?;
                standard = Some(SqlBody::Atomic(c.src[from..c.toks[end].start].to_string()));
                c.pos = end + 1;
            }
            Tok::Word(w) if w == "strict" => {
                c.pos += 1;
                strict = true;
            }
            // Accepted, with no effect here: volatility (a function in a query runs once per
            // distinct argument list whatever it says, `in_query`), LEAKPROOF, the planner's
            // COST, ROWS, SUPPORT and PARALLEL hints, SECURITY DEFINER / INVOKER (there is one
            // role and no privileges), and SET clauses (a routine runs with the settings of
            // the session that calls it; there is one schema, so `SET search_path = …` changes
            // nothing a routine sees).
            Tok::Word(w) if ["immutable", "stable", "volatile", "leakproof"].contains(&w.as_str()) => c.pos += 1,
            Tok::Word(w) if w == "not" && c.toks.get(c.pos + 1).is_some_and(|t| t.is_word("leakproof")) => c.pos += 2,
            Tok::Word(w) if w == "external" || w == "security" => {
                c.pos += 1;
                if w == "external" {
                    c.expect_word("security")?;
                }
                if !(c.eat_word("definer") || c.eat_word("invoker")) {
                    return Err(err(c.near()));
                }
            }
            Tok::Word(w) if w == "parallel" => {
                c.pos += 1;
                if !(c.eat_word("safe") || c.eat_word("unsafe") || c.eat_word("restricted")) {
                    return Err(err(c.near()));
                }
            }
            Tok::Word(w) if w == "cost" || w == "rows" => {
                c.pos += 1;
                if !matches!(c.peek().map(|t| &t.tok), Some(Tok::Number)) {
                    return Err(err(c.near()));
                }
                c.pos += 1;
            }
            Tok::Word(w) if w == "support" => {
                c.pos += 1;
                c.routine_name()?;
            }
            Tok::Word(w) if w == "set" => {
                // SET name {TO | =} value [, …] | SET name FROM CURRENT
                c.pos += 1;
                c.ident()?;
                while c.eat_op(".") {
                    c.ident()?;
                }
                if c.eat_word("from") {
                    c.expect_word("current")?;
                } else {
                    if !(c.eat_word("to") || c.eat_op("=")) {
                        return Err(err(c.near()));
                    }
                    loop {
                        match c.peek().map(|t| t.tok.clone()) {
                            Some(Tok::Word(_) | Tok::Quoted(_) | Tok::Str(_) | Tok::Number) => c.pos += 1,
                            Some(Tok::Op(o)) if o == "-" => c.pos += 1,
                            _ => return Err(err(c.near())),
                        }
                        if !c.eat_op(",") {
                            break;
                        }
                    }
                }
            }
            Tok::Word(w) if w == "window" || w == "transform" => return Err(Error::unsupported(format!("{} in CREATE FUNCTION", w.to_uppercase()))),
            Tok::Word(w) if w == "called" => {
                // CALLED ON NULL INPUT
                c.pos += 1;
                c.expect_word("on")?;
                c.expect_word("null")?;
                c.expect_word("input")?;
            }
            _ => return Err(err(c.near())),
        }
    }
    let sql_body = match (language.as_deref(), standard) {
        (Some("plpgsql"), None) => None,
        (Some("plpgsql"), Some(_)) => return Err(err("a PL/pgSQL routine's body is given with AS")),
        (Some("sql") | None, Some(standard)) => Some(standard),
        (Some("sql"), None) => Some(SqlBody::Statements(body.take().ok_or_else(|| err("no function body specified"))?)),
        (None, None) => return Err(err("no language specified")),
        (Some(other), _) => return Err(Error::unsupported(format!("LANGUAGE {other} (only plpgsql and sql)"))),
    };
    // OUT parameters make the result: one is the function's value, several a row of them
    // (the RETURNS clause, `record` or the one type, says the same).
    if !outs.is_empty() && set.is_some() {
        return Err(Error::unsupported("OUT parameters with RETURNS TABLE or SETOF"));
    }
    match outs.as_slice() {
        [] => {}
        [(_, t)] if function => returns = Some(PlType::Scalar(*t)),
        _ => {
            returns = None;
            set = Some(SetResult { columns: outs.clone(), table: true, single: true, relation: None });
        }
    }
    if function && returns.is_none() && set.is_none() && !sql.to_lowercase().contains("returns") {
        return Err(Error::new(
            crate::error::SqlState::InvalidFunctionDefinition,
            "function result type must be specified",
        ));
    }
    if !function && (returns.is_some() || set.as_ref().is_some_and(|s| !s.single)) {
        return Err(err("procedures cannot have a RETURNS clause"));
    }
    let (body, sql) = match sql_body {
        Some(sql) => {
            let written = match &sql {
                SqlBody::Statements(text) => text.clone(),
                SqlBody::Return(expr) => format!("RETURN {expr}"),
                SqlBody::Atomic(text) => format!("BEGIN ATOMIC\n {}\nEND", text.trim()),
            };
            (sql_as_plpgsql(sql, function, returns.as_ref(), set.as_ref())?, Some(written))
        }
        None => (body.ok_or_else(|| err("no function body specified"))?, None),
    };
    Ok(Header { name, function, or_replace, params, signature, out_only, variadic, defaults, outs, returns, set, body, sql, strict, refcursors })
}

/// The body of a LANGUAGE sql routine.
enum SqlBody {
    /// `AS 'statement; …'`
    Statements(String),
    /// `RETURN expr`
    Return(String),
    /// `BEGIN ATOMIC statement; … END`
    Atomic(String),
}

/// A LANGUAGE sql routine's body as the PL/pgSQL body that does the same: its statements run
/// in order; a function's value is the first row of the last one (`RETURN (last)` — a
/// SELECT; `last INTO result` — an INSERT, UPDATE or DELETE with RETURNING), a
/// set-returning function's rows all of the last one's (`RETURN QUERY`). A SELECT whose rows
/// nothing uses runs as `PERFORM`. The routine's parameters are the body's variables, by name
/// or as `$n`, and (unlike PostgreSQL's SQL functions, where a column of the same name wins)
/// a parameter wins over a column of the same name, as in all of Freshet's routines.
fn sql_as_plpgsql(body: SqlBody, function: bool, returns: Option<&PlType>, set: Option<&SetResult>) -> Result<String> {
    let statements = match body {
        SqlBody::Return(expr) => return Ok(format!("BEGIN RETURN {expr}; END")),
        SqlBody::Statements(text) | SqlBody::Atomic(text) => text,
    };
    // The statements, split at `;` outside quotes and parentheses.
    let tokens = tokenize(&statements)?;
    let mut pieces: Vec<(&str, String)> = Vec::new();
    let mut start: Option<usize> = None;
    let mut depth = 0i32;
    for (i, t) in tokens.iter().enumerate() {
        match &t.tok {
            Tok::Op(o) if o == "(" => depth += 1,
            Tok::Op(o) if o == ")" => depth -= 1,
            _ => {}
        }
        let ends = depth == 0 && t.is_op(";");
        if !ends && start.is_none() {
            start = Some(i);
        }
        let last = i + 1 == tokens.len();
        if let Some(from) = start
            && (ends || last)
        {
            let to = if ends { i - 1 } else { i };
            let first = match &tokens[from].tok {
                Tok::Word(w) => w.clone(),
                // `(SELECT …) UNION …`
                Tok::Op(o) if o == "(" => "select".to_string(),
                _ => String::new(),
            };
            pieces.push((&statements[tokens[from].start..tokens[to].end], first));
            start = None;
        }
    }
    let returns_rows = set.is_some_and(|s| !s.single);
    let returns_value = function && (returns.is_some() || set.is_some_and(|s| s.single));
    if set.is_some_and(|s| s.single) {
        return Err(Error::unsupported("LANGUAGE sql functions with OUT parameters"));
    }
    let query = |first: &str| matches!(first, "select" | "with" | "values" | "table");
    let mismatch = || {
        let declared = returns.map_or_else(|| "record".to_string(), |t| t.name());
        Error::new(
            crate::error::SqlState::InvalidFunctionDefinition,
            format!("return type mismatch in function declared to return {declared}"),
        )
        .with_detail("Function's final statement must be SELECT or INSERT/UPDATE/DELETE RETURNING.")
    };
    let mut declare = String::new();
    let mut code = String::new();
    let count = pieces.len();
    for (i, (text, first)) in pieces.iter().enumerate() {
        let last = i + 1 == count;
        if last && returns_rows {
            if !query(first) {
                return Err(err("a LANGUAGE sql set-returning function's last statement must be a query"));
            }
            code.push_str(&format!("RETURN QUERY {text};\n"));
        } else if last && returns_value {
            if query(first) {
                code.push_str(&format!("RETURN ({text});\n"));
            } else if text.to_lowercase().contains("returning") {
                let ty = match returns {
                    Some(PlType::Scalar(t)) => t.to_string(),
                    Some(other) => other.name(),
                    None => return Err(err("a LANGUAGE sql function's result type is missing")),
                };
                declare = format!("DECLARE freshet_result {ty};\n");
                code.push_str(&format!("{text} INTO freshet_result;\nRETURN freshet_result;\n"));
            } else {
                return Err(mismatch());
            }
        } else if query(first) {
            code.push_str(&format!("PERFORM * FROM ({text}) AS freshet_ignored;\n"));
        } else {
            code.push_str(&format!("{text};\n"));
        }
    }
    if returns_value && count == 0 {
        return Err(mismatch());
    }
    Ok(format!("{declare}BEGIN\n{code}END"))
}

/// Parses `DROP PROCEDURE|FUNCTION [IF EXISTS] name [([mode] [argname] argtype, …)] [, …]
/// [CASCADE | RESTRICT]`.
pub fn parse_drop(sql: &str) -> Result<DropRoutines> {
    let mut c = Cursor::new(sql)?;
    c.expect_word("drop")?;
    let function = routine_kind(&mut c)?;
    let if_exists = c.eat_word("if");
    if if_exists {
        c.expect_word("exists")?;
    }
    let mut names = Vec::new();
    loop {
        names.push(routine_with_arguments(&mut c)?);
        if !c.eat_op(",") {
            break;
        }
    }
    let _ = c.eat_word("cascade") || c.eat_word("restrict");
    c.eat_op(";");
    if c.peek().is_some() {
        return Err(err(c.near()));
    }
    Ok(DropRoutines { function, if_exists, names })
}

/// `FUNCTION` (true) or `PROCEDURE` (false), after CREATE, DROP or ALTER.
fn routine_kind(c: &mut Cursor) -> Result<bool> {
    if c.eat_word("function") {
        return Ok(true);
    }
    c.expect_word("procedure")?;
    Ok(false)
}

/// A routine as DROP and ALTER name it: `name [([mode] [argname] argtype, …)]`, with the types
/// of its input parameters if the list is written (OUT ones left out).
fn routine_with_arguments(c: &mut Cursor) -> Result<(String, Option<Vec<PlType>>)> {
    let name = c.routine_name()?;
    if !c.eat_op("(") {
        return Ok((name, None));
    }
    let mut list = Vec::new();
    while !c.eat_op(")") {
        let output = c.eat_word("out");
        let _ = output || c.eat_word("inout") || c.eat_word("in") || c.eat_word("variadic");
        let (text, _) = c.until(|t| t.is_op(",") || t.is_op(")"));
        // `[name] type`: the whole is a type, or what follows its first word is.
        let ty = parse_type(&text).or_else(|e| text.trim().split_once(char::is_whitespace).map_or(Err(e), |(_, rest)| parse_type(rest)))?;
        if !output {
            list.push(ty);
        }
        if !c.eat_op(",") {
            c.expect_op(")")?;
            break;
        }
    }
    Ok((name, Some(list)))
}

/// `ALTER FUNCTION | PROCEDURE name [(argtypes)] OWNER TO role`.
#[derive(Clone, Debug)]
pub struct AlterRoutine {
    pub function: bool,
    pub name: String,
    pub types: Option<Vec<PlType>>,
}

/// Parses `ALTER FUNCTION | PROCEDURE name [(argtypes)] OWNER TO role` (what pg_dump writes
/// after each routine); other actions are 0A000.
pub fn parse_alter(sql: &str) -> Result<AlterRoutine> {
    let mut c = Cursor::new(sql)?;
    c.expect_word("alter")?;
    let function = routine_kind(&mut c)?;
    let (name, types) = routine_with_arguments(&mut c)?;
    if !(c.eat_word("owner") && c.eat_word("to")) {
        let kind = if function { "FUNCTION" } else { "PROCEDURE" };
        return Err(Error::unsupported(format!("ALTER {kind} other than OWNER TO")).with_hint("Use CREATE OR REPLACE to change a routine."));
    }
    c.ident()?;
    c.eat_op(";");
    if c.peek().is_some() {
        return Err(err(c.near()));
    }
    Ok(AlterRoutine { function, name, types })
}

/// Parses a PL/pgSQL body: `[DECLARE …] BEGIN … END [;]`.
pub fn parse_body(body: &str) -> Result<SynStmt> {
    let mut c = Cursor::new(body)?;
    let label = label(&mut c)?;
    if label.is_some() && !c.peek_word("declare") && !c.peek_word("begin") {
        return Err(err(c.near()));
    }
    c.label = label.clone();
    let block = labeled(label, block(&mut c)?);
    c.eat_op(";");
    if c.peek().is_some() {
        return Err(err(c.near()));
    }
    Ok(block)
}

/// `<<label>>`, if one comes next.
fn label(c: &mut Cursor) -> Result<Option<String>> {
    if !c.eat_op("<<") {
        return Ok(None);
    }
    let name = c.ident()?;
    if !c.eat_op(">>") {
        return Err(err(c.near()));
    }
    Ok(Some(name))
}

fn labeled(label: Option<String>, statement: SynStmt) -> SynStmt {
    match label {
        Some(label) => SynStmt::Labeled { label, statement: Box::new(statement) },
        None => statement,
    }
}

/// After END [LOOP]: the label that may follow it, which must be the loop's or block's own
/// (`label`, taken from [`Cursor::label`] as it began).
fn end_label(c: &mut Cursor, label: Option<&str>) -> Result<()> {
    if c.peek_op(";") || c.peek().is_none() {
        return Ok(());
    }
    let end = c.ident()?;
    match label {
        Some(l) if l == end => Ok(()),
        Some(l) => Err(err(format!("end label \"{end}\" differs from block's label \"{l}\""))),
        None => Err(err(format!("end label \"{end}\" specified for unlabeled block"))),
    }
}

fn block(c: &mut Cursor) -> Result<SynStmt> {
    let label = c.label.take();
    let mut decls = Vec::new();
    if c.eat_word("declare") {
        while !c.peek_word("begin") {
            if c.peek().is_none() {
                return Err(err(c.near()));
            }
            decls.push(decl(c)?);
        }
    }
    c.expect_word("begin")?;
    let body = statements(c)?;
    let mut handlers = Vec::new();
    if c.eat_word("exception") {
        while c.eat_word("when") {
            let mut conditions = vec![condition(c)?];
            while c.eat_word("or") {
                conditions.push(condition(c)?);
            }
            c.expect_word("then")?;
            handlers.push(Handler { conditions, body: statements(c)? });
        }
        if handlers.is_empty() {
            return Err(err(c.near()));
        }
    }
    c.expect_word("end")?;
    end_label(c, label.as_deref())?;
    Ok(SynStmt::Block { decls, body, handlers })
}

fn decl(c: &mut Cursor) -> Result<Decl> {
    let name = c.ident()?;
    // `name [NO] [SCROLL] CURSOR [(arguments)] FOR | IS query;`
    let at = c.pos;
    let scroll = scroll_option(c);
    if c.eat_word("cursor") {
        let mut args = Vec::new();
        if c.eat_op("(") {
            loop {
                let arg = c.ident()?;
                let (ty, _) = c.until(|t| t.is_op(",") || t.is_op(")"));
                args.push((arg, parse_type(&ty)?));
                if !c.eat_op(",") {
                    break;
                }
            }
            c.expect_op(")")?;
        }
        if !c.eat_word("for") && !c.eat_word("is") {
            return Err(err(c.near()));
        }
        let begin = c.pos;
        let (text, _) = c.until(|t| t.is_op(";"));
        if begin == c.pos {
            return Err(err(c.near()));
        }
        c.expect_op(";")?;
        let statement = one_statement(&text)?;
        return Ok(Decl { name, ty: DeclType::Cursor(Box::new(CursorDecl { scroll, args, statement, text })), default: None, constant: false });
    }
    c.pos = at;
    let constant = c.eat_word("constant");
    let (ty, _) = c.until(|t| t.is_op(":=") || t.is_op("=") || t.is_word("default") || t.is_op(";") || t.is_word("not"));
    let ty = DeclType::parse(&ty)?;
    if c.eat_word("not") {
        c.expect_word("null")?;
    }
    let default = if c.eat_op(":=") || c.eat_op("=") || c.eat_word("default") { Some(c.expr_until(|t| t.is_op(";"))?) } else { None };
    c.expect_op(";")?;
    Ok(Decl { name, ty, default, constant })
}

/// Statements up to (not including) END, ELSIF, ELSE, EXCEPTION or WHEN.
fn statements(c: &mut Cursor) -> Result<Vec<SynStmt>> {
    let mut out = Vec::new();
    loop {
        match c.peek() {
            None => return Err(err("syntax error at end of input (missing END)")),
            // WHEN starts the next handler of an EXCEPTION section; no statement begins with it.
            Some(t) if ["end", "elsif", "elseif", "else", "exception", "when"].iter().any(|k| t.is_word(k)) => return Ok(out),
            _ => {
                let start = c.peek().map_or(0, |t| t.start);
                let line = 1 + c.src[..start].matches('\n').count() as u32;
                let perform = c.peek_word("perform");
                let statement = statement(c)?;
                let kind = if perform { "PERFORM" } else { statement.kind() };
                out.push(SynStmt::At { line, kind, statement: Box::new(statement) });
            }
        }
    }
}

impl SynStmt {
    /// What PostgreSQL's CONTEXT lines call a statement of this kind.
    fn kind(&self) -> &'static str {
        match self {
            SynStmt::Assign { .. } | SynStmt::AssignElement { .. } => "assignment",
            SynStmt::Sql { statement, .. } if matches!(**statement, ast::Statement::Call(_)) => "CALL",
            SynStmt::Sql { .. } => "SQL statement",
            SynStmt::If { .. } => "IF",
            SynStmt::ForRange { .. } => "FOR with integer loop variable",
            SynStmt::Foreach { .. } => "FOREACH over array",
            SynStmt::ForQuery { .. } => "FOR over SELECT rows",
            SynStmt::While { .. } => "WHILE",
            SynStmt::Loop { .. } => "LOOP",
            SynStmt::Exit { .. } => "EXIT",
            SynStmt::Continue { .. } => "CONTINUE",
            SynStmt::Return(_) => "RETURN",
            SynStmt::ReturnNext(_) => "RETURN NEXT",
            SynStmt::ReturnQuery { .. } => "RETURN QUERY",
            SynStmt::Raise { .. } | SynStmt::Reraise => "RAISE",
            SynStmt::Execute(e) if e.query => "RETURN QUERY",
            SynStmt::Execute(_) => "EXECUTE",
            SynStmt::ForExecute { .. } => "FOR over EXECUTE statement",
            SynStmt::GetDiagnostics { stacked: false, .. } => "GET DIAGNOSTICS",
            SynStmt::GetDiagnostics { stacked: true, .. } => "GET STACKED DIAGNOSTICS",
            SynStmt::Assert { .. } => "ASSERT",
            SynStmt::Case { .. } => "CASE",
            SynStmt::Null => "NULL",
            SynStmt::Open { .. } => "OPEN",
            SynStmt::Fetch { into: Some(_), .. } => "FETCH",
            SynStmt::Fetch { into: None, .. } => "MOVE",
            SynStmt::Close { .. } => "CLOSE",
            SynStmt::ForCursor { .. } => "FOR over cursor",
            SynStmt::EndTransaction { rollback: false, .. } => "COMMIT",
            SynStmt::EndTransaction { rollback: true, .. } => "ROLLBACK",
            SynStmt::At { kind, .. } => kind,
            SynStmt::Block { .. } => "statement block",
            SynStmt::Labeled { statement, .. } => statement.kind(),
        }
    }
}

fn statement(c: &mut Cursor) -> Result<SynStmt> {
    if let Some(name) = label(c)? {
        // A label names a loop or a block; the loop or block takes it from the cursor as it
        // begins, to check the one after its END.
        if !["loop", "while", "for", "foreach", "declare", "begin"].iter().any(|w| c.peek_word(w)) {
            return Err(err(c.near()));
        }
        c.label = Some(name.clone());
        return Ok(labeled(Some(name), statement(c)?));
    }
    let Some(first) = c.peek().cloned() else { return Err(err(c.near())) };
    let word = match &first.tok {
        Tok::Word(w) => w.clone(),
        _ => return Err(err(c.near())),
    };
    // `record.field := value`.
    let field_assign = c.toks.get(c.pos + 1).is_some_and(|t| t.is_op("."))
        && c.toks.get(c.pos + 2).is_some_and(|t| matches!(t.tok, Tok::Word(_) | Tok::Quoted(_)))
        && c.toks.get(c.pos + 3).is_some_and(|t| t.is_op(":=") || t.is_op("="));
    if field_assign {
        let field = match &c.toks[c.pos + 2].tok {
            Tok::Word(w) | Tok::Quoted(w) => w.clone(),
            _ => unreachable!("checked above"),
        };
        c.pos += 4;
        let value = c.expr_until(|t| t.is_op(";"))?;
        c.expect_op(";")?;
        return Ok(SynStmt::Assign { target: format!("{word}.{field}"), value });
    }
    // `array[index] := value`.
    if c.toks.get(c.pos + 1).is_some_and(|t| t.is_op("[")) {
        let start = c.pos;
        c.pos += 2;
        let (index, _) = c.until(|t| t.is_op("]"));
        if c.eat_op("]") && (c.eat_op(":=") || c.eat_op("=")) {
            if index.trim().is_empty() {
                return Err(err(c.near()));
            }
            let index = parse_expr(&index)?;
            let value = c.expr_until(|t| t.is_op(";"))?;
            c.expect_op(";")?;
            return Ok(SynStmt::AssignElement { target: word, index, value });
        }
        c.pos = start;
    }
    let next_is_assign = c.toks.get(c.pos + 1).is_some_and(|t| t.is_op(":=") || t.is_op("="));
    if next_is_assign {
        c.pos += 2;
        let value = c.expr_until(|t| t.is_op(";"))?;
        c.expect_op(";")?;
        return Ok(SynStmt::Assign { target: word, value });
    }
    match word.as_str() {
        "if" => if_statement(c),
        "for" => for_statement(c),
        "foreach" => {
            c.pos += 1;
            let var = c.ident()?;
            if c.eat_word("slice") {
                return Err(Error::unsupported("FOREACH … SLICE"));
            }
            c.expect_word("in")?;
            c.expect_word("array")?;
            let array = c.expr_until(|t| t.is_word("loop"))?;
            let body = loop_body(c)?;
            Ok(SynStmt::Foreach { var, array, body })
        }
        "while" => {
            c.pos += 1;
            let cond = c.expr_until(|t| t.is_word("loop"))?;
            let body = loop_body(c)?;
            Ok(SynStmt::While { cond, body })
        }
        "loop" => Ok(SynStmt::Loop { body: loop_body(c)? }),
        "exit" | "continue" => {
            c.pos += 1;
            let label = if c.peek_word("when") || c.peek_op(";") { None } else { Some(c.ident()?) };
            let cond = if c.eat_word("when") { Some(c.expr_until(|t| t.is_op(";"))?) } else { None };
            c.expect_op(";")?;
            Ok(if word == "exit" { SynStmt::Exit { label, cond } } else { SynStmt::Continue { label, cond } })
        }
        "return" => {
            c.pos += 1;
            if c.eat_word("next") {
                let value = if c.peek_op(";") { None } else { Some(c.expr_until(|t| t.is_op(";"))?) };
                c.expect_op(";")?;
                return Ok(SynStmt::ReturnNext(value));
            }
            if c.eat_word("query") {
                if c.eat_word("execute") {
                    let exec = dynamic(c, ";")?;
                    c.expect_op(";")?;
                    if !exec.into.is_empty() {
                        return Err(err("RETURN QUERY EXECUTE cannot have INTO"));
                    }
                    return Ok(SynStmt::Execute(Box::new(exec)));
                }
                let begin = c.pos;
                let (text, _) = c.until(|t| t.is_op(";"));
                if begin == c.pos {
                    return Err(err(c.near()));
                }
                c.expect_op(";")?;
                return Ok(SynStmt::ReturnQuery { statement: Box::new(one_statement(&text)?), text });
            }
            let value = if c.peek_op(";") { None } else { Some(c.expr_until(|t| t.is_op(";"))?) };
            c.expect_op(";")?;
            Ok(SynStmt::Return(value))
        }
        "raise" => raise(c),
        "null" => {
            c.pos += 1;
            c.expect_op(";")?;
            Ok(SynStmt::Null)
        }
        "declare" | "begin" => {
            let b = block(c)?;
            c.expect_op(";")?;
            Ok(b)
        }
        "perform" => {
            c.pos += 1;
            let (text, _) = c.until(|t| t.is_op(";"));
            c.expect_op(";")?;
            let text = format!("SELECT {text}");
            Ok(SynStmt::Sql { statement: Box::new(one_statement(&text)?), text, into: vec![], strict: false })
        }
        "select" | "insert" | "update" | "delete" | "with" | "call" => sql_statement(c),
        "open" => {
            c.pos += 1;
            let cursor = c.ident()?;
            let args = cursor_args(c)?;
            let scroll = scroll_option(c);
            if scroll.is_some() && !c.peek_word("for") {
                return Err(err(c.near()));
            }
            let (mut query, mut execute) = (None, None);
            if c.eat_word("for") {
                if c.eat_word("execute") {
                    let exec = dynamic(c, ";")?;
                    if !exec.into.is_empty() {
                        return Err(err("INTO"));
                    }
                    execute = Some(Box::new(exec));
                } else {
                    let begin = c.pos;
                    let (text, _) = c.until(|t| t.is_op(";"));
                    if begin == c.pos {
                        return Err(err(c.near()));
                    }
                    query = Some((Box::new(one_statement(&text)?), text));
                }
            }
            c.expect_op(";")?;
            Ok(SynStmt::Open { cursor, args, query, execute, scroll })
        }
        "fetch" | "move" => {
            c.pos += 1;
            let direction = fetch_direction(c)?;
            if word == "fetch" && direction.many() {
                return Err(err("FETCH statement cannot return multiple rows"));
            }
            let cursor = c.ident()?;
            let into = if word == "fetch" {
                c.expect_word("into")?;
                let mut targets = vec![c.ident()?];
                while c.eat_op(",") {
                    targets.push(c.ident()?);
                }
                Some(targets)
            } else {
                None
            };
            c.expect_op(";")?;
            Ok(SynStmt::Fetch { cursor, into, direction })
        }
        "close" => {
            c.pos += 1;
            let cursor = c.ident()?;
            c.expect_op(";")?;
            Ok(SynStmt::Close { cursor })
        }
        "commit" | "rollback" => {
            c.pos += 1;
            let chain = if c.eat_word("and") {
                let no = c.eat_word("no");
                c.expect_word("chain")?;
                !no
            } else {
                false
            };
            c.expect_op(";")?;
            Ok(SynStmt::EndTransaction { rollback: word == "rollback", chain })
        }
        "savepoint" | "release" => Err(Error::unsupported("SAVEPOINT and RELEASE in PL/pgSQL (a block with an EXCEPTION section sets one)")),
        "get" => get_diagnostics(c),
        "assert" => {
            c.pos += 1;
            let cond = c.expr_until(|t| t.is_op(",") || t.is_op(";"))?;
            let message = if c.eat_op(",") { Some(c.expr_until(|t| t.is_op(";"))?) } else { None };
            c.expect_op(";")?;
            Ok(SynStmt::Assert { cond, message })
        }
        "case" => case_statement(c),
        "execute" => {
            c.pos += 1;
            let mut exec = dynamic(c, ";")?;
            c.expect_op(";")?;
            exec.query = false;
            Ok(SynStmt::Execute(Box::new(exec)))
        }
        _ => Err(err(c.near())),
    }
}

fn loop_body(c: &mut Cursor) -> Result<Vec<SynStmt>> {
    let label = c.label.take();
    c.expect_word("loop")?;
    let body = statements(c)?;
    c.expect_word("end")?;
    c.expect_word("loop")?;
    end_label(c, label.as_deref())?;
    c.expect_op(";")?;
    Ok(body)
}

fn if_statement(c: &mut Cursor) -> Result<SynStmt> {
    c.expect_word("if")?;
    let mut branches = Vec::new();
    let mut otherwise = Vec::new();
    loop {
        let cond = c.expr_until(|t| t.is_word("then"))?;
        c.expect_word("then")?;
        branches.push((cond, statements(c)?));
        if c.eat_word("elsif") || c.eat_word("elseif") {
            continue;
        }
        if c.eat_word("else") {
            otherwise = statements(c)?;
        }
        break;
    }
    c.expect_word("end")?;
    c.expect_word("if")?;
    c.expect_op(";")?;
    Ok(SynStmt::If { branches, otherwise })
}

fn for_statement(c: &mut Cursor) -> Result<SynStmt> {
    c.expect_word("for")?;
    let mut targets = vec![c.ident()?];
    while c.eat_op(",") {
        targets.push(c.ident()?);
    }
    c.expect_word("in")?;
    // `FOR r IN cursor [(arguments)] LOOP` (a range's bound may also start with a name: it
    // has `..` before LOOP).
    if let ([target], Some(Tok::Word(_))) = (targets.as_slice(), c.peek().map(|t| &t.tok)) {
        let at = c.pos;
        let cursor = c.ident()?;
        let args = cursor_args(c);
        if args.is_ok() && c.peek_word("loop") {
            let body = loop_body(c)?;
            return Ok(SynStmt::ForCursor { target: target.clone(), cursor, args: args?, body });
        }
        c.pos = at;
    }
    if ["select", "with", "insert", "update", "delete"].iter().any(|w| c.peek_word(w)) {
        let begin = c.pos;
        let (text, _) = c.until(|t| t.is_word("loop"));
        if begin == c.pos {
            return Err(err(c.near()));
        }
        let statement = Box::new(one_statement(&text)?);
        let body = loop_body(c)?;
        return Ok(SynStmt::ForQuery { targets, statement, text, body });
    }
    if c.eat_word("execute") {
        let exec = dynamic(c, "loop")?;
        if !exec.into.is_empty() {
            return Err(err("FOR … IN EXECUTE cannot have INTO"));
        }
        let body = loop_body(c)?;
        return Ok(SynStmt::ForExecute { targets, exec: Box::new(exec), body });
    }
    let [var] = <[String; 1]>::try_from(targets).map_err(|_| err("integer FOR loop must have only one target variable"))?;
    let reverse = c.eat_word("reverse");
    let lo = c.expr_until(|t| t.is_op("..") || t.is_word("loop"))?;
    c.expect_op("..")?;
    let hi = c.expr_until(|t| t.is_word("by") || t.is_word("loop"))?;
    let step = if c.eat_word("by") { Some(c.expr_until(|t| t.is_word("loop"))?) } else { None };
    let body = loop_body(c)?;
    Ok(SynStmt::ForRange { var, reverse, bounds: Box::new((lo, hi, step)), body })
}

/// Dynamic SQL: a statement's text computed when it runs.
#[derive(Clone, Debug)]
pub struct Dynamic {
    pub text: ast::Expr,
    pub into: Vec<String>,
    pub strict: bool,
    /// The values of `$1`, `$2`, … in the text.
    pub using: Vec<ast::Expr>,
    /// `RETURN QUERY EXECUTE`: its rows are appended to the result.
    pub query: bool,
}

/// After EXECUTE: the text expression, then INTO and USING in either order, up to `;` (or the
/// word `end`, for FOR … IN EXECUTE … LOOP).
fn dynamic(c: &mut Cursor, end: &str) -> Result<Dynamic> {
    let stop = |t: &Token| t.is_word("into") || t.is_word("using") || t.is_op(";") || t.is_word(end);
    let text = c.expr_until(stop)?;
    let mut exec = Dynamic { text, into: Vec::new(), strict: false, using: Vec::new(), query: true };
    loop {
        if c.eat_word("into") {
            exec.strict = c.eat_word("strict");
            loop {
                exec.into.push(c.ident()?);
                if !c.eat_op(",") {
                    break;
                }
            }
        } else if c.eat_word("using") {
            loop {
                exec.using.push(c.expr_until(|t| t.is_op(",") || stop(t))?);
                if !c.eat_op(",") {
                    break;
                }
            }
        } else {
            return Ok(exec);
        }
    }
}

fn get_diagnostics(c: &mut Cursor) -> Result<SynStmt> {
    c.expect_word("get")?;
    let stacked = c.eat_word("stacked");
    if !stacked {
        c.eat_word("current");
    }
    c.expect_word("diagnostics")?;
    let mut items = Vec::new();
    loop {
        let target = c.ident()?;
        if !(c.eat_op("=") || c.eat_op(":=")) {
            return Err(err(c.near()));
        }
        items.push((target, c.ident()?));
        if !c.eat_op(",") {
            break;
        }
    }
    c.expect_op(";")?;
    Ok(SynStmt::GetDiagnostics { stacked, items })
}

fn case_statement(c: &mut Cursor) -> Result<SynStmt> {
    c.expect_word("case")?;
    let subject = if c.peek_word("when") { None } else { Some(c.expr_until(|t| t.is_word("when"))?) };
    let mut branches = Vec::new();
    while c.eat_word("when") {
        let mut values = vec![c.expr_until(|t| t.is_word("then") || (subject.is_some() && t.is_op(",")))?];
        while subject.is_some() && c.eat_op(",") {
            values.push(c.expr_until(|t| t.is_word("then") || t.is_op(","))?);
        }
        c.expect_word("then")?;
        branches.push((values, statements(c)?));
    }
    if branches.is_empty() {
        return Err(err(format!("{} (CASE needs a WHEN)", c.near())));
    }
    let otherwise = if c.eat_word("else") { Some(statements(c)?) } else { None };
    c.expect_word("end")?;
    c.expect_word("case")?;
    c.expect_op(";")?;
    Ok(SynStmt::Case { subject, branches, otherwise })
}

fn raise(c: &mut Cursor) -> Result<SynStmt> {
    c.expect_word("raise")?;
    if c.eat_op(";") {
        return Ok(SynStmt::Reraise);
    }
    let levels = [
        ("exception", RaiseLevel::Exception),
        ("warning", RaiseLevel::Warning),
        ("notice", RaiseLevel::Notice),
        ("info", RaiseLevel::Info),
        ("log", RaiseLevel::Quiet),
        ("debug", RaiseLevel::Quiet),
    ];
    let level = levels.iter().find(|(word, _)| c.eat_word(word)).map_or(RaiseLevel::Exception, |&(_, level)| level);
    let mut format = None;
    let mut args = Vec::new();
    if let Some(Tok::Str(s)) = c.peek().map(|t| t.tok.clone()) {
        c.pos += 1;
        format = Some(s);
        while c.eat_op(",") {
            args.push(c.expr_until(|t| t.is_op(",") || t.is_op(";") || t.is_word("using"))?);
        }
    }
    let mut options = Vec::new();
    // `RAISE condition_name` / `RAISE SQLSTATE 'code'`: that SQLSTATE, and the name (or the
    // code) as the message unless USING gives one.
    if format.is_none() && !c.peek_word("using") {
        let literal = |s: &str| ast::Expr::Value(ast::Value::SingleQuotedString(s.to_string()).with_empty_span());
        let code = condition(c)?;
        if code == "OTHERS" {
            return Err(err("unrecognized exception condition \"others\""));
        }
        let name = CONDITIONS.iter().find(|(_, k)| *k == code).map_or(code.as_str(), |(n, _)| *n);
        let message = if c.toks.get(c.pos.wrapping_sub(1)).is_some_and(|t| matches!(t.tok, Tok::Str(_))) { code.clone() } else { name.to_string() };
        options.push(("errcode".to_string(), literal(&code)));
        options.push(("message".to_string(), literal(&message)));
    }
    if c.eat_word("using") {
        loop {
            let name = c.ident()?;
            if !(c.eat_op("=") || c.eat_op(":=")) {
                return Err(err(c.near()));
            }
            let value = c.expr_until(|t| t.is_op(",") || t.is_op(";"))?;
            options.push((name, value));
            if !c.eat_op(",") {
                break;
            }
        }
    }
    c.expect_op(";")?;
    let placeholders = format.as_deref().map_or(0, |f| f.matches('%').count() - 2 * f.matches("%%").count());
    if placeholders != args.len() {
        return Err(err(if placeholders > args.len() { "too few parameters specified for RAISE" } else { "too many parameters specified for RAISE" }));
    }
    Ok(SynStmt::Raise { level, format, args, options })
}

/// `SCROLL` (true) or `NO SCROLL` (false), if one comes next.
fn scroll_option(c: &mut Cursor) -> Option<bool> {
    if c.peek_word("no") && c.toks.get(c.pos + 1).is_some_and(|t| t.is_word("scroll")) {
        c.pos += 2;
        Some(false)
    } else if c.eat_word("scroll") {
        Some(true)
    } else {
        None
    }
}

/// The direction of a FETCH or MOVE, and the FROM or IN after it: up to the cursor's name.
/// A count is an expression (PostgreSQL's PL/pgSQL takes any integer expression there), and
/// FROM or IN must follow it. As in PostgreSQL, a name that is not a direction's keyword is
/// the cursor's, so a count alone must not begin with one (`MOVE -n FROM c`, `MOVE 2 FROM c`).
fn fetch_direction(c: &mut Cursor) -> Result<FetchDir> {
    const KEYWORDS: [&str; 9] = ["next", "prior", "first", "last", "absolute", "relative", "all", "forward", "backward"];
    // The cursor's name is next if the statement ends after it or INTO follows it.
    let names_cursor = c.toks.get(c.pos + 1).is_none_or(|t| t.is_op(";") || t.is_word("into"));
    let word = matches!(c.peek().map(|t| &t.tok), Some(Tok::Word(_) | Tok::Quoted(_)));
    if names_cursor || (word && !KEYWORDS.iter().any(|k| c.peek_word(k)) && !c.peek_word("from") && !c.peek_word("in")) {
        return Ok(FetchDir::Next);
    }
    if c.eat_word("from") || c.eat_word("in") {
        return Ok(FetchDir::Next);
    }
    let count = |c: &mut Cursor| -> Result<ast::Expr> {
        let (text, _) = c.until(|t| t.is_word("from") || t.is_word("in") || t.is_op(";"));
        if !(c.eat_word("from") || c.eat_word("in")) {
            return Err(err("missing \"FROM or IN\" at end of SQL expression"));
        }
        if text.trim().is_empty() {
            return Err(err(format!("{} (expected an expression)", c.near())));
        }
        parse_expr(&text)
    };
    let word = |c: &Cursor, w: &str| c.peek_word(w);
    let direction = if c.eat_word("next") {
        FetchDir::Next
    } else if c.eat_word("prior") {
        FetchDir::Prior
    } else if c.eat_word("first") {
        FetchDir::First
    } else if c.eat_word("last") {
        FetchDir::Last
    } else if c.eat_word("absolute") {
        return Ok(FetchDir::Absolute(count(c)?));
    } else if c.eat_word("relative") {
        return Ok(FetchDir::Relative(count(c)?));
    } else if c.eat_word("all") {
        FetchDir::ForwardAll
    } else if word(c, "forward") || word(c, "backward") {
        let forward = c.eat_word("forward");
        if !forward {
            c.pos += 1;
        }
        if word(c, "from") || word(c, "in") {
            if forward { FetchDir::Next } else { FetchDir::Prior }
        } else if c.eat_word("all") {
            if forward { FetchDir::ForwardAll } else { FetchDir::BackwardAll }
        } else if forward {
            return Ok(FetchDir::Forward(count(c)?));
        } else {
            return Ok(FetchDir::Backward(count(c)?));
        }
    } else {
        return Ok(FetchDir::Forward(count(c)?));
    };
    let _ = c.eat_word("from") || c.eat_word("in");
    Ok(direction)
}

/// A cursor's arguments, `(a, b)`, if they come next.
fn cursor_args(c: &mut Cursor) -> Result<Vec<ast::Expr>> {
    let mut args = Vec::new();
    if c.eat_op("(") {
        loop {
            args.push(c.expr_until(|t| t.is_op(",") || t.is_op(")"))?);
            if !c.eat_op(",") {
                break;
            }
        }
        c.expect_op(")")?;
    }
    Ok(args)
}

fn one_statement(text: &str) -> Result<ast::Statement> {
    let mut parsed = crate::sql::parse::parse_plain(text)?;
    if parsed.len() != 1 {
        return Err(err(format!("expected one SQL statement in \"{text}\"")));
    }
    Ok(parsed.remove(0))
}

/// An embedded SQL statement up to its `;`, with `INTO [STRICT] a, b` cut out.
fn sql_statement(c: &mut Cursor) -> Result<SynStmt> {
    let begin = c.pos;
    let (_, end) = c.until(|t| t.is_op(";"));
    c.expect_op(";")?;
    // A WITH clause's queries are in parentheses: the statement's verb is the first of these
    // words outside them.
    let mut depth = 0i32;
    let verb = (begin..end).find(|&i| {
        match &c.toks[i].tok {
            Tok::Op(o) if o == "(" => depth += 1,
            Tok::Op(o) if o == ")" => depth -= 1,
            Tok::Word(w) => return depth == 0 && matches!(w.as_str(), "select" | "insert" | "update" | "delete" | "values" | "table"),
            _ => {}
        }
        false
    });
    let is_select = verb.is_some_and(|i| c.toks[i].is_word("select"));
    // Where INTO may stand: in a SELECT, the first INTO at depth 0; otherwise after RETURNING.
    let mut depth = 0i32;
    let mut seen_returning = false;
    let mut into_at = None;
    for i in begin..end {
        let t = &c.toks[i];
        match &t.tok {
            Tok::Op(o) if o == "(" => depth += 1,
            Tok::Op(o) if o == ")" => depth -= 1,
            Tok::Word(w) if depth == 0 && w == "returning" => seen_returning = true,
            Tok::Word(w) if depth == 0 && w == "into" && (is_select || seen_returning) && i > begin => {
                into_at = Some(i);
                break;
            }
            _ => {}
        }
    }
    let mut into = Vec::new();
    let mut strict = false;
    let text = match into_at {
        None => c.text(begin, end),
        Some(at) => {
            let mut i = at + 1;
            if c.toks.get(i).is_some_and(|t| t.is_word("strict")) {
                strict = true;
                i += 1;
            }
            loop {
                match c.toks.get(i).map(|t| &t.tok) {
                    Some(Tok::Word(w)) | Some(Tok::Quoted(w)) if i < end => into.push(w.clone()),
                    _ => return Err(err("syntax error in INTO target list")),
                }
                i += 1;
                if i < end && c.toks[i].is_op(",") {
                    i += 1;
                    continue;
                }
                break;
            }
            format!("{} {}", c.text(begin, at), c.text(i, end))
        }
    };
    let statement = Box::new(one_statement(&text)?);
    Ok(SynStmt::Sql { statement, text, into, strict })
}

/// The routine statement a piece of SQL text starts with, if any: CREATE [OR REPLACE]
/// PROCEDURE|FUNCTION, DROP PROCEDURE|FUNCTION, or DO.
pub fn routine_statement(tokens: &[Token]) -> Option<RoutineStatement> {
    let w: Vec<&str> = tokens
        .iter()
        .take(4)
        .map(|t| match &t.tok {
            Tok::Word(w) => w.as_str(),
            _ => "",
        })
        .collect();
    match w.as_slice() {
        ["create", "procedure" | "function", ..] | ["create", "or", "replace", "procedure" | "function"] => Some(RoutineStatement::Create),
        ["drop", "procedure" | "function", ..] => Some(RoutineStatement::Drop),
        ["alter", "procedure" | "function", ..] => Some(RoutineStatement::Alter),
        ["do", ..] => Some(RoutineStatement::Do),
        _ => None,
    }
}

/// A statement that [`split_if_routines`] hands on whole, as its text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoutineStatement {
    Create,
    Drop,
    Alter,
    /// An anonymous code block, `DO [LANGUAGE name] code` ([`do_as_procedure`]).
    Do,
}

/// The name of a `DO` block's procedure.
pub const ANONYMOUS_BLOCK: &str = "inline_code_block";

/// `DO [LANGUAGE name] code` (the language before or after the code, PL/pgSQL when not
/// given) as the text of the procedure it runs: `CREATE PROCEDURE inline_code_block()
/// LANGUAGE name AS code`, named as PostgreSQL names such a block in CONTEXT lines.
pub fn do_as_procedure(sql: &str) -> Result<String> {
    let tokens = tokenize(sql)?;
    let text = |t: &Token| &sql[t.start..t.end];
    let (mut language, mut code) = (None, None);
    let mut i = usize::from(tokens.first().is_some_and(|t| t.is_word("do")));
    while let Some(t) = tokens.get(i) {
        match &t.tok {
            Tok::Word(w) if w == "language" && language.is_none() => {
                let name = tokens.get(i + 1).ok_or_else(|| Error::syntax("syntax error at end of input"))?;
                language = Some(match &name.tok {
                    Tok::Word(l) | Tok::Str(l) | Tok::Quoted(l) => l.clone(),
                    _ => return Err(Error::syntax(format!("syntax error at or near \"{}\"", text(name)))),
                });
                i += 2;
            }
            Tok::Str(_) | Tok::Dollar(_) if code.is_none() => {
                code = Some(text(t));
                i += 1;
            }
            Tok::Op(o) if o == ";" => i += 1,
            _ => return Err(Error::syntax(format!("syntax error at or near \"{}\"", text(t)))),
        }
    }
    let code = code.ok_or_else(|| Error::syntax("no inline code specified"))?;
    match language {
        Some(l) if l.to_lowercase() != "plpgsql" => {
            Err(Error::new(crate::error::SqlState::FeatureNotSupported, format!("language \"{l}\" does not support inline code execution")))
        }
        _ => Ok(format!("CREATE PROCEDURE {ANONYMOUS_BLOCK}() LANGUAGE plpgsql AS {code}")),
    }
}

/// Splits SQL text at `;` between statements (outside quotes and dollar quotes) when one of
/// its statements is a routine statement; `None` otherwise (or if it does not tokenize).
pub fn split_if_routines(sql: &str) -> Option<Vec<(String, Option<RoutineStatement>)>> {
    let pieces = split_statements(sql)?;
    pieces.iter().any(|(_, kind)| kind.is_some()).then_some(pieces)
}

/// Splits SQL text at `;` between statements (outside quotes, dollar quotes and `BEGIN
/// ATOMIC` bodies), each piece with the routine statement it is, if one; `None` if the text
/// does not tokenize.
pub fn split_statements(sql: &str) -> Option<Vec<(String, Option<RoutineStatement>)>> {
    let tokens = tokenize(sql).ok()?;
    let mut pieces = Vec::new();
    let mut start = 0;
    // Inside a `BEGIN ATOMIC … END` body the `;` end its statements, not the routine's; CASE
    // … END nests in them.
    let (mut atomic, mut cases) = (false, 0usize);
    for (i, t) in tokens.iter().enumerate() {
        if t.is_word("atomic") && i > 0 && tokens[i - 1].is_word("begin") {
            atomic = true;
        } else if atomic && t.is_word("case") {
            cases += 1;
        } else if atomic && t.is_word("end") {
            if cases > 0 {
                cases -= 1;
            } else {
                atomic = false;
            }
        }
        if t.is_op(";") && !atomic {
            if start < i {
                let kind = routine_statement(&tokens[start..i]);
                pieces.push((sql[tokens[start].start..tokens[i - 1].end].to_string(), kind));
            }
            start = i + 1;
        }
    }
    if start < tokens.len() {
        let kind = routine_statement(&tokens[start..]);
        pieces.push((sql[tokens[start].start..tokens[tokens.len() - 1].end].to_string(), kind));
    }
    Some(pieces)
}
