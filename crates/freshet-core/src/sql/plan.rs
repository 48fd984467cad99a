//! Plans of the short-statement path: INSERT, UPDATE, DELETE, and index-driven SELECT.
//!
//! A plan is built once (per prepared statement) against one catalog version and run many
//! times with different parameters. The access path is chosen here: a point lookup through
//! the primary key, a prefix (and optional range) of an ordered index, or, for UPDATE and
//! DELETE only, a scan of the table. A SELECT that has no index path is not planned here: it
//! goes to the analytical side.

use smallvec::SmallVec;
use std::sync::Arc;

use sqlparser::ast;

use super::bind::{Binder, Scope};
use super::expr::{BinaryOp, Expr};
use super::names::{column_name, fold_ident, user_relation};
use crate::catalog::{Catalog, ColumnDefault, TableDef};
use crate::error::{Error, Result, SqlState};
use crate::types::{DataType, TypeFamily, Value};

/// A result column: name and type.
#[derive(Clone, Debug, PartialEq)]
pub struct ResultColumn {
    pub name: String,
    pub ty: DataType,
}

/// How a statement finds its rows.
// One per plan, built once and read in place: the size of the index variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Access {
    /// Every live row of the table.
    Scan,
    /// Rows of index `index` whose leading key columns equal `eq`, and whose next key column
    /// (if bounds are given) lies between `lower` and `upper` (`true` = inclusive), or (if
    /// `any` is not empty: an IN list, then without bounds) equals one of `any`: one lookup
    /// per distinct value.
    Index {
        index: usize,
        eq: Vec<Expr>,
        lower: Option<(Expr, bool)>,
        upper: Option<(Expr, bool)>,
        any: Vec<Expr>,
    },
}

/// The longest IN list an index lookup takes (one lookup per value); a longer list filters a
/// scan of the other conjuncts' access path, or goes to the analytical side.
pub const MAX_IN_LOOKUPS: usize = 1000;

impl Access {
    /// Whether this access finds at most one row (equality on a whole unique key).
    pub fn is_point(&self, table: &TableDef) -> bool {
        match self {
            Access::Index { index, eq, lower: None, upper: None, any } => {
                let def = &table.indexes[*index];
                def.unique && eq.len() == def.columns.len() && any.is_empty()
            }
            _ => false,
        }
    }
}

/// Where the rows of an INSERT come from.
#[derive(Clone, Debug)]
pub enum InsertSource {
    /// VALUES rows, one expression per target column.
    Values(Vec<Vec<Expr>>),
    /// INSERT … SELECT: the query runs on the analytical side.
    Query(Box<ast::Query>),
}

#[derive(Clone, Debug)]
pub struct InsertPlan {
    pub table: Arc<TableDef>,
    /// Positions of the target columns, in the order the source supplies them.
    pub columns: Vec<usize>,
    pub source: InsertSource,
    pub returning: Option<Returning>,
    /// `ON CONFLICT …`, if given.
    pub on_conflict: Option<Arc<OnConflict>>,
    /// Whether the insert draws values from a sequence: a column default or a function in its
    /// VALUES (computed once, when planned).
    pub draws_sequences: bool,
}

impl InsertPlan {
    fn new(table: Arc<TableDef>, columns: Vec<usize>, source: InsertSource, returning: Option<Returning>, on_conflict: Option<Arc<OnConflict>>) -> InsertPlan {
        let mut draws_sequences = table.columns.iter().any(|c| c.default.as_ref().is_some_and(|d| d.sequence().is_some()));
        if let InsertSource::Values(rows) = &source {
            for e in rows.iter().flatten() {
                e.visit(&mut |n| draws_sequences |= matches!(n, Expr::Func { func, .. } if func.is_sequence()));
            }
        }
        InsertPlan { table, columns, source, returning, on_conflict, draws_sequences }
    }

    /// The primary key of the one row a single-row `INSERT … VALUES` gives: the expressions
    /// that compute its columns, in the key's order, and the parameters they read (bit n:
    /// `$n+1`). What a hint may look up before the insert runs (the key's slot in its hash
    /// table, which the uniqueness check reads). `None` without a primary key, for another
    /// source or several rows, when a key column takes its default, or when a key reads a
    /// parameter past the 64th.
    pub fn primary_key_exprs(&self) -> Option<(SmallVec<[&Expr; 4]>, u64)> {
        let InsertSource::Values(rows) = &self.source else { return None };
        let ([row], Some(key)) = (rows.as_slice(), self.table.indexes.first().filter(|i| i.primary)) else { return None };
        let mut exprs = SmallVec::new();
        for c in &key.columns {
            exprs.push(row.get(self.columns.iter().position(|t| t == c)?)?);
        }
        let params = params_read(exprs.iter().copied())?;
        Some((exprs, params))
    }
}

/// The parameters `exprs` read, as a bit set (bit n: `$n+1`); `None` if one is past the 64th.
fn params_read<'e>(exprs: impl Iterator<Item = &'e Expr>) -> Option<u64> {
    let (mut params, mut within) = (0u64, true);
    for e in exprs {
        e.visit(&mut |e| {
            if let Expr::Param { index, .. } = e {
                within &= *index < 64;
                params |= 1u64.checked_shl(*index as u32).unwrap_or(0);
            }
        });
    }
    within.then_some(params)
}

/// `INSERT … ON CONFLICT [target] DO NOTHING | DO UPDATE SET … [WHERE …]`.
#[derive(Clone, Debug)]
pub struct OnConflict {
    /// The unique index the conflict target names; `None` (no target, DO NOTHING only): any
    /// unique index.
    pub index: Option<usize>,
    pub action: ConflictAction,
}

#[derive(Clone, Debug)]
pub enum ConflictAction {
    Nothing,
    /// Assignments and condition over a row of twice the table's width: the existing row's
    /// columns, then the proposed row's (`excluded.c` is column `width + c`).
    Update { assignments: Vec<(usize, Expr)>, filter: Option<Expr> },
}

#[derive(Clone, Debug)]
pub struct UpdatePlan {
    pub table: Arc<TableDef>,
    pub assignments: Vec<(usize, Expr)>,
    /// The whole WHERE clause (routing and SERIALIZABLE read validation use it).
    pub filter: Option<Expr>,
    /// What `access` does not already guarantee of `filter`: the executor checks this.
    pub residual: Option<Expr>,
    /// `residual` without the range conjuncts that are `access`'s bounds, when it has such
    /// (see [`residual_within_bounds`]): what is left to check when the bounds' values are
    /// exact keys (`exec::Residual::to_check`).
    pub residual_within_bounds: Option<Option<Expr>>,
    pub access: Access,
    pub returning: Option<Returning>,
    /// The columns the executor reads of each row it reaches ([`columns_read`]): prefetched
    /// for a row reached through an index.
    pub reads: u64,
}

#[derive(Clone, Debug)]
pub struct DeletePlan {
    pub table: Arc<TableDef>,
    /// The whole WHERE clause (routing and SERIALIZABLE read validation use it).
    pub filter: Option<Expr>,
    /// What `access` does not already guarantee of `filter`: the executor checks this.
    pub residual: Option<Expr>,
    /// `residual` without the range conjuncts that are `access`'s bounds, when it has such
    /// (see [`residual_within_bounds`]): what is left to check when the bounds' values are
    /// exact keys (`exec::Residual::to_check`).
    pub residual_within_bounds: Option<Option<Expr>>,
    pub access: Access,
    pub returning: Option<Returning>,
    /// The columns the executor reads of each row it reaches ([`columns_read`]): prefetched
    /// for a row reached through an index.
    pub reads: u64,
}

/// `RETURNING …`: expressions over a changed row as stored (new values for INSERT and
/// UPDATE, the deleted values for DELETE).
#[derive(Clone, Debug)]
pub struct Returning {
    pub exprs: Vec<Expr>,
    pub columns: Vec<ResultColumn>,
}

impl Returning {
    /// The RETURNING row of a stored row.
    pub fn row(&self, stored: &[Value], cx: &super::expr::EvalContext) -> Result<Vec<Value>> {
        self.row_of(&super::expr::SliceRow(stored), cx)
    }

    /// The RETURNING row of a row read through `row` (only the columns it names are read).
    pub fn row_of(&self, row: &dyn super::expr::RowAccess, cx: &super::expr::EvalContext) -> Result<Vec<Value>> {
        crate::try_vec(self.exprs.iter().map(|e| e.eval(row, cx)))
    }
}

pub fn bind_returning(table: &TableDef, alias: Option<&ast::Ident>, items: &Option<Vec<ast::SelectItem>>, params: &mut Vec<Option<DataType>>) -> Result<Option<Returning>> {
    let Some(items) = items else { return Ok(None) };
    let mut binder = Binder::new(Some(scope_for(table, alias)), params);
    let mut exprs = Vec::new();
    let mut columns = Vec::new();
    for item in items {
        match item {
            ast::SelectItem::Wildcard(opts) if is_plain_wildcard(opts) => {
                for (i, c) in table.columns.iter().enumerate() {
                    exprs.push(Expr::Column { index: i, ty: c.ty });
                    columns.push(ResultColumn { name: c.name.clone(), ty: c.ty });
                }
            }
            ast::SelectItem::UnnamedExpr(e) => {
                let bound = binder.bind_expr(e, None)?;
                columns.push(ResultColumn { name: column_name(e), ty: bound.ty() });
                exprs.push(bound);
            }
            ast::SelectItem::ExprWithAlias { expr, alias } => {
                let bound = binder.bind_expr(expr, None)?;
                columns.push(ResultColumn { name: fold_ident(alias), ty: bound.ty() });
                exprs.push(bound);
            }
            other => return Err(Error::unsupported(format!("RETURNING {other}"))),
        }
    }
    Ok(Some(Returning { exprs, columns }))
}

#[derive(Clone, Debug)]
pub struct SelectPlan {
    pub table: Arc<TableDef>,
    pub projection: Vec<Expr>,
    pub columns: Vec<ResultColumn>,
    /// The whole WHERE clause (routing and SERIALIZABLE read validation use it).
    pub filter: Option<Expr>,
    /// What `access` does not already guarantee of `filter`: the executor checks this.
    pub residual: Option<Expr>,
    /// `residual` without the range conjuncts that are `access`'s bounds, when it has such
    /// (see [`residual_within_bounds`]): what is left to check when the bounds' values are
    /// exact keys (`exec::Residual::to_check`).
    pub residual_within_bounds: Option<Option<Expr>>,
    pub access: Access,
    /// Sort keys: expression, descending, nulls first.
    pub order_by: Vec<(Expr, bool, bool)>,
    /// Whether the index delivers rows already in ORDER BY order (descending if `.1`).
    pub ordered_by_index: Option<bool>,
    pub limit: Option<Expr>,
    pub offset: Option<Expr>,
    /// SELECT … FOR UPDATE / FOR SHARE: claim the rows returned.
    pub lock: bool,
    /// How a claim meets a row another transaction holds: wait (the default), fail (NOWAIT,
    /// 55P03) or leave the row out (SKIP LOCKED).
    pub lock_wait: LockWait,
    /// The columns the executor reads of each row it reaches ([`columns_read`]): prefetched
    /// for a row reached through an index.
    pub reads: u64,
    /// When not empty, the statement is an aggregate without GROUP BY: `projection` is empty
    /// and the one result row holds these aggregates over the qualifying rows.
    pub aggregates: Vec<Aggregate>,
    /// `column IN (subquery)`, the lookups' IN list: a short-path SELECT of one column that
    /// runs first, in the same transaction view; its values become `access`'s list (planned
    /// as the placeholder `$`[`LISTED`], see [`SelectPlan::listing`]). `filter` and
    /// `residual` leave the condition out: the lookups find exactly the rows whose column
    /// equals a value ([`exact_key`]), and a read validated against `filter` covers a
    /// superset.
    pub any_from: Option<Arc<OltpPlan>>,
}

impl SelectPlan {
    /// This plan with `values` (the subquery's result column) as the IN list of its lookups,
    /// in place of the placeholder of `any_from`. NULLs match nothing; no values at all make
    /// a list of one NULL, which finds no row.
    pub fn listing(&self, values: impl Iterator<Item = Value>) -> SelectPlan {
        let mut plan = self.clone();
        plan.any_from = None;
        if let Access::Index { any, .. } = &mut plan.access
            && let Some(ty) = any.first().map(Expr::ty)
        {
            *any = values.filter(|v| !v.is_null()).map(|v| Expr::literal(v, ty)).collect();
            if any.is_empty() {
                any.push(Expr::literal(Value::Null, ty));
            }
        }
        plan
    }
}

/// The parameter number that stands for the values of an IN list taken from a subquery
/// ([`SelectPlan::any_from`]) until they are known: no statement has that many parameters, so
/// it is told apart from every written list, and evaluating it is an error rather than a
/// wrong answer.
pub const LISTED: usize = usize::MAX;

/// An aggregate the short path computes over the rows its index path reaches.
#[derive(Clone, Debug, PartialEq)]
pub struct Aggregate {
    pub func: AggregateFunc,
    /// The argument; `None` for `count(*)`.
    pub arg: Option<Expr>,
    /// The result type, the one the analytical side gives the same aggregate.
    pub ty: DataType,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggregateFunc {
    Count,
    Sum,
    Min,
    Max,
}

/// `e` as an aggregate the short path computes: `Ok(None)` if it is not an aggregate call;
/// an unsupported error (the statement goes to the analytical side) for an aggregate call the
/// short path does not compute (DISTINCT, FILTER, OVER, other functions or argument types).
fn bind_aggregate(binder: &mut Binder, e: &ast::Expr) -> Result<Option<Aggregate>> {
    let ast::Expr::Function(f) = e else { return Ok(None) };
    let [part] = f.name.0.as_slice() else { return Ok(None) };
    let Some(ident) = part.as_ident() else { return Ok(None) };
    let func = match fold_ident(ident).as_str() {
        "count" => AggregateFunc::Count,
        "sum" => AggregateFunc::Sum,
        "min" => AggregateFunc::Min,
        "max" => AggregateFunc::Max,
        // Other aggregates are refused by the binder (`names::is_aggregate`).
        _ => return Ok(None),
    };
    let unsupported = || Error::unsupported("this aggregate call on the short path");
    let ast::FunctionArguments::List(list) = &f.args else { return Err(unsupported()) };
    if f.filter.is_some() || f.over.is_some() || !f.within_group.is_empty() || list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
        return Err(unsupported());
    }
    let [ast::FunctionArg::Unnamed(arg)] = list.args.as_slice() else { return Err(unsupported()) };
    let arg = match arg {
        ast::FunctionArgExpr::Wildcard if func == AggregateFunc::Count => None,
        ast::FunctionArgExpr::Expr(a) => Some(binder.bind_expr(a, None)?),
        _ => return Err(unsupported()),
    };
    let arg_ty = arg.as_ref().map(Expr::ty);
    let ty = match (func, arg_ty) {
        (AggregateFunc::Count, _) => DataType::Int64,
        (AggregateFunc::Sum, Some(DataType::Int16 | DataType::Int32 | DataType::Int64)) => DataType::Int64,
        (AggregateFunc::Sum, Some(DataType::Float32 | DataType::Float64)) => DataType::Float64,
        (AggregateFunc::Sum, Some(DataType::Decimal { precision, scale })) => DataType::Decimal { precision: (precision + 10).min(38), scale },
        (AggregateFunc::Min | AggregateFunc::Max, Some(t)) => match t.family() {
            TypeFamily::String => DataType::Text,
            TypeFamily::Bool => return Err(unsupported()),
            _ => t,
        },
        _ => return Err(unsupported()),
    };
    Ok(Some(Aggregate { func, arg, ty }))
}

/// A statement the partition executor runs.
#[derive(Clone, Debug)]
pub enum OltpPlan {
    Update(UpdatePlan),
    Delete(DeletePlan),
    Select(SelectPlan),
}

impl OltpPlan {
    /// An UPDATE's or DELETE's RETURNING list, if it has one.
    pub fn returning_columns(&self) -> Option<&Returning> {
        match self {
            OltpPlan::Update(p) => p.returning.as_ref(),
            OltpPlan::Delete(p) => p.returning.as_ref(),
            OltpPlan::Select(_) => None,
        }
    }

    pub fn table(&self) -> &Arc<TableDef> {
        match self {
            OltpPlan::Update(p) => &p.table,
            OltpPlan::Delete(p) => &p.table,
            OltpPlan::Select(p) => &p.table,
        }
    }

    /// How the statement finds its rows.
    pub fn access(&self) -> &Access {
        match self {
            OltpPlan::Update(p) => &p.access,
            OltpPlan::Delete(p) => &p.access,
            OltpPlan::Select(p) => &p.access,
        }
    }

    /// For a lookup of one whole index key (equality on every key column, no bounds, no IN
    /// list): which parameters its key values depend on (bit `n` for `$n+1`); `None` for any
    /// other access path, or a key that uses a parameter past the 64th.
    pub fn key_params(&self) -> Option<u64> {
        let Access::Index { index, eq, lower: None, upper: None, any } = self.access() else { return None };
        if !any.is_empty() || self.table().indexes.get(*index)?.columns.len() != eq.len() {
            return None;
        }
        params_read(eq.iter())
    }

    /// The whole WHERE clause.
    pub fn filter(&self) -> Option<&Expr> {
        match self {
            OltpPlan::Update(p) => p.filter.as_ref(),
            OltpPlan::Delete(p) => p.filter.as_ref(),
            OltpPlan::Select(p) => p.filter.as_ref(),
        }
    }

    /// Every column whose value the statement's outcome depends on: its whole filter and
    /// everything it reads (bit `c` for column `c`; a column past the 63rd sets every bit).
    /// A change to a row that leaves all of them alone cannot change what it did.
    pub fn columns_depended_on(&self) -> u64 {
        let reads = match self {
            OltpPlan::Update(p) => p.reads,
            OltpPlan::Delete(p) => p.reads,
            OltpPlan::Select(p) => p.reads,
        };
        reads | columns_read(self.filter())
    }
}

fn scope_for<'a>(table: &'a TableDef, alias: Option<&ast::Ident>) -> Scope<'a> {
    let mut qualifiers = vec![table.name.clone()];
    if let Some(a) = alias {
        qualifiers = vec![fold_ident(a)];
    }
    Scope { table, qualifiers, excluded: false }
}

/// Plans INSERT. `params` holds the declared parameter types and receives inferred ones.
/// `INSERT … OVERRIDING SYSTEM VALUE | USER VALUE`: which of a value given for an identity
/// column and the column's sequence wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overriding {
    /// Given values are stored, also in a `GENERATED ALWAYS` column (a restored dump's ids).
    System,
    /// Given values for identity columns are ignored: the sequence supplies them.
    User,
}

pub fn plan_insert(catalog: &Catalog, insert: &ast::Insert, params: &mut Vec<Option<DataType>>) -> Result<InsertPlan> {
    plan_insert_overriding(catalog, insert, params, None)
}

/// [`plan_insert`] with an `OVERRIDING` clause.
pub fn plan_insert_overriding(catalog: &Catalog, insert: &ast::Insert, params: &mut Vec<Option<DataType>>, overriding: Option<Overriding>) -> Result<InsertPlan> {
    let ast::TableObject::TableName(name) = &insert.table else {
        return Err(Error::unsupported("INSERT into a table function"));
    };
    let table = catalog.require_table(&user_relation(name)?)?.clone();
    let alias = insert.table_alias.as_ref().map(|a| &a.alias);
    let on_conflict = insert.on.as_ref().map(|on| plan_on_conflict(&table, alias, on, params).map(Arc::new)).transpose()?;
    let returning = bind_returning(&table, alias, &insert.returning, params)?;
    let columns: Vec<usize> = if insert.columns.is_empty() {
        (0..table.columns.len()).collect()
    } else {
        insert
            .columns
            .iter()
            .map(|c| {
                let n = c.0.last().and_then(|p| p.as_ident()).map(fold_ident).unwrap_or_default();
                table.column_index(&n).ok_or_else(|| {
                    Error::new(
                        SqlState::UndefinedColumn,
                        format!("column \"{n}\" of relation \"{}\" does not exist", table.name),
                    )
                })
            })
            .collect::<Result<_>>()?
    };
    for (i, c) in columns.iter().enumerate() {
        if columns[..i].contains(c) {
            return Err(Error::new(
                SqlState::DuplicateColumn,
                format!("column \"{}\" specified more than once", table.columns[*c].name),
            ));
        }
    }
    let Some(source) = &insert.source else {
        // INSERT … DEFAULT VALUES
        return Ok(InsertPlan::new(table, vec![], InsertSource::Values(vec![vec![]]), returning, on_conflict));
    };
    let values = match source.body.as_ref() {
        ast::SetExpr::Values(v) if source.order_by.is_none() && source.limit_clause.is_none() && source.with.is_none() => v,
        _ => {
            // OVERRIDING USER VALUE: the session replaces the query's values for identity
            // columns (`user_overridden`).
            if overriding.is_none()
                && let Some(&c) = columns.iter().find(|&&c| generated_always(&table.columns[c]))
            {
                return Err(identity_always(&table.columns[c].name));
            }
            return Ok(InsertPlan::new(table, columns, InsertSource::Query(source.clone()), returning, on_conflict));
        }
    };
    // Without a column list, VALUES rows fill the table's first columns, the rest take their
    // defaults (as in PostgreSQL); the rows must all be as long.
    let columns = match values.rows.first() {
        Some(first) if insert.columns.is_empty() => {
            if values.rows.iter().any(|r| r.len() != first.len()) {
                return Err(Error::syntax("VALUES lists must all be the same length"));
            }
            columns[..first.len().min(columns.len())].to_vec()
        }
        _ => columns,
    };
    let mut binder = Binder::new(None, params);
    let mut rows = Vec::with_capacity(values.rows.len());
    for row in &values.rows {
        if row.len() != columns.len() {
            return Err(Error::syntax(if row.len() > columns.len() {
                "INSERT has more expressions than target columns"
            } else {
                "INSERT has more target columns than expressions"
            }));
        }
        let mut bound = Vec::with_capacity(row.len());
        for (e, &c) in row.iter().zip(&columns) {
            let col = &table.columns[c];
            bound.push(if is_default_keyword(e) || (overriding == Some(Overriding::User) && is_identity(col)) {
                default_expr(col.default.as_ref(), col.ty)
            } else if generated_always(col) && overriding.is_none() {
                return Err(identity_always(&col.name));
            } else {
                binder.bind_assignment(e, col.ty, &col.name)?
            });
        }
        rows.push(bound);
    }
    Ok(InsertPlan::new(table, columns, InsertSource::Values(rows), returning, on_conflict))
}

/// Whether a column is `GENERATED ALWAYS AS IDENTITY`.
fn generated_always(col: &crate::catalog::ColumnDef) -> bool {
    matches!(col.default, Some(ColumnDefault::Identity { always: true, .. }))
}

/// Whether a column is an identity column (`GENERATED ALWAYS` or `BY DEFAULT`).
fn is_identity(col: &crate::catalog::ColumnDef) -> bool {
    matches!(col.default, Some(ColumnDefault::Identity { .. }))
}

/// Under `OVERRIDING USER VALUE`, the values an `INSERT … SELECT` gives for identity columns
/// are replaced by the columns' defaults: each such position in the plan's columns, with the
/// default to evaluate for every row instead.
pub fn user_overridden(plan: &InsertPlan) -> Vec<(usize, Expr)> {
    plan.columns
        .iter()
        .enumerate()
        .filter(|&(_, &c)| is_identity(&plan.table.columns[c]))
        .map(|(i, &c)| (i, default_expr(plan.table.columns[c].default.as_ref(), plan.table.columns[c].ty)))
        .collect()
}

/// A value given for a `GENERATED ALWAYS` identity column (428C9, PostgreSQL's wording).
fn identity_always(column: &str) -> Error {
    Error::new(SqlState::GeneratedAlways, format!("cannot insert a non-DEFAULT value into column \"{column}\""))
        .with_detail(format!("Column \"{column}\" is an identity column defined as GENERATED ALWAYS."))
}

fn is_default_keyword(e: &ast::Expr) -> bool {
    matches!(e, ast::Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"))
}

/// The expression of a column default.
pub fn default_expr(default: Option<&ColumnDefault>, ty: DataType) -> Expr {
    match default {
        Some(ColumnDefault::Value(v)) => Expr::literal(v.clone(), ty),
        Some(ColumnDefault::CurrentTimestamp) => Expr::Cast {
            expr: Box::new(Expr::Func { func: super::expr::Func::Now, args: vec![], ty: DataType::Timestamp }),
            to: ty,
        },
        Some(ColumnDefault::TimeDependent { expr, .. }) => expr.clone(),
        Some(d @ (ColumnDefault::Nextval(_) | ColumnDefault::Identity { .. })) => Expr::Cast {
            expr: Box::new(nextval_expr(d.sequence().unwrap_or_default())),
            to: ty,
        },
        Some(ColumnDefault::RandomUuid) => Expr::Cast {
            expr: Box::new(Expr::Func { func: super::expr::Func::GenRandomUuid, args: vec![], ty: DataType::Uuid }),
            to: ty,
        },
        None => Expr::literal(Value::Null, ty),
    }
}

/// `nextval('sequence')`.
pub fn nextval_expr(sequence: &str) -> Expr {
    // The argument is a name as SQL reads it: quoted if the sequence's name is not lower case
    // (a table created as "User" owns "User_id_seq").
    let name = Value::Text(super::names::quote_ident(sequence));
    Expr::Func { func: super::expr::Func::Nextval, args: vec![Expr::literal(name, DataType::Text)], ty: DataType::Int64 }
}

fn single_table(from: &ast::TableWithJoins) -> Option<(&ast::ObjectName, Option<&ast::Ident>)> {
    if !from.joins.is_empty() {
        return None;
    }
    match &from.relation {
        ast::TableFactor::Table { name, alias, args: None, .. } => {
            if alias.as_ref().is_some_and(|a| !a.columns.is_empty()) {
                return None;
            }
            Some((name, alias.as_ref().map(|a| &a.name)))
        }
        _ => None,
    }
}

pub fn plan_update(catalog: &Catalog, update: &ast::Update, params: &mut Vec<Option<DataType>>) -> Result<UpdatePlan> {
    if update.from.is_some() {
        return Err(Error::unsupported("UPDATE … FROM"));
    }
    let (name, alias) = single_table(&update.table).ok_or_else(|| Error::unsupported("UPDATE of a join"))?;
    let table = catalog.require_table(&user_relation(name)?)?.clone();
    let mut binder = Binder::new(Some(scope_for(&table, alias)), params);
    let assignments = bind_assignments(&table, &update.assignments, &mut binder)?;
    let filter = update.selection.as_ref().map(|w| binder.bind_predicate(w)).transpose()?;
    let access = choose_access(&table, filter.as_ref(), &[]).0;
    let residual = residual_filter(&table, filter.as_ref(), &access);
    let residual_within_bounds = residual_within_bounds(&table, filter.as_ref(), &access);
    drop(binder);
    let returning = bind_returning(&table, alias, &update.returning, params)?;
    // The filter, the new values, and the old values of the changed columns (for the undo).
    let assigned = assignments.iter().fold(0u64, |m, (c, _)| m | column_bit(*c));
    let reads = assigned | columns_read(residual.iter().chain(assignments.iter().map(|(_, e)| e)).chain(returned(&returning)));
    Ok(UpdatePlan { table, assignments, filter, residual, residual_within_bounds, access, returning, reads })
}

/// `SET column = value, …` of an UPDATE (or of ON CONFLICT DO UPDATE), bound with `binder`.
fn bind_assignments(table: &TableDef, set: &[ast::Assignment], binder: &mut Binder) -> Result<Vec<(usize, Expr)>> {
    let mut assignments = Vec::with_capacity(set.len());
    for a in set {
        let ast::AssignmentTarget::ColumnName(target) = &a.target else {
            return Err(Error::unsupported("multiple-column assignment in UPDATE"));
        };
        let n = target.0.last().and_then(|p| p.as_ident()).map(fold_ident).unwrap_or_default();
        let c = table.column_index(&n).ok_or_else(|| {
            Error::new(SqlState::UndefinedColumn, format!("column \"{n}\" of relation \"{}\" does not exist", table.name))
        })?;
        if assignments.iter().any(|(col, _)| *col == c) {
            return Err(Error::new(SqlState::DuplicateColumn, format!("multiple assignments to same column \"{n}\"")));
        }
        let col = &table.columns[c];
        let e = if is_default_keyword(&a.value) {
            default_expr(col.default.as_ref(), col.ty)
        } else {
            binder.bind_assignment(&a.value, col.ty, &col.name)?
        };
        assignments.push((c, e));
    }
    Ok(assignments)
}

/// Plans `ON CONFLICT`: the unique index its target names (by columns, in any order, or by
/// constraint name), and DO UPDATE's assignments and condition, in which `excluded.c` is
/// the proposed row's column.
fn plan_on_conflict(table: &TableDef, alias: Option<&ast::Ident>, on: &ast::OnInsert, params: &mut Vec<Option<DataType>>) -> Result<OnConflict> {
    let ast::OnInsert::OnConflict(on) = on else { return Err(Error::unsupported("ON DUPLICATE KEY UPDATE")) };
    let no_match = || {
        Error::new(SqlState::InvalidColumnReference, "there is no unique or exclusion constraint matching the ON CONFLICT specification")
    };
    let index = match &on.conflict_target {
        None => None,
        Some(ast::ConflictTarget::Columns(names)) => {
            let mut wanted = names
                .iter()
                .map(|n| table.column_index(&fold_ident(n)).ok_or_else(|| Error::undefined_column(&fold_ident(n))))
                .collect::<Result<Vec<_>>>()?;
            wanted.sort_unstable();
            let position = table.indexes.iter().position(|i| {
                let mut columns = i.columns.clone();
                columns.sort_unstable();
                i.unique && columns == wanted
            });
            Some(position.ok_or_else(no_match)?)
        }
        Some(ast::ConflictTarget::OnConstraint(name)) => {
            let name = name.0.last().and_then(|p| p.as_ident()).map(fold_ident).unwrap_or_default();
            let position = table.indexes.iter().position(|i| i.unique && i.name == name);
            Some(position.ok_or_else(|| {
                Error::new(SqlState::UndefinedObject, format!("constraint \"{name}\" for table \"{}\" does not exist", table.name))
            })?)
        }
    };
    let action = match &on.action {
        ast::OnConflictAction::DoNothing => ConflictAction::Nothing,
        ast::OnConflictAction::DoUpdate(update) => {
            if index.is_none() {
                return Err(Error::new(
                    SqlState::SyntaxError,
                    "ON CONFLICT DO UPDATE requires inference specification or constraint name",
                ));
            }
            let mut binder = Binder::new(Some(Scope { excluded: true, ..scope_for(table, alias) }), params);
            let assignments = bind_assignments(table, &update.assignments, &mut binder)?;
            let filter = update.selection.as_ref().map(|w| binder.bind_predicate(w)).transpose()?;
            ConflictAction::Update { assignments, filter }
        }
    };
    Ok(OnConflict { index, action })
}

pub fn plan_delete(catalog: &Catalog, delete: &ast::Delete, params: &mut Vec<Option<DataType>>) -> Result<DeletePlan> {
    if delete.using.is_some() || !delete.tables.is_empty() {
        return Err(Error::unsupported("DELETE … USING"));
    }
    let from = match &delete.from {
        ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
    };
    let [from] = from.as_slice() else { return Err(Error::unsupported("DELETE from several tables")) };
    let (name, alias) = single_table(from).ok_or_else(|| Error::unsupported("DELETE from a join"))?;
    let table = catalog.require_table(&user_relation(name)?)?.clone();
    let mut binder = Binder::new(Some(scope_for(&table, alias)), params);
    let filter = delete.selection.as_ref().map(|w| binder.bind_predicate(w)).transpose()?;
    let access = choose_access(&table, filter.as_ref(), &[]).0;
    let residual = residual_filter(&table, filter.as_ref(), &access);
    let residual_within_bounds = residual_within_bounds(&table, filter.as_ref(), &access);
    drop(binder);
    let returning = bind_returning(&table, alias, &delete.returning, params)?;
    let reads = columns_read(residual.iter().chain(returned(&returning)));
    Ok(DeletePlan { table, filter, residual, residual_within_bounds, access, returning, reads })
}

/// What SELECT … FOR UPDATE does with a row another running transaction holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LockWait {
    /// Waits for that transaction to end (`freshet.lock_wait`), as a write does.
    #[default]
    Wait,
    /// NOWAIT: fails with 55P03.
    NoWait,
    /// SKIP LOCKED: the row is not returned (before LIMIT counts it), as a job queue's
    /// consumers want.
    SkipLocked,
}

/// Plans a SELECT for the short path, or returns `None` when it belongs to the analytical
/// side (no index path, joins, aggregates, or anything the short path does not evaluate).
pub fn plan_select(catalog: &Catalog, query: &ast::Query, params: &mut Vec<Option<DataType>>) -> Result<Option<SelectPlan>> {
    if query.with.is_some() || query.fetch.is_some() || query.for_clause.is_some() {
        return Ok(None);
    }
    let lock = !query.locks.is_empty();
    let ast::SetExpr::Select(select) = query.body.as_ref() else { return declined(lock) };
    let plain = select.distinct.is_none()
        && select.top.is_none()
        && select.into.is_none()
        && select.having.is_none()
        && select.named_window.is_empty()
        && select.qualify.is_none()
        && select.prewhere.is_none()
        && matches!(&select.group_by, ast::GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty());
    if !plain || select.from.len() != 1 {
        return declined(lock);
    }
    let Some((name, alias)) = single_table(&select.from[0]) else { return declined(lock) };
    let Ok(table_name) = user_relation(name) else { return declined(lock) };
    let table = match catalog.table(&table_name) {
        Some(t) => t.clone(),
        None if lock => return Err(Error::undefined_table(&table_name)),
        None => return Ok(None),
    };
    // Work on a copy of the parameter types: a statement that falls back keeps none of them.
    let mut trial = params.clone();
    let listed = in_subquery(select);
    let planned = match &listed {
        Some((rest, subject, subquery)) => plan_listed(catalog, &table, alias, rest, subject, subquery, query, lock, &mut trial),
        None => try_plan_select(&table, alias, select, query, lock, None, &mut trial),
    };
    match planned {
        Ok(Some(plan)) => {
            *params = trial;
            Ok(Some(plan))
        }
        Err(e) if e.state != SqlState::FeatureNotSupported => Err(e),
        // Not a statement of the short path.
        _ if lock && listed.is_some() => Err(Error::unsupported(
            "FOR UPDATE/FOR SHARE with an IN subquery other than a one-column lookup of rows on the statement's partition",
        )),
        _ if lock => Err(Error::unsupported("FOR UPDATE/FOR SHARE on a query other than a single-table SELECT")),
        _ => Ok(None),
    }
}

/// The first `column IN (subquery)` among the WHERE clause's top-level conjuncts: the SELECT
/// without it, its left side and the subquery.
fn in_subquery(select: &ast::Select) -> Option<(ast::Select, &ast::Expr, &ast::Query)> {
    fn split<'a>(e: &'a ast::Expr, found: &mut Option<(&'a ast::Expr, &'a ast::Query)>) -> Option<ast::Expr> {
        match e {
            ast::Expr::BinaryOp { left, op: ast::BinaryOperator::And, right } => match (split(left, found), split(right, found)) {
                (Some(l), Some(r)) => Some(ast::Expr::BinaryOp { left: Box::new(l), op: ast::BinaryOperator::And, right: Box::new(r) }),
                (l, r) => l.or(r),
            },
            ast::Expr::Nested(inner) if matches!(inner.as_ref(), ast::Expr::BinaryOp { op: ast::BinaryOperator::And, .. }) => split(inner, found),
            ast::Expr::InSubquery { expr, subquery, negated: false } if found.is_none() => {
                *found = Some((expr, subquery));
                None
            }
            other => Some(other.clone()),
        }
    }
    let mut found = None;
    let rest = split(select.selection.as_ref()?, &mut found);
    let (subject, subquery) = found?;
    let mut without = select.clone();
    without.selection = rest;
    Some((without, subject, subquery))
}

/// A SELECT whose lookups take their IN list from a subquery (`select` is the statement
/// without that condition; see [`SelectPlan::any_from`]): the subquery must be a short-path
/// SELECT of one column without LIMIT, OFFSET or aggregates, reading rows the same partition
/// holds (a replicated table, or one partitioned alike with its partition key fixed to the
/// same value as this statement's), and `subject` a column compared exactly with its values
/// that is the next key column of the index the lookups use. Anything else is the analytical
/// side's, which also reports any error in the subquery. With `lock` (FOR UPDATE/SHARE) the
/// rows the lookups find are claimed, as a locking SELECT's are; the subquery's rows are not
/// (as in PostgreSQL, whose locking clause names the outer query's tables).
#[allow(clippy::too_many_arguments)]
fn plan_listed(
    catalog: &Catalog,
    table: &Arc<TableDef>,
    alias: Option<&ast::Ident>,
    select: &ast::Select,
    subject: &ast::Expr,
    subquery: &ast::Query,
    query: &ast::Query,
    lock: bool,
    params: &mut Vec<Option<DataType>>,
) -> Result<Option<SelectPlan>> {
    let sub = match plan_select(catalog, subquery, params) {
        Ok(Some(sub)) => sub,
        // A locking statement has no other path to report the subquery's error.
        Err(e) if lock && e.state != SqlState::FeatureNotSupported => return Err(e),
        _ => return Ok(None),
    };
    let usable = sub.projection.len() == 1 && sub.aggregates.is_empty() && sub.limit.is_none() && sub.offset.is_none() && sub.any_from.is_none();
    if !usable {
        return Ok(None);
    }
    let Some(plan) = try_plan_select(table, alias, select, query, lock, Some((subject, &sub.projection[0])), params)? else { return Ok(None) };
    let colocated = match (sub.table.partition_key, table.partition_key) {
        (None, _) => true,
        (Some(sk), Some(k)) => {
            sub.table.columns[sk].ty == table.columns[k].ty
                && match (sub.filter.as_ref().and_then(|f| pinned_key(f, sk)), plan.filter.as_ref().and_then(|f| pinned_key(f, k))) {
                    (Some(a), Some(b)) => a == b,
                    _ => false,
                }
        }
        (Some(_), None) => false,
    };
    if !colocated {
        return Ok(None);
    }
    Ok(Some(SelectPlan { any_from: Some(Arc::new(OltpPlan::Select(sub))), ..plan }))
}

/// A `column = constant` conjunct of a filter on column `key`, if there is one: the value a
/// partition key is fixed to.
pub fn pinned_key(filter: &Expr, key: usize) -> Option<&Expr> {
    conjuncts(filter).into_iter().find_map(|c| match c {
        Expr::Binary { op: BinaryOp::Eq, left, right, .. } => match (left.as_ref(), right.as_ref()) {
            (Expr::Column { index, .. }, v) | (v, Expr::Column { index, .. }) if *index == key && v.is_row_independent() => Some(v),
            _ => None,
        },
        _ => None,
    })
}

/// A SELECT the short path does not take; one that claims rows must be taken here.
fn declined(lock: bool) -> Result<Option<SelectPlan>> {
    if lock {
        return Err(Error::unsupported("FOR UPDATE/FOR SHARE on a query other than a single-table SELECT"));
    }
    Ok(None)
}

fn try_plan_select(
    table: &Arc<TableDef>,
    alias: Option<&ast::Ident>,
    select: &ast::Select,
    query: &ast::Query,
    lock: bool,
    listed: Option<(&ast::Expr, &Expr)>,
    params: &mut Vec<Option<DataType>>,
) -> Result<Option<SelectPlan>> {
    let mut binder = Binder::new(Some(scope_for(table, alias)), params);
    let filter = select.selection.as_ref().map(|w| binder.bind_predicate(w)).transpose()?;
    // `column IN (subquery)`: the column, and the placeholder of its IN list.
    let listed = match listed {
        None => None,
        Some((subject, value)) => match binder.bind_expr(subject, None)? {
            Expr::Column { index, ty } if exact_key(table, index, value) => Some((index, Expr::Param { index: LISTED, ty })),
            _ => return Ok(None),
        },
    };
    let mut projection = Vec::new();
    let mut columns = Vec::new();
    let mut aggregates = Vec::new();
    for item in &select.projection {
        let aggregate = match item {
            ast::SelectItem::UnnamedExpr(e) => bind_aggregate(&mut binder, e)?.map(|a| (a, column_name(e))),
            ast::SelectItem::ExprWithAlias { expr, alias } => bind_aggregate(&mut binder, expr)?.map(|a| (a, fold_ident(alias))),
            _ => None,
        };
        if let Some((a, name)) = aggregate {
            columns.push(ResultColumn { name, ty: a.ty });
            aggregates.push(a);
            continue;
        }
        match item {
            ast::SelectItem::Wildcard(opts) if is_plain_wildcard(opts) => {
                for (i, c) in table.columns.iter().enumerate() {
                    projection.push(Expr::Column { index: i, ty: c.ty });
                    columns.push(ResultColumn { name: c.name.clone(), ty: c.ty });
                }
            }
            ast::SelectItem::UnnamedExpr(e) => {
                let bound = binder.bind_expr(e, None)?;
                columns.push(ResultColumn { name: column_name(e), ty: bound.ty() });
                projection.push(bound);
            }
            ast::SelectItem::ExprWithAlias { expr, alias } => {
                let bound = binder.bind_expr(expr, None)?;
                columns.push(ResultColumn { name: fold_ident(alias), ty: bound.ty() });
                projection.push(bound);
            }
            _ => return Ok(None),
        }
    }
    if !aggregates.is_empty() {
        // Plain columns beside aggregates need GROUP BY (the analytical side reports 42803);
        // the one row an aggregate gives has nothing to sort.
        if !projection.is_empty() || query.order_by.is_some() {
            return Ok(None);
        }
        if lock {
            return Err(Error::unsupported("FOR UPDATE is not allowed with aggregate functions"));
        }
    }
    let mut order_by = Vec::new();
    if let Some(ob) = &query.order_by {
        let ast::OrderByKind::Expressions(exprs) = &ob.kind else { return Ok(None) };
        for o in exprs {
            let e = match order_key(&o.expr, select, &projection) {
                Some(e) => e,
                None => binder.bind_expr(&o.expr, None)?,
            };
            let desc = o.options.asc == Some(false);
            // PostgreSQL puts NULLs last in ascending order and first in descending order.
            let nulls_first = o.options.nulls_first.unwrap_or(desc);
            order_by.push((e, desc, nulls_first));
        }
    }
    let (limit, offset) = match &query.limit_clause {
        None => (None, None),
        Some(ast::LimitClause::LimitOffset { limit, offset, limit_by }) if limit_by.is_empty() => (
            limit.as_ref().map(|l| binder.bind_expr(l, Some(DataType::Int64))).transpose()?,
            offset.as_ref().map(|o| binder.bind_expr(&o.value, Some(DataType::Int64))).transpose()?,
        ),
        Some(_) => return Ok(None),
    };
    for e in limit.iter().chain(offset.iter()) {
        if !e.is_row_independent() || e.ty().family() != crate::types::TypeFamily::Integer {
            return Ok(None);
        }
    }
    let (access, ordered_by_index) = choose_access_listing(table, filter.as_ref(), &order_by, listed.as_ref().map(|(c, e)| (*c, e)));
    // Without an index the analytical side reads faster; rows to claim must be read here.
    if access == Access::Scan && !lock {
        return Ok(None);
    }
    // The subquery's values must be the lookups' list.
    if let Some((_, placeholder)) = &listed
        && !matches!(&access, Access::Index { any, .. } if any.len() == 1 && any[0] == *placeholder)
    {
        return Ok(None);
    }
    let residual = residual_filter(table, filter.as_ref(), &access);
    let residual_within_bounds = residual_within_bounds(table, filter.as_ref(), &access);
    let args = aggregates.iter().filter_map(|a| a.arg.as_ref());
    let reads = columns_read(projection.iter().chain(args).chain(&residual).chain(order_by.iter().map(|(e, _, _)| e)));
    Ok(Some(SelectPlan {
        table: table.clone(),
        projection,
        columns,
        filter,
        residual,
        residual_within_bounds,
        access,
        order_by,
        ordered_by_index,
        limit,
        offset,
        lock,
        lock_wait: lock_wait(query),
        reads,
        aggregates,
        any_from: None,
    }))
}

/// The query's [`LockWait`]: SKIP LOCKED or NOWAIT if any of its locking clauses says so.
fn lock_wait(query: &ast::Query) -> LockWait {
    let said = |n: ast::NonBlock| query.locks.iter().any(|l| l.nonblock == Some(n));
    if said(ast::NonBlock::SkipLocked) {
        LockWait::SkipLocked
    } else if said(ast::NonBlock::Nowait) {
        LockWait::NoWait
    } else {
        LockWait::Wait
    }
}

/// Bit `c` of a column set; columns past 63 set every bit.
pub(crate) fn column_bit(c: usize) -> u64 {
    1u64.checked_shl(c as u32).unwrap_or(u64::MAX)
}

/// The columns the expressions read, as a bit set (bit i: column i; columns past 63 set every
/// bit): what a statement reads of each row, so that only those slots are prefetched.
pub fn columns_read<'a>(exprs: impl IntoIterator<Item = &'a Expr>) -> u64 {
    let mut mask = 0u64;
    for e in exprs {
        e.visit(&mut |node| {
            if let Expr::Column { index, .. } = node {
                mask |= column_bit(*index);
            }
        });
    }
    mask
}

/// The expressions of a RETURNING clause, if any.
fn returned(returning: &Option<Returning>) -> impl Iterator<Item = &Expr> {
    returning.iter().flat_map(|r| &r.exprs)
}

fn is_plain_wildcard(opts: &ast::WildcardAdditionalOptions) -> bool {
    opts.opt_ilike.is_none() && opts.opt_exclude.is_none() && opts.opt_except.is_none() && opts.opt_replace.is_none() && opts.opt_rename.is_none()
}

/// ORDER BY may name an output column by alias or position.
fn order_key(e: &ast::Expr, select: &ast::Select, projection: &[Expr]) -> Option<Expr> {
    match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => {
                let i: usize = n.parse().ok()?;
                projection.get(i.checked_sub(1)?).cloned()
            }
            _ => None,
        },
        ast::Expr::Identifier(id) => {
            let name = fold_ident(id);
            let mut offset = 0;
            for item in &select.projection {
                match item {
                    ast::SelectItem::ExprWithAlias { alias, .. } if fold_ident(alias) == name => {
                        return projection.get(offset).cloned();
                    }
                    ast::SelectItem::Wildcard(_) => return None,
                    _ => offset += 1,
                }
            }
            None
        }
        _ => None,
    }
}

/// Splits a predicate into its AND-ed parts.
pub fn conjuncts(e: &Expr) -> Vec<&Expr> {
    match e {
        Expr::Binary { op: BinaryOp::And, left, right, .. } => {
            let mut v = conjuncts(left);
            v.extend(conjuncts(right));
            v
        }
        other => vec![other],
    }
}

/// A comparison `column op constant` found in a predicate.
struct Sarg<'a> {
    column: usize,
    op: BinaryOp,
    value: &'a Expr,
}

/// The IN lists of a predicate usable for index lookups: `column IN (values)` (not negated,
/// values row-independent, at most [`MAX_IN_LOOKUPS`]), with the column's index. An integer
/// column widened to the list's integer type counts too: the lookup converts each value to
/// the column type exactly (`exec::key_value`); that conjunct stays in the residual.
fn in_lists(filter: Option<&Expr>) -> Vec<(usize, &[Expr])> {
    let Some(filter) = filter else { return vec![] };
    let mut out = Vec::new();
    for c in conjuncts(filter) {
        let Expr::InList { expr, list, negated: false } = c else { continue };
        let column = match expr.as_ref() {
            Expr::Column { index, .. } => *index,
            Expr::Cast { expr, to } if to.family() == TypeFamily::Integer => match expr.as_ref() {
                Expr::Column { index, ty } if ty.family() == TypeFamily::Integer => *index,
                _ => continue,
            },
            _ => continue,
        };
        if !list.is_empty() && list.len() <= MAX_IN_LOOKUPS && list.iter().all(Expr::is_row_independent) {
            out.push((column, list.as_slice()));
        }
    }
    out
}

fn sargs(filter: Option<&Expr>) -> Vec<Sarg<'_>> {
    let Some(filter) = filter else { return vec![] };
    let mut out = Vec::new();
    for c in conjuncts(filter) {
        if let Expr::Binary { op, left, right, .. } = c {
            if !op.is_comparison() || *op == BinaryOp::NotEq {
                continue;
            }
            match (left.as_ref(), right.as_ref()) {
                (Expr::Column { index, .. }, v) if v.is_row_independent() => out.push(Sarg { column: *index, op: *op, value: v }),
                (v, Expr::Column { index, .. }) if v.is_row_independent() => out.push(Sarg { column: *index, op: op.flip(), value: v }),
                _ => {}
            }
        }
    }
    out
}

/// Chooses the access path: the index with the longest run of equalities on its leading key
/// columns (a whole unique key wins), plus a range on the next column. Also reports whether
/// that index already yields the ORDER BY order.
pub fn choose_access(table: &TableDef, filter: Option<&Expr>, order_by: &[(Expr, bool, bool)]) -> (Access, Option<bool>) {
    choose_access_listing(table, filter, order_by, None)
}

/// [`choose_access`] with one more IN list: column `.0` equals one of the values `.1` stands
/// for (a subquery's, see [`SelectPlan::any_from`]).
fn choose_access_listing(table: &TableDef, filter: Option<&Expr>, order_by: &[(Expr, bool, bool)], listed: Option<(usize, &Expr)>) -> (Access, Option<bool>) {
    let sargs = sargs(filter);
    let mut in_lists = in_lists(filter);
    if let Some((column, placeholder)) = listed {
        // Ahead of a written list on the same column, which then stays in the residual.
        in_lists.insert(0, (column, std::slice::from_ref(placeholder)));
    }
    let mut best: Option<(u32, Access, Option<bool>)> = None;
    let mut consider = |score: u32, access: Access, ordered: Option<bool>| {
        if best.as_ref().is_none_or(|(s, _, _)| score > *s) {
            best = Some((score, access, ordered));
        }
    };
    for (position, index) in table.indexes.iter().enumerate() {
        let mut eq = Vec::new();
        for &col in &index.columns {
            match sargs.iter().find(|s| s.column == col && s.op == BinaryOp::Eq) {
                Some(s) => eq.push(s.value.clone()),
                None => break,
            }
        }
        let full = eq.len() == index.columns.len();
        // An IN list on the next key column: one lookup per value.
        let any: Vec<Expr> = match in_lists.iter().find(|(c, _)| !full && *c == index.columns[eq.len()]) {
            Some((_, list)) if index.is_ordered() || eq.len() + 1 == index.columns.len() => list.to_vec(),
            _ => Vec::new(),
        };
        if !any.is_empty() {
            let whole_unique = index.unique && eq.len() + 1 == index.columns.len();
            let score = eq.len() as u32 * 4 + 2 + if whole_unique { 60 } else { 0 };
            // Rows come lookup by lookup; an ORDER BY is sorted afterwards.
            let ordered = order_by.is_empty().then_some(false);
            consider(score, Access::Index { index: position, eq, lower: None, upper: None, any }, ordered);
            continue;
        }
        if !index.is_ordered() && !full {
            continue; // a hash index answers whole keys only
        }
        let (mut lower, mut upper) = (None, None);
        if !full {
            let next = index.columns[eq.len()];
            for s in sargs.iter().filter(|s| s.column == next) {
                match s.op {
                    BinaryOp::Gt => lower = Some((s.value.clone(), false)),
                    BinaryOp::GtEq => lower = Some((s.value.clone(), true)),
                    BinaryOp::Lt => upper = Some((s.value.clone(), false)),
                    BinaryOp::LtEq => upper = Some((s.value.clone(), true)),
                    _ => {}
                }
            }
        }
        if eq.is_empty() && lower.is_none() && upper.is_none() {
            continue;
        }
        let score = eq.len() as u32 * 4
            + if full && index.unique { 100 } else { 0 }
            + lower.is_some() as u32
            + upper.is_some() as u32;
        let ordered = if index.is_ordered() { index_order(&index.columns[eq.len()..], order_by) } else { None };
        consider(score, Access::Index { index: position, eq, lower, upper, any: Vec::new() }, ordered);
    }
    match best {
        Some((_, access, ordered)) => (access, ordered),
        None => (Access::Scan, None),
    }
}

/// The conjuncts of `filter` that `access` does not already guarantee, AND-ed again.
///
/// An index lookup with equalities on leading key columns yields exactly the rows whose
/// visible version has that key (`exec::for_each_candidate` checks entries of old versions),
/// and the lookup value is the comparison's operand converted to the column type exactly
/// (`exec::key_value`; no exact conversion finds no row). So `column = value` is true for
/// every row found when key equality is SQL equality for the column's type: integers,
/// decimals, dates, timestamps, booleans and text other than `char(n)` (whose comparison
/// ignores trailing blanks), with an operand of the same type family. Range bounds stay in
/// the residual (a bound that does not convert exactly is dropped from the lookup).
pub fn residual_filter(table: &TableDef, filter: Option<&Expr>, access: &Access) -> Option<Expr> {
    let filter = filter?;
    if !matches!(access, Access::Index { .. }) {
        return Some(filter.clone());
    }
    and_all(conjuncts(filter).into_iter().filter(|c| !implied_by_lookup(table, access, c)))
}

/// The residual filter (see [`residual_filter`]) without the range conjuncts that are the
/// access path's bounds on the next key column, when there are such: `column > value`,
/// `column <= value` and so on (either way round) whose value is the bound's expression. The
/// walk yields only rows within its bounds when each bound converts to a key exactly; the
/// executor checks that for the values of each run (`exec::Residual::to_check`) and uses the
/// whole residual otherwise. The column's type must compare as its key encoding orders (the
/// types of [`exact_key`]).
pub fn residual_within_bounds(table: &TableDef, filter: Option<&Expr>, access: &Access) -> Option<Option<Expr>> {
    let filter = filter?;
    let Access::Index { index, eq, lower, upper, any } = access else { return None };
    if (lower.is_none() && upper.is_none()) || !any.is_empty() {
        return None;
    }
    let next = *table.indexes[*index].columns.get(eq.len())?;
    let is_bound = |c: &Expr| -> bool {
        let Expr::Binary { op, left, right, .. } = c else { return false };
        let (op, value) = match (left.as_ref(), right.as_ref()) {
            (Expr::Column { index, .. }, v) if *index == next => (*op, v),
            (v, Expr::Column { index, .. }) if *index == next => (op.flip(), v),
            _ => return false,
        };
        let bound = match op {
            BinaryOp::Gt | BinaryOp::GtEq => lower,
            BinaryOp::Lt | BinaryOp::LtEq => upper,
            _ => return false,
        };
        let inclusive = matches!(op, BinaryOp::GtEq | BinaryOp::LtEq);
        exact_key(table, next, value) && bound.as_ref().is_some_and(|(e, i)| e == value && *i == inclusive)
    };
    let rest: Vec<&Expr> = conjuncts(filter).into_iter().filter(|c| !implied_by_lookup(table, access, c)).collect();
    let kept: Vec<&Expr> = rest.iter().copied().filter(|c| !is_bound(c)).collect();
    (kept.len() < rest.len()).then(|| and_all(kept.into_iter()))
}

/// The conjuncts AND-ed again (none: no filter).
fn and_all<'a>(conjuncts: impl Iterator<Item = &'a Expr>) -> Option<Expr> {
    conjuncts.cloned().reduce(|l, r| Expr::Binary { op: BinaryOp::And, left: Box::new(l), right: Box::new(r), ty: DataType::Bool })
}

/// Whether an index key of column `col` compared with `value` is SQL comparison: integers,
/// decimals, dates, timestamps, booleans and text other than `char(n)` (whose comparison
/// ignores trailing blanks), with an operand of the same type family.
fn exact_key(table: &TableDef, col: usize, value: &Expr) -> bool {
    let ty = table.columns[col].ty;
    let exact = match ty.family() {
        TypeFamily::Integer | TypeFamily::Decimal | TypeFamily::Date | TypeFamily::Timestamp | TypeFamily::Bool | TypeFamily::Uuid => true,
        TypeFamily::String => !matches!(ty, DataType::Char(_)) && !matches!(value.ty(), DataType::Char(_)),
        TypeFamily::Float => false,
    };
    exact && value.ty().family() == ty.family()
}

/// Whether the lookup of index access `access` guarantees conjunct `c` for every row it
/// finds: an equality on a leading key column, or the IN list the lookups ran.
fn implied_by_lookup(table: &TableDef, access: &Access, c: &Expr) -> bool {
    let Access::Index { index, eq, any, .. } = access else { return false };
    let key_columns = &table.indexes[*index].columns[..eq.len()];
    if let Expr::InList { expr, list, negated: false } = c
        && !any.is_empty()
        && let Expr::Column { index: col, .. } = expr.as_ref()
    {
        // The IN list the lookups ran: each row found equals one of its values.
        return *col == table.indexes[*index].columns[eq.len()] && list == any && list.iter().all(|v| exact_key(table, *col, v));
    }
    let Expr::Binary { op: BinaryOp::Eq, left, right, .. } = c else { return false };
    let (col, value) = match (left.as_ref(), right.as_ref()) {
        (Expr::Column { index, .. }, v) | (v, Expr::Column { index, .. }) => (*index, v),
        _ => return false,
    };
    let Some(k) = key_columns.iter().position(|&kc| kc == col) else { return false };
    exact_key(table, col, value) && &eq[k] == value
}

/// Whether ORDER BY lists (a prefix of) the index columns after the equality prefix, all in
/// one direction with default NULL placement: then index order is the requested order.
fn index_order(rest: &[usize], order_by: &[(Expr, bool, bool)]) -> Option<bool> {
    if order_by.is_empty() {
        return Some(false);
    }
    if order_by.len() > rest.len() {
        return None;
    }
    let desc = order_by[0].1;
    for ((e, d, nulls_first), col) in order_by.iter().zip(rest) {
        match e {
            Expr::Column { index, .. } if index == col && *d == desc && *nulls_first == desc => {}
            _ => return None,
        }
    }
    Some(desc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_read_names_every_column_the_expressions_read() {
        let col = |index| Expr::Column { index, ty: DataType::Int32 };
        let sum = Expr::Binary { op: BinaryOp::Add, left: Box::new(col(2)), right: Box::new(Expr::Param { index: 0, ty: DataType::Int32 }), ty: DataType::Int32 };
        assert_eq!(columns_read([&sum, &col(5)]), 0b100100);
        assert_eq!(columns_read([]), 0);
        // A column past the 64th reads as "all of them".
        assert_eq!(columns_read([&col(64)]), u64::MAX);
    }
    use crate::catalog::CatalogStore;
    use crate::sql::ddl::{plan_create_table, DdlPlan, ForeignKeys};
    use crate::sql::parse::parse;

    fn catalog() -> Arc<Catalog> {
        let store = CatalogStore::new();
        for ddl in [
            "CREATE TABLE t (id INT, c CHAR(4), f FLOAT8, v INT, PRIMARY KEY (id, c, f))",
            "CREATE TABLE u (id INT PRIMARY KEY, v INT)",
            "CREATE TABLE w (a INT, b INT, v INT, PRIMARY KEY (a, b))",
        ] {
            let ast::Statement::CreateTable(ct) = &parse(ddl).unwrap()[0] else { panic!("not CREATE TABLE") };
            let DdlPlan::CreateTable { def, .. } = plan_create_table(ct, ForeignKeys::Refuse).unwrap() else { panic!("not a table") };
            store.put_table(Arc::new(def));
        }
        store.current()
    }

    fn select(sql: &str) -> SelectPlan {
        let ast::Statement::Query(q) = &parse(sql).unwrap()[0] else { panic!("not a query") };
        plan_select(&catalog(), q, &mut Vec::new()).unwrap().expect("a short-path plan")
    }

    fn insert(sql: &str) -> InsertPlan {
        let ast::Statement::Insert(i) = &parse(sql).unwrap()[0] else { panic!("not an INSERT") };
        plan_insert(&catalog(), i, &mut Vec::new()).unwrap()
    }

    #[test]
    fn a_single_row_insert_names_its_primary_key_and_the_parameters_it_reads() {
        // The key's expressions in the key's order, whatever the order of the columns given.
        let p = insert("INSERT INTO w (v, b, a) VALUES ($1, $3 + 1, $2)");
        let (exprs, params) = p.primary_key_exprs().expect("a key");
        assert_eq!(params, 0b110);
        assert!(matches!(exprs.as_slice(), [Expr::Param { index: 1, .. }, Expr::Binary { .. }]), "{exprs:?}");
        let constant = insert("INSERT INTO u VALUES (7, $1)");
        let (exprs, params) = constant.primary_key_exprs().expect("a key");
        assert_eq!((exprs.len(), params), (1, 0), "a constant key reads no parameter");
        // Several rows, a key column left to its default, or no primary key: none.
        assert!(insert("INSERT INTO u VALUES ($1, 1), ($2, 2)").primary_key_exprs().is_none());
        assert!(insert("INSERT INTO w (a, v) VALUES ($1, $2)").primary_key_exprs().is_none());
        let store = CatalogStore::new();
        let ast::Statement::CreateTable(ct) = &parse("CREATE TABLE h (a INT, b INT)").unwrap()[0] else { panic!("not CREATE TABLE") };
        let DdlPlan::CreateTable { def, .. } = plan_create_table(ct, ForeignKeys::Refuse).unwrap() else { panic!("not a table") };
        store.put_table(Arc::new(def));
        let ast::Statement::Insert(i) = &parse("INSERT INTO h VALUES ($1, $2)").unwrap()[0] else { panic!("not an INSERT") };
        assert!(plan_insert(&store.current(), i, &mut Vec::new()).unwrap().primary_key_exprs().is_none());
    }

    fn residual_columns(plan: &SelectPlan) -> Vec<usize> {
        let mut cols = Vec::new();
        if let Some(r) = &plan.residual {
            r.visit(&mut |e| {
                if let Expr::Column { index, .. } = e {
                    cols.push(*index);
                }
            });
        }
        cols
    }

    #[test]
    fn the_residual_keeps_what_the_lookup_does_not_answer_exactly() {
        // Integer key equality is answered by the lookup; the range on `v` is not.
        let p = select("SELECT v FROM t WHERE id = $1 AND c = 'ab' AND f = 1.5 AND v > 3");
        assert!(matches!(p.access, Access::Index { index: 0, .. }));
        assert!(p.filter.is_some(), "the whole predicate stays for routing and validation");
        let cols = residual_columns(&p);
        assert!(!cols.contains(&0), "id = $1 is implied by the lookup: {cols:?}");
        // char(n) and float comparisons are not bytewise key equality: they stay.
        assert!(cols.contains(&1) && cols.contains(&2) && cols.contains(&3), "{cols:?}");
        // A second, different equality on a key column stays too.
        let p = select("SELECT v FROM t WHERE id = 1 AND id = 2 AND c = 'ab' AND f = 1.5");
        assert!(residual_columns(&p).contains(&0));
    }

    #[test]
    fn a_residual_without_the_range_the_walk_answers_is_kept_beside_the_whole_one() {
        let columns = |e: &Option<Expr>| {
            let mut cols = Vec::new();
            e.iter().for_each(|e| {
                e.visit(&mut |e| {
                    if let Expr::Column { index, .. } = e {
                        cols.push(*index);
                    }
                })
            });
            cols
        };
        // Both bounds of the range on `b` (either way round) are the walk's: without them only
        // `v > 3` is left; the whole residual still has them, for bounds that are not exact keys.
        let p = select("SELECT v FROM w WHERE a = $1 AND b >= $2 - 20 AND $2 > b AND v > 3");
        let Access::Index { eq, lower: Some(_), upper: Some(_), .. } = &p.access else { panic!("{:?}", p.access) };
        assert_eq!(eq.len(), 1);
        assert_eq!(columns(&p.residual), vec![1, 1, 2]);
        assert_eq!(p.residual_within_bounds.as_ref().map(columns), Some(vec![2]));
        // Nothing left at all.
        let p = select("SELECT v FROM w WHERE a = 1 AND 5 < b");
        assert_eq!(p.residual_within_bounds, Some(None));
        // A second bound on the same side is not the walk's bound: it stays.
        let p = select("SELECT v FROM w WHERE a = 1 AND b > 5 AND b > $1");
        assert_eq!(p.residual_within_bounds.as_ref().map(columns), Some(vec![1]));
        // No range, or a float range (not bytewise comparison): nothing to leave out.
        assert_eq!(select("SELECT v FROM w WHERE a = 1 AND b = 2").residual_within_bounds, None);
        assert_eq!(select("SELECT v FROM t WHERE id = 1 AND c = 'ab' AND f > 1.5").residual_within_bounds, None);
    }

    #[test]
    fn an_in_list_on_the_next_key_column_is_one_lookup_per_value() {
        let p = select("SELECT v FROM t WHERE id = $1 AND c = 'ab' AND f IN (1.5, 2.5, $2)");
        let Access::Index { index: 0, eq, any, .. } = &p.access else { panic!("{:?}", p.access) };
        assert_eq!((eq.len(), any.len()), (2, 3));
        assert!(residual_columns(&p).contains(&2), "float keys are rechecked");
        // An integer IN list the lookups answer exactly leaves the residual.
        let p = select("SELECT v FROM u WHERE id IN (1, $1) AND v = 3");
        assert_eq!(residual_columns(&p), vec![1]);
        assert!(!p.access.is_point(&p.table));
        let planned = |sql: &str| {
            let ast::Statement::Query(q) = &parse(sql).unwrap()[0] else { panic!("not a query") };
            plan_select(&catalog(), q, &mut Vec::new()).unwrap()
        };
        // An IN list before the last column of a composite primary key is one prefix scan
        // of its ordered entries per value; a NOT IN, or a list that depends on the row,
        // gives no lookups, only a prefix scan with the list in the residual.
        let p = planned("SELECT v FROM t WHERE id IN (1, 2) AND c = 'ab' AND f = 1.5").expect("short path");
        let Access::Index { index: 0, eq, any, .. } = &p.access else { panic!("{:?}", p.access) };
        assert_eq!((eq.len(), any.len()), (0, 2));
        for sql in ["SELECT v FROM t WHERE id = 1 AND c = 'ab' AND f NOT IN (1.5)", "SELECT v FROM t WHERE id = 1 AND c = 'ab' AND f IN (v, 1.5)"] {
            let p = planned(sql).expect("short path");
            let Access::Index { index: 0, eq, any, .. } = &p.access else { panic!("{:?}", p.access) };
            assert_eq!((eq.len(), any.len()), (2, 0), "{sql}");
            assert!(residual_columns(&p).contains(&2), "{sql}");
        }
    }
}
