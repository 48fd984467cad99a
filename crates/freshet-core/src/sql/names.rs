//! Names: identifier folding, relation names, and the names PostgreSQL gives result columns.

use sqlparser::ast;

use crate::error::{Error, Result, SqlState};

/// An identifier as stored: unquoted ones fold to lower case, quoted ones stay as written.
pub fn fold_ident(ident: &ast::Ident) -> String {
    if ident.quote_style.is_some() { ident.value.clone() } else { ident.value.to_lowercase() }
}

/// Which schema a relation name points into.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RelationName {
    /// A user table or index in `public`.
    User(String),
    /// A system relation (`pg_catalog.x`, `information_schema.x`, or a bare `pg_*` name).
    System { schema: String, name: String },
}

/// Resolves `name`, `public.name`, `pg_catalog.name` or `information_schema.name`.
/// An identifier as SQL text: as it is when it is a plain lower-case word, else in double
/// quotes (PostgreSQL also quotes its reserved words, which stay bare here), so that reading
/// it back as a name gives `s` again.
pub fn quote_ident(s: &str) -> String {
    let plain = s.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '$');
    if plain { s.to_string() } else { format!("\"{}\"", s.replace('"', "\"\"")) }
}

/// A sequence's name as `pg_get_serial_sequence` gives it: schema-qualified, quoted where SQL
/// needs it (`public."User_id_seq"`).
pub fn qualified_sequence(name: &str) -> String {
    format!("public.{}", quote_ident(name))
}

pub fn relation_name(name: &ast::ObjectName) -> Result<RelationName> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| p.as_ident().map(fold_ident).ok_or_else(|| Error::syntax(format!("invalid name {name}"))))
        .collect::<Result<_>>()?;
    match parts.as_slice() {
        [n] => Ok(RelationName::User(n.clone())),
        [s, n] | [_, s, n] => match s.as_str() {
            "public" => Ok(RelationName::User(n.clone())),
            "pg_catalog" | "information_schema" => Ok(RelationName::System { schema: s.clone(), name: n.clone() }),
            other => Err(Error::new(SqlState::UndefinedObject, format!("schema \"{other}\" does not exist"))),
        },
        _ => Err(Error::syntax(format!("improper qualified name (too many dotted names): {name}"))),
    }
}

/// The user table a name refers to, or an error for system relations.
pub fn user_relation(name: &ast::ObjectName) -> Result<String> {
    match relation_name(name)? {
        RelationName::User(n) => Ok(n),
        RelationName::System { schema, name } => Err(Error::new(
            SqlState::WrongObjectType,
            format!("\"{schema}.{name}\" is a system relation and cannot be changed"),
        )),
    }
}

pub fn is_aggregate(name: &str) -> bool {
    matches!(
        name,
        "count" | "sum" | "avg" | "min" | "max" | "stddev" | "stddev_pop" | "stddev_samp" | "variance"
            | "var_pop" | "var_samp" | "bool_and" | "bool_or" | "every" | "string_agg" | "array_agg"
            | "median" | "approx_distinct" | "first_value" | "last_value" | "bit_and" | "bit_or"
            | "corr" | "covar_pop" | "covar_samp" | "percentile_cont" | "mode" | "grouping"
    )
}

/// The name PostgreSQL gives an unaliased result column (its FigureColname): the column's
/// name for a column reference, the function's name for a call, the type's name for a cast of
/// anything without a stronger name, `case` for CASE, and `?column?` otherwise.
pub fn column_name(e: &ast::Expr) -> String {
    figure(e).0
}

/// A name and how strongly the expression holds it, as in PostgreSQL: 2 for column
/// references, calls and subqueries, 1 for CASE and casts (an outer cast renames those:
/// `(0.5::float8)::int` is `int4`), 0 for `?column?`.
fn figure(e: &ast::Expr) -> (String, u8) {
    use ast::Expr as A;
    let strong = |name: String| (name, 2);
    match e {
        A::Identifier(i) => strong(fold_ident(i)),
        A::CompoundIdentifier(parts) => strong(parts.last().map(fold_ident).unwrap_or_default()),
        A::Nested(inner) => figure(inner),
        A::Cast { expr, data_type, .. } => match figure(expr) {
            (name, 2) => (name, 2),
            _ => (cast_type_name(data_type), 1),
        },
        A::Function(f) => strong(f.name.0.last().and_then(|p| p.as_ident()).map(fold_ident).unwrap_or_default()),
        A::Case { .. } => ("case".into(), 1),
        A::Extract { .. } => strong("extract".into()),
        A::Substring { .. } => strong("substring".into()),
        A::Trim { .. } => strong("btrim".into()),
        A::Position { .. } => strong("position".into()),
        A::Ceil { .. } => strong("ceil".into()),
        A::Floor { .. } => strong("floor".into()),
        // NOT EXISTS is an operator over EXISTS in PostgreSQL's grammar: no name of its own.
        A::Exists { negated: false, .. } => strong("exists".into()),
        A::Array(_) => strong("array".into()),
        A::Subquery(q) => match q.body.as_ref() {
            ast::SetExpr::Select(s) if s.projection.len() == 1 => match &s.projection[0] {
                ast::SelectItem::UnnamedExpr(e) => strong(column_name(e)),
                ast::SelectItem::ExprWithAlias { alias, .. } => strong(fold_ident(alias)),
                _ => ("?column?".into(), 0),
            },
            _ => ("?column?".into(), 0),
        },
        A::TypedString(ts) => (cast_type_name(&ts.data_type), 1),
        A::Value(v) if matches!(v.value, ast::Value::Boolean(_)) => ("bool".into(), 1),
        _ => ("?column?".into(), 0),
    }
}

fn cast_type_name(t: &ast::DataType) -> String {
    use ast::DataType as T;
    match t {
        T::Int(_) | T::Integer(_) | T::Int4(_) => "int4".into(),
        T::BigInt(_) | T::Int8(_) => "int8".into(),
        T::SmallInt(_) | T::Int2(_) => "int2".into(),
        T::Real | T::Float4 => "float4".into(),
        T::DoublePrecision | T::Float8 | T::Double(_) | T::Float(_) => "float8".into(),
        T::Numeric(_) | T::Decimal(_) | T::Dec(_) => "numeric".into(),
        T::Char(_) | T::Character(_) => "bpchar".into(),
        T::Varchar(_) | T::CharacterVarying(_) | T::CharVarying(_) => "varchar".into(),
        T::Boolean | T::Bool => "bool".into(),
        T::Timestamp(_, ast::TimezoneInfo::WithTimeZone | ast::TimezoneInfo::Tz) => "timestamptz".into(),
        T::Timestamp(..) => "timestamp".into(),
        other => other.to_string().to_lowercase(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::PostgreSqlDialect;
    use sqlparser::parser::Parser;

    fn expr(sql: &str) -> ast::Expr {
        Parser::new(&PostgreSqlDialect {}).try_with_sql(sql).unwrap().parse_expr().unwrap()
    }

    #[test]
    fn result_column_names_follow_postgres() {
        assert_eq!(column_name(&expr("Abc")), "abc");
        assert_eq!(column_name(&expr("ARRAY[1, 2]::text")), "array");
        assert_eq!(column_name(&expr("\"Abc\"")), "Abc");
        assert_eq!(column_name(&expr("t.x")), "x");
        assert_eq!(column_name(&expr("sum(x)")), "sum");
        assert_eq!(column_name(&expr("x + 1")), "?column?");
        assert_eq!(column_name(&expr("1::int")), "int4");
        assert_eq!(column_name(&expr("x::int")), "x");
        assert_eq!(column_name(&expr("CASE WHEN x THEN 1 END")), "case");
        // A cast renames what holds its name weakly (a cast, CASE, a boolean), not a column or
        // a call.
        assert_eq!(column_name(&expr("0.5::float8::int")), "int4");
        assert_eq!(column_name(&expr("(CASE WHEN x THEN 1 END)::bigint")), "int8");
        assert_eq!(column_name(&expr("true::int")), "int4");
        assert_eq!(column_name(&expr("sum(x)::numeric")), "sum");
        assert_eq!(column_name(&expr("x::text::int")), "x");
        // A scalar subquery holds its column's name strongly, even `?column?` (PostgreSQL 15).
        assert_eq!(column_name(&expr("(SELECT 1)::int")), "?column?");
        assert_eq!(column_name(&expr("(SELECT 1 AS k)::int")), "k");
    }
}
