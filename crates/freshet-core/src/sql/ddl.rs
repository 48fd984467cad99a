//! Planning DDL: CREATE/DROP TABLE, CREATE/DROP INDEX, ALTER TABLE … ADD PRIMARY KEY,
//! TRUNCATE. Execution (catalog publication and storage on every partition) is in `engine`.

use sqlparser::ast;

use super::bind::{column_type, sql_type, Binder};
use super::expr::{EvalContext, Expr, Func, NoRow};
use super::names::{fold_ident, user_relation};
use crate::catalog::{ColumnDef, ColumnDefault, IndexDef, TableDef};
use crate::sequence::{SequenceDef, SequenceOptions};
use crate::error::{Error, Result, SqlState};
use crate::types::DataType;

#[derive(Clone, Debug)]
pub enum DdlPlan {
    /// `notices`: what the client is told besides the command tag (FOREIGN KEY constraints
    /// accepted without enforcement).
    CreateTable { def: TableDef, if_not_exists: bool, notices: Vec<String> },
    /// `cascade`: also drop the views that depend on them.
    DropTables { names: Vec<String>, if_exists: bool, cascade: bool },
    CreateIndex { table: String, name: String, columns: Vec<String>, unique: bool, if_not_exists: bool },
    DropIndexes { names: Vec<String>, if_exists: bool },
    AddPrimaryKey { table: String, columns: Vec<String> },
    /// `ALTER TABLE … ADD [CONSTRAINT name] CHECK (condition)`: checked against every row.
    AddCheck { table: String, name: Option<String>, sql: String },
    /// `COMMENT ON TABLE t | COLUMN t.c IS 'text' | NULL`.
    Comment { table: String, column: Option<String>, text: Option<String> },
    /// `ALTER TABLE … ADD [CONSTRAINT name] UNIQUE (columns)`: a unique index, as PostgreSQL
    /// makes one for the constraint.
    AddUnique { table: String, name: String, columns: Vec<String> },
    /// ALTER TABLE … ADD COLUMN.
    AddColumn { table: String, column: ColumnDef, if_not_exists: bool },
    /// `restart_identity`: the tables' own sequences start again (RESTART IDENTITY).
    Truncate { tables: Vec<String>, restart_identity: bool },
    /// CREATE [OR REPLACE] PROCEDURE|FUNCTION, compiled (`plpgsql::compile`).
    CreateProcedure { routine: std::sync::Arc<super::plpgsql::Routine> },
    DropProcedures { function: bool, names: Vec<(String, Option<Vec<crate::sql::plpgsql::PlType>>)>, if_exists: bool },
    /// CREATE [OR REPLACE] VIEW, its query already checked and its columns typed by the
    /// planner (the id is given when it runs).
    CreateView { def: crate::catalog::ViewDef, or_replace: bool },
    DropViews { names: Vec<String>, if_exists: bool, cascade: bool },
    CreateSequence { def: SequenceDef, if_not_exists: bool },
    /// ALTER TABLE … ALTER COLUMN … SET DEFAULT e (bound against the column's type when it
    /// runs) or DROP DEFAULT (`None`).
    AlterColumnDefault { table: String, column: String, default: Option<Box<ast::Expr>> },
    /// ALTER TABLE … ALTER COLUMN … ADD GENERATED … AS IDENTITY: a sequence the table owns,
    /// named `name` (pg_dump's `SEQUENCE NAME`) or `<table>_<column>_seq`.
    AddIdentity { table: String, column: String, always: bool, options: SequenceOptions, name: Option<String> },
    /// ALTER SEQUENCE … OWNED BY table.column (or NONE).
    SequenceOwnedBy { sequence: String, owner: Option<(String, String)> },
    /// ALTER TABLE … RENAME TO to.
    RenameTable { table: String, to: String },
    /// ALTER TABLE … RENAME COLUMN from TO to.
    RenameColumn { table: String, from: String, to: String },
    /// ALTER TABLE … DROP COLUMN [IF EXISTS] column [RESTRICT | CASCADE].
    DropColumn { table: String, column: String, if_exists: bool },
    /// ALTER TABLE … ALTER COLUMN … [SET DATA] TYPE ty [USING column::ty]: `explicit` when
    /// USING casts the column (an explicit cast), otherwise an assignment cast.
    AlterColumnType { table: String, column: String, ty: DataType, explicit: bool },
    /// ALTER TABLE … ALTER COLUMN … SET NOT NULL (`nullable` false) or DROP NOT NULL.
    AlterColumnNullable { table: String, column: String, nullable: bool },
    /// A statement accepted without a change (a FOREIGN KEY added under
    /// `freshet.foreign_keys = ignore`), with what the client is told.
    Accepted { tag: &'static str, notices: Vec<String> },
    DropSequences { names: Vec<String>, if_exists: bool },
}

/// What CREATE TABLE does with a FOREIGN KEY constraint (the `freshet.foreign_keys` setting).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForeignKeys {
    /// Refuse the statement (0A000): Freshet does not enforce foreign keys.
    Refuse,
    /// Accept the statement without the constraint, with a notice saying so (for schemas
    /// written for PostgreSQL whose integrity the application already keeps).
    Ignore,
}

/// A FOREIGN KEY constraint of table `table`: refused, or ignored with a notice.
fn foreign_key(policy: ForeignKeys, table: &str, fk: &ast::ForeignKeyConstraint, notices: &mut Vec<String>) -> Result<()> {
    match policy {
        ForeignKeys::Refuse => Err(Error::unsupported("FOREIGN KEY constraints (Freshet does not enforce them)")
            .with_hint("SET freshet.foreign_keys = ignore accepts the statement without them.")),
        ForeignKeys::Ignore => {
            let columns = fk.columns.iter().map(fold_ident).collect::<Vec<_>>().join(", ");
            notices.push(format!(
                "FOREIGN KEY ({columns}) REFERENCES {} of table \"{table}\" is ignored: it is neither enforced nor recorded (freshet.foreign_keys = ignore)",
                fk.foreign_table
            ));
            Ok(())
        }
    }
}

pub fn plan_create_table(ct: &ast::CreateTable, foreign_keys: ForeignKeys) -> Result<DdlPlan> {
    if ct.query.is_some() {
        return Err(Error::unsupported("CREATE TABLE … AS"));
    }
    if ct.like.is_some() || ct.clone.is_some() || ct.partition_of.is_some() || ct.inherits.is_some() {
        return Err(Error::unsupported("CREATE TABLE … LIKE/PARTITION OF/INHERITS"));
    }

    let name = user_relation(&ct.name)?;
    let mut columns = Vec::with_capacity(ct.columns.len());
    let mut primary: Option<(String, Vec<String>)> = None;
    let mut uniques: Vec<(Option<String>, Vec<String>)> = Vec::new();
    // CHECK constraints: name (if given, or implied by the column) and condition text, bound
    // once the columns are known.
    let mut checks: Vec<(Option<String>, String)> = Vec::new();
    let mut notices = Vec::new();
    let mut sequences = Vec::new();
    for c in &ct.columns {
        let col_name = fold_ident(&c.name);
        let serial = serial_type(&c.data_type);
        let (ty, precision) = match serial {
            Some(ty) => (ty, None),
            None => column_type(&c.data_type)?,
        };
        let mut col = ColumnDef { precision, ..ColumnDef::new(col_name.clone(), ty) };
        // A table's sequences are named `<table>_<column>_seq`, as PostgreSQL names them (the
        // engine picks another name if that one is taken when the table is created).
        let owned = |options: &SequenceOptions| -> Result<SequenceDef> {
            SequenceDef::new(format!("{name}_{col_name}_seq"), options, Some((name.clone(), col_name.clone())))
        };
        if let Some(ty) = serial {
            let seq = owned(&SequenceOptions { ty: Some(ty), ..Default::default() })?;
            col.default = Some(ColumnDefault::Nextval(seq.name.clone()));
            col.nullable = false;
            sequences.push(seq);
        }
        for opt in &c.options {
            match &opt.option {
                ast::ColumnOption::Null => col.nullable = true,
                ast::ColumnOption::NotNull => col.nullable = false,
                ast::ColumnOption::Default(_) if col.default.as_ref().is_some_and(|d| d.sequence().is_some() && serial.is_some()) => {
                    return Err(Error::new(
                        SqlState::SyntaxError,
                        format!("multiple default values specified for column \"{col_name}\" of table \"{name}\""),
                    ));
                }
                ast::ColumnOption::Default(e) => col.default = column_default(e, ty, &col_name)?,
                ast::ColumnOption::Generated { generated_as: generated @ (ast::GeneratedAs::Always | ast::GeneratedAs::ByDefault), sequence_options, generation_expr: None, .. } => {
                    if col.default.is_some() {
                        return Err(Error::new(
                            SqlState::SyntaxError,
                            format!("both default and identity specified for column \"{col_name}\" of table \"{name}\""),
                        ));
                    }
                    if !matches!(ty, DataType::Int16 | DataType::Int32 | DataType::Int64) {
                        return Err(Error::new(
                            SqlState::InvalidParameterValue,
                            "identity column type must be smallint, integer, or bigint",
                        ));
                    }
                    let mut options = sequence_options_of(sequence_options.as_deref().unwrap_or_default())?;
                    options.ty = Some(ty);
                    let seq = owned(&options)?;
                    col.default = Some(ColumnDefault::Identity { sequence: seq.name.clone(), always: matches!(generated, ast::GeneratedAs::Always) });
                    col.nullable = false;
                    sequences.push(seq);
                }
                ast::ColumnOption::PrimaryKey(_) => {
                    if primary.is_some() {
                        return Err(multiple_primary_keys(&name));
                    }
                    primary = Some((constraint_name(opt.name.as_ref(), format!("{name}_pkey")), vec![col_name.clone()]));
                }
                ast::ColumnOption::Unique(_) => uniques.push((opt.name.as_ref().map(fold_ident), vec![col_name.clone()])),
                ast::ColumnOption::ForeignKey(fk) => {
                    let mut fk = fk.clone();
                    fk.columns = vec![c.name.clone()];
                    foreign_key(foreign_keys, &name, &fk, &mut notices)?
                }
                ast::ColumnOption::Check(check) => {
                    let named = check.name.as_ref().or(opt.name.as_ref()).map(fold_ident);
                    checks.push((Some(named.unwrap_or_else(|| format!("{name}_{col_name}_check"))), unnested(&check.expr).to_string()));
                }
                ast::ColumnOption::Collation(_) => return Err(Error::unsupported("COLLATE")),
                other => return Err(Error::unsupported(format!("column option {other}"))),
            }
        }
        columns.push(col);
    }
    for c in &ct.constraints {
        match c {
            ast::TableConstraint::PrimaryKey(pk) => {
                if primary.is_some() {
                    return Err(multiple_primary_keys(&name));
                }
                let cols = index_column_names(&pk.columns)?;
                primary = Some((constraint_name(pk.name.as_ref(), format!("{name}_pkey")), cols));
            }
            ast::TableConstraint::Unique(u) => uniques.push((u.name.as_ref().map(fold_ident), index_column_names(&u.columns)?)),
            ast::TableConstraint::ForeignKey(fk) => foreign_key(foreign_keys, &name, fk, &mut notices)?,
            ast::TableConstraint::Check(check) => checks.push((check.name.as_ref().map(fold_ident), unnested(&check.expr).to_string())),
            other => return Err(Error::unsupported(format!("table constraint {other}"))),
        }
    }
    let sequences = sequences.into_iter().map(std::sync::Arc::new).collect();
    let mut def = TableDef { id: 0, name: name.clone(), columns, indexes: Vec::new(), partition_key: None, sequences, checks: Vec::new(), comments: Vec::new() };
    crate::catalog::validate_table(&def)?;
    if checks.len() > 64 {
        return Err(Error::new(SqlState::ProgramLimitExceeded, "tables can have at most 64 CHECK constraints"));
    }
    for (check_name, sql) in checks {
        let mut check = crate::catalog::CheckDef::bind(check_name.clone().unwrap_or_default(), sql, &def)?;
        if check_name.is_none() {
            check.name = def.check_name(&check);
        }
        def.checks.push(check);
    }
    if let Some(p) = &ct.partition_by {
        def.partition_key = Some(partition_key(&def, p)?);
    }
    if let Some((pk_name, cols)) = primary {
        let positions = resolve_columns(&def, &cols)?;
        check_includes_partition_key(&def, &positions)?;
        for &p in &positions {
            def.columns[p].nullable = false;
        }
        def.indexes.push(IndexDef { name: pk_name, columns: positions, unique: true, primary: true });
    }
    for (constraint, cols) in uniques {
        let positions = resolve_columns(&def, &cols)?;
        check_includes_partition_key(&def, &positions)?;
        let index_name = constraint.unwrap_or_else(|| format!("{name}_{}_key", cols.join("_")));
        def.indexes.push(IndexDef { name: index_name, columns: positions, unique: true, primary: false });
    }
    Ok(DdlPlan::CreateTable { def, if_not_exists: ct.if_not_exists, notices })
}

/// `PARTITION BY HASH (column)`.
fn partition_key(def: &TableDef, spec: &ast::Expr) -> Result<usize> {
    let ast::Expr::Function(f) = spec else { return Err(Error::unsupported(format!("PARTITION BY {spec}"))) };
    let kind = f.name.0.last().and_then(|p| p.as_ident()).map(fold_ident).unwrap_or_default();
    if kind != "hash" {
        return Err(Error::unsupported(format!("PARTITION BY {} (only HASH)", kind.to_uppercase())));
    }
    let ast::FunctionArguments::List(list) = &f.args else { return Err(Error::syntax("PARTITION BY HASH needs a column")) };
    let [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(ast::Expr::Identifier(col)))] = list.args.as_slice() else {
        return Err(Error::unsupported("PARTITION BY HASH over anything but one column"));
    };
    let name = fold_ident(col);
    def.column_index(&name)
        .ok_or_else(|| Error::new(SqlState::UndefinedColumn, format!("column \"{name}\" named in partition key does not exist")))
}

/// A unique key of a partitioned table must include the partition key: each partition checks
/// uniqueness on its own rows only.
pub fn check_includes_partition_key(def: &TableDef, columns: &[usize]) -> Result<()> {
    match def.partition_key {
        Some(k) if !columns.contains(&k) => Err(Error::new(
            SqlState::FeatureNotSupported,
            format!(
                "unique constraint on partitioned table must include the partition key column \"{}\"",
                def.columns[k].name
            ),
        )),
        _ => Ok(()),
    }
}

fn multiple_primary_keys(table: &str) -> Error {
    Error::new(SqlState::InvalidTableDefinition, format!("multiple primary keys for table \"{table}\" are not allowed"))
}

fn constraint_name(given: Option<&ast::Ident>, default: String) -> String {
    given.map(fold_ident).unwrap_or(default)
}

fn index_column_names(cols: &[ast::IndexColumn]) -> Result<Vec<String>> {
    cols.iter()
        .map(|c| match &c.column.expr {
            ast::Expr::Identifier(i) => Ok(fold_ident(i)),
            other => Err(Error::unsupported(format!("an index on expression {other}"))),
        })
        .collect()
}

pub fn resolve_columns(def: &TableDef, names: &[String]) -> Result<Vec<usize>> {
    let mut out: Vec<usize> = Vec::with_capacity(names.len());
    for n in names {
        let p = def.column_index(n).ok_or_else(|| {
            Error::new(SqlState::UndefinedColumn, format!("column \"{n}\" named in key does not exist"))
        })?;
        if out.contains(&p) {
            return Err(Error::new(SqlState::DuplicateColumn, format!("column \"{n}\" appears twice in key")));
        }
        out.push(p);
    }
    Ok(out)
}

/// The type of a SERIAL column (`serial`, `bigserial`, `smallserial` and their aliases).
fn serial_type(t: &ast::DataType) -> Option<DataType> {
    let ast::DataType::Custom(name, modifiers) = t else { return None };
    if !modifiers.is_empty() {
        return None;
    }
    match name.to_string().to_lowercase().as_str() {
        "serial" | "serial4" => Some(DataType::Int32),
        "bigserial" | "serial8" => Some(DataType::Int64),
        "smallserial" | "serial2" => Some(DataType::Int16),
        _ => None,
    }
}

/// CREATE SEQUENCE.
pub fn plan_create_sequence(
    name: &ast::ObjectName,
    if_not_exists: bool,
    temporary: bool,
    data_type: Option<&ast::DataType>,
    options: &[ast::SequenceOptions],
    owned_by: Option<&ast::ObjectName>,
) -> Result<DdlPlan> {
    if temporary {
        return Err(Error::unsupported("temporary sequences"));
    }
    if owned_by.is_some_and(|o| !o.to_string().eq_ignore_ascii_case("none")) {
        return Err(Error::unsupported("CREATE SEQUENCE … OWNED BY (SERIAL and identity columns own their sequences)"));
    }
    let mut parsed = sequence_options_of(options)?;
    parsed.ty = data_type.map(sql_type).transpose()?;
    let def = SequenceDef::new(user_relation(name)?, &parsed, None)?;
    Ok(DdlPlan::CreateSequence { def, if_not_exists })
}

/// The options of CREATE SEQUENCE or of an identity column.
fn sequence_options_of(options: &[ast::SequenceOptions]) -> Result<SequenceOptions> {
    let mut out = SequenceOptions::default();
    let int = |e: &ast::Expr| -> Result<i64> {
        let mut params = Vec::new();
        let bound = Binder::new(None, &mut params).bind_assignment(e, DataType::Int64, "sequence option")?;
        bound.eval(&NoRow, &EvalContext { params: &[], now: 0, session: None })?.as_i64().ok_or_else(|| Error::syntax(format!("a sequence option needs an integer, not {e}")))
    };
    for o in options {
        match o {
            ast::SequenceOptions::IncrementBy(e, _) => out.increment = Some(int(e)?),
            ast::SequenceOptions::MinValue(e) => out.min = Some(e.as_ref().map(int).transpose()?),
            ast::SequenceOptions::MaxValue(e) => out.max = Some(e.as_ref().map(int).transpose()?),
            ast::SequenceOptions::StartWith(e, _) => out.start = Some(int(e)?),
            ast::SequenceOptions::Cache(e) => out.cache = Some(int(e)?),
            ast::SequenceOptions::Cycle(no) => out.cycle = Some(!*no),
        }
    }
    Ok(out)
}

/// The sequence a `nextval` argument names: `'s'`, `'public.s'`, `'"S"'` (as `regclass`
/// text reads it: unquoted names fold to lower case).
pub fn sequence_name(text: &str) -> Result<String> {
    let invalid = || Error::new(SqlState::InvalidTextRepresentation, format!("invalid name syntax: \"{text}\""));
    let mut parts: Vec<String> = Vec::new();
    let mut chars = text.trim().chars().peekable();
    loop {
        let mut part = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        part.push('"');
                    }
                    Some('"') => break,
                    Some(c) => part.push(c),
                    None => return Err(invalid()),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == '.' {
                    break;
                }
                if c == '"' || c.is_whitespace() {
                    return Err(invalid());
                }
                part.extend(c.to_lowercase());
                chars.next();
            }
        }
        if part.is_empty() {
            return Err(invalid());
        }
        parts.push(part);
        match chars.next() {
            None => break,
            Some('.') => {}
            Some(_) => return Err(invalid()),
        }
    }
    match parts.as_slice() {
        [name] => Ok(name.clone()),
        [schema, name] if schema == "public" => Ok(name.clone()),
        [_, _] => Err(Error::undefined_table(&parts.join("."))),
        _ => Err(invalid()),
    }
}

/// A DEFAULT must be a constant, an expression of constants and the time (now(),
/// CURRENT_TIMESTAMP, CURRENT_DATE), `nextval('sequence')` or `gen_random_uuid()`.
pub fn column_default(e: &ast::Expr, ty: DataType, column: &str) -> Result<Option<ColumnDefault>> {
    let mut params = Vec::new();
    let bound = Binder::new(None, &mut params).bind_assignment(e, ty, column)?;
    if !params.is_empty() {
        return Err(Error::new(SqlState::FeatureNotSupported, "cannot use parameters in a DEFAULT expression"));
    }
    let nextval = match &bound {
        Expr::Func { func: Func::Nextval, args, .. } => Some(args),
        Expr::Cast { expr, .. } => match expr.as_ref() {
            Expr::Func { func: Func::Nextval, args, .. } => Some(args),
            _ => None,
        },
        _ => None,
    };
    if let Some(args) = nextval {
        if !matches!(ty, DataType::Int16 | DataType::Int32 | DataType::Int64) && !ty.is_numeric() {
            return Err(Error::mismatch(format!("column \"{column}\" is of type {} but default expression is of type bigint", ty.pg_name())));
        }
        return match args.as_slice() {
            [Expr::Literal { value: crate::types::Value::Text(name), .. }] => Ok(Some(ColumnDefault::Nextval(sequence_name(name)?))),
            _ => Err(Error::unsupported("a DEFAULT of nextval() whose argument is not a constant")),
        };
    }
    let random_uuid = |e: &Expr| matches!(e, Expr::Func { func: Func::GenRandomUuid, .. });
    if random_uuid(&bound) || matches!(&bound, Expr::Cast { expr, .. } if random_uuid(expr)) {
        if ty != DataType::Uuid && !ty.is_string() {
            return Err(Error::mismatch(format!("column \"{column}\" is of type {} but default expression is of type uuid", ty.pg_name())));
        }
        return Ok(Some(ColumnDefault::RandomUuid));
    }
    let mut volatile = false;
    bound.visit(&mut |n| volatile |= random_uuid(n));
    if volatile {
        return Err(Error::unsupported("a DEFAULT with gen_random_uuid() inside a larger expression"));
    }
    let mut time_dependent = false;
    let mut sequence = false;
    bound.visit(&mut |n| {
        if matches!(n, Expr::Func { func: Func::Now | Func::ClockTimestamp | Func::CurrentDate, .. }) {
            time_dependent = true;
        }
        if matches!(n, Expr::Func { func, .. } if func.is_sequence()) {
            sequence = true;
        }
    });
    if sequence {
        return Err(Error::unsupported("a DEFAULT with sequence functions other than nextval('name') alone"));
    }
    if time_dependent {
        // now() / CURRENT_TIMESTAMP alone (with the cast to a date or timestamp column's
        // type); anything more is kept as an expression.
        let plain_now = |e: &Expr| matches!(e, Expr::Func { func: Func::Now, args, .. } if args.is_empty());
        let time_column = matches!(ty.family(), crate::types::TypeFamily::Timestamp | crate::types::TypeFamily::Date);
        if time_column && (plain_now(&bound) || matches!(&bound, Expr::Cast { expr, .. } if plain_now(expr))) {
            return Ok(Some(ColumnDefault::CurrentTimestamp));
        }
        return Ok(Some(ColumnDefault::TimeDependent { sql: e.to_string(), expr: bound }));
    }
    let v = bound.eval(&NoRow, &EvalContext { params: &[], now: 0, session: None })?.assign_to(ty)?;
    Ok(if v.is_null() { None } else { Some(ColumnDefault::Value(v)) })
}

/// An expression without the parentheses around all of it (pg_dump writes a CHECK's
/// condition as `CHECK ((a < b))`).
fn unnested(e: &ast::Expr) -> &ast::Expr {
    match e {
        ast::Expr::Nested(inner) => unnested(inner),
        other => other,
    }
}

/// `COMMENT ON TABLE name | COLUMN table.column IS …` (comments on other objects are refused).
pub fn plan_comment(object: &ast::CommentObject, name: &ast::ObjectName, text: &Option<String>) -> Result<DdlPlan> {
    let parts: Vec<String> = name.0.iter().filter_map(|p| p.as_ident()).map(fold_ident).collect();
    let parts: Vec<&str> = match parts.first().map(String::as_str) {
        Some("public") if parts.len() > 1 => parts[1..].iter().map(String::as_str).collect(),
        _ => parts.iter().map(String::as_str).collect(),
    };
    let (table, column) = match (object, parts.as_slice()) {
        (ast::CommentObject::Table, [t]) => (t.to_string(), None),
        (ast::CommentObject::Column, [t, c]) => (t.to_string(), Some(c.to_string())),
        (ast::CommentObject::Table | ast::CommentObject::Column, _) => return Err(Error::syntax(format!("invalid name for COMMENT ON: {name}"))),
        (other, _) => return Err(Error::unsupported(format!("COMMENT ON {other}"))),
    };
    Ok(DdlPlan::Comment { table, column, text: text.clone() })
}

pub fn plan_create_index(ci: &ast::CreateIndex) -> Result<DdlPlan> {
    if ci.predicate.is_some() {
        return Err(Error::unsupported("partial indexes"));
    }
    if !ci.include.is_empty() {
        return Err(Error::unsupported("INCLUDE columns"));
    }
    let table = user_relation(&ci.table_name)?;
    let columns = index_column_names(&ci.columns)?;
    let name = match &ci.name {
        Some(n) => user_relation(n)?,
        None => format!("{table}_{}_idx", columns.join("_")),
    };
    // Column positions are resolved at execution, against the catalog of that moment.
    Ok(DdlPlan::CreateIndex { table, name, columns, unique: ci.unique, if_not_exists: ci.if_not_exists })
}

pub fn plan_drop(object_type: &ast::ObjectType, names: &[ast::ObjectName], if_exists: bool, cascade: bool) -> Result<DdlPlan> {
    let names = names.iter().map(user_relation).collect::<Result<Vec<_>>>()?;
    match object_type {
        ast::ObjectType::Table => Ok(DdlPlan::DropTables { names, if_exists, cascade }),
        ast::ObjectType::View => Ok(DdlPlan::DropViews { names, if_exists, cascade }),
        ast::ObjectType::Index => Ok(DdlPlan::DropIndexes { names, if_exists }),
        ast::ObjectType::Sequence if cascade => Err(Error::unsupported("DROP SEQUENCE … CASCADE")),
        ast::ObjectType::Sequence => Ok(DdlPlan::DropSequences { names, if_exists }),
        other => Err(Error::unsupported(format!("DROP {other}"))),
    }
}

/// Whether the USING of ALTER COLUMN … TYPE casts the column explicitly (`USING c::ty`,
/// `USING CAST(c AS ty)`) or is the column itself (`USING c`, the same as no USING); any other
/// expression is refused.
fn using_cast(e: &ast::Expr, column: &str, ty: DataType) -> Result<bool> {
    let is_column = |e: &ast::Expr| match e {
        ast::Expr::Identifier(i) => fold_ident(i) == column,
        ast::Expr::CompoundIdentifier(parts) => parts.last().is_some_and(|i| fold_ident(i) == column),
        _ => false,
    };
    match e {
        ast::Expr::Nested(inner) => using_cast(inner, column, ty),
        e if is_column(e) => Ok(false),
        ast::Expr::Cast { expr, data_type, .. } if is_column(expr) && sql_type(data_type).is_ok_and(|t| t == ty) => Ok(true),
        _ => Err(Error::unsupported("ALTER COLUMN … TYPE … USING an expression other than the column cast to the new type")),
    }
}

pub fn plan_alter_table(at: &ast::AlterTable, foreign_keys: ForeignKeys) -> Result<DdlPlan> {
    let table = user_relation(&at.name)?;
    let [op] = at.operations.as_slice() else { return Err(Error::unsupported("ALTER TABLE with several actions")) };
    match op {
        ast::AlterTableOperation::AddColumn { if_not_exists, column_def: c, column_position: None, .. } => {
            let name = fold_ident(&c.name);
            if serial_type(&c.data_type).is_some() {
                return Err(Error::unsupported("ADD COLUMN of a serial column"));
            }
            let (ty, precision) = column_type(&c.data_type)?;
            let mut column = ColumnDef { precision, ..ColumnDef::new(name.clone(), ty) };
            for opt in &c.options {
                match &opt.option {
                    ast::ColumnOption::Null => column.nullable = true,
                    ast::ColumnOption::NotNull => column.nullable = false,
                    ast::ColumnOption::Default(e) => column.default = column_default(e, ty, &name)?,
                    other => return Err(Error::unsupported(format!("ADD COLUMN with {other}"))),
                }
            }
            Ok(DdlPlan::AddColumn { table, column, if_not_exists: *if_not_exists })
        }
        ast::AlterTableOperation::DropColumn { column_names, if_exists, .. } => match column_names.as_slice() {
            [column] => Ok(DdlPlan::DropColumn { table, column: fold_ident(column), if_exists: *if_exists }),
            _ => Err(Error::unsupported("DROP COLUMN of several columns in one action")),
        },
        ast::AlterTableOperation::AddConstraint { constraint: ast::TableConstraint::PrimaryKey(pk), .. } => {
            Ok(DdlPlan::AddPrimaryKey { table, columns: index_column_names(&pk.columns)? })
        }
        ast::AlterTableOperation::AddConstraint { constraint: ast::TableConstraint::Check(check), not_valid: false } => {
            Ok(DdlPlan::AddCheck { table, name: check.name.as_ref().map(fold_ident), sql: unnested(&check.expr).to_string() })
        }
        ast::AlterTableOperation::AddConstraint { constraint: ast::TableConstraint::Unique(u), .. } if u.index_name.is_none() => {
            let columns = index_column_names(&u.columns)?;
            let name = u.name.as_ref().map(fold_ident).unwrap_or_else(|| format!("{table}_{}_key", columns.join("_")));
            Ok(DdlPlan::AddUnique { table, name, columns })
        }
        ast::AlterTableOperation::AddConstraint { constraint: ast::TableConstraint::ForeignKey(fk), .. } => {
            let mut notices = Vec::new();
            foreign_key(foreign_keys, &table, fk, &mut notices)?;
            Ok(DdlPlan::Accepted { tag: "ALTER TABLE", notices })
        }
        ast::AlterTableOperation::RenameTable { table_name: ast::RenameTableNameKind::To(to) | ast::RenameTableNameKind::As(to) } => {
            Ok(DdlPlan::RenameTable { table, to: user_relation(to)? })
        }
        ast::AlterTableOperation::RenameColumn { old_column_name, new_column_name } => {
            Ok(DdlPlan::RenameColumn { table, from: fold_ident(old_column_name), to: fold_ident(new_column_name) })
        }
        ast::AlterTableOperation::AlterColumn { column_name, op } => {
            let column = fold_ident(column_name);
            match op {
                ast::AlterColumnOperation::SetDefault { value } => {
                    Ok(DdlPlan::AlterColumnDefault { table, column, default: Some(Box::new(value.clone())) })
                }
                ast::AlterColumnOperation::DropDefault => Ok(DdlPlan::AlterColumnDefault { table, column, default: None }),
                ast::AlterColumnOperation::SetNotNull => Ok(DdlPlan::AlterColumnNullable { table, column, nullable: false }),
                ast::AlterColumnOperation::DropNotNull => Ok(DdlPlan::AlterColumnNullable { table, column, nullable: true }),
                ast::AlterColumnOperation::SetDataType { data_type, using, .. } => {
                    if serial_type(data_type).is_some() {
                        return Err(Error::new(SqlState::UndefinedObject, format!("type \"{data_type}\" does not exist")));
                    }
                    let ty = sql_type(data_type)?;
                    let explicit = match using {
                        None => false,
                        Some(e) => using_cast(e, &column, ty)?,
                    };
                    Ok(DdlPlan::AlterColumnType { table, column, ty, explicit })
                }
                ast::AlterColumnOperation::AddGenerated { generated_as, sequence_options } => {
                    let options = sequence_options_of(sequence_options.as_deref().unwrap_or_default())?;
                    let always = matches!(generated_as, Some(ast::GeneratedAs::Always));
                    Ok(DdlPlan::AddIdentity { table, column, always, options, name: None })
                }
            }
        }
        other => Err(Error::unsupported(format!("ALTER TABLE {other}"))),
    }
}

pub fn plan_truncate(t: &ast::Truncate) -> Result<DdlPlan> {
    let tables = t.table_names.iter().map(|n| user_relation(&n.name)).collect::<Result<Vec<_>>>()?;
    let restart_identity = matches!(t.identity, Some(ast::TruncateIdentityOption::Restart));
    Ok(DdlPlan::Truncate { tables, restart_identity })
}

/// The default `sql` of a column, read back from the log or a checkpoint: bound again as
/// [`column_default`] bound it when the column was defined.
pub fn restore_time_default(sql: &str, ty: DataType, column: &str) -> Result<ColumnDefault> {
    let parsed = super::plpgsql::parser::parse_expr(sql)?;
    let mut params = Vec::new();
    let expr = Binder::new(None, &mut params).bind_assignment(&parsed, ty, column)?;
    Ok(ColumnDefault::TimeDependent { sql: sql.to_string(), expr })
}
