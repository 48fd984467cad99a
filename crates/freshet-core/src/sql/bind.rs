//! Binding SQL expressions of the short-statement path: names to columns, literals and
//! parameters to types.
//!
//! Literals in quotes, NULL and parameters without a declared type have no type of their own;
//! they take the type their context asks for (the other side of a comparison, the column they
//! are assigned to), as in PostgreSQL. What the short path cannot evaluate comes back as
//! `0A000`; for a SELECT the caller then hands the statement to the analytical side instead.

use sqlparser::ast;

use super::expr::{arithmetic_type, BinaryOp, Expr, Func};
use super::functions;
use super::names::{fold_ident, is_aggregate};
use crate::catalog::TableDef;
use crate::error::{Error, Result, SqlState};
use crate::types::{value::assignable, DataType, Decimal, TypeFamily, Value, MAX_DECIMAL_PRECISION};

/// A bound expression, or a value whose type is still open.
#[derive(Clone, Debug)]
pub enum Item {
    Typed(Expr),
    /// A quoted literal: its text is parsed once the type is known.
    Str(String),
    Null,
    /// A parameter whose type is not known yet.
    Param(usize),
}

/// The table an expression may refer to, with the names it can be qualified by.
pub struct Scope<'a> {
    pub table: &'a TableDef,
    pub qualifiers: Vec<String>,
    /// Whether `excluded.c` names column `c` of a proposed row (ON CONFLICT DO UPDATE), bound
    /// as column `width + c` of a row that follows the table's own columns with it.
    pub excluded: bool,
}

/// Binds expressions against at most one table, collecting parameter types.
pub struct Binder<'a> {
    pub scope: Option<Scope<'a>>,
    /// Types of `$1..$n`: declared by the client, or inferred here.
    pub params: &'a mut Vec<Option<DataType>>,
}

pub fn unsupported(what: impl std::fmt::Display) -> Error {
    Error::unsupported(what)
}

impl<'a> Binder<'a> {
    pub fn new(scope: Option<Scope<'a>>, params: &'a mut Vec<Option<DataType>>) -> Self {
        Binder { scope, params }
    }

    /// Binds `e` and resolves any open type, using `hint` if given and TEXT otherwise.
    pub fn bind_expr(&mut self, e: &ast::Expr, hint: Option<DataType>) -> Result<Expr> {
        let item = self.bind(e)?;
        self.resolve(item, hint.unwrap_or(DataType::Text))
    }

    /// Binds a predicate: it must be boolean.
    pub fn bind_predicate(&mut self, e: &ast::Expr) -> Result<Expr> {
        let expr = self.bind_expr(e, Some(DataType::Bool))?;
        if expr.ty() != DataType::Bool {
            return Err(Error::mismatch(format!(
                "argument of WHERE must be type boolean, not type {}",
                expr.ty().pg_name()
            )));
        }
        Ok(expr)
    }

    /// Binds a value to be stored in a column of type `ty`.
    pub fn bind_assignment(&mut self, e: &ast::Expr, ty: DataType, column: &str) -> Result<Expr> {
        let item = self.bind(e)?;
        let expr = self.resolve(item, ty)?;
        let from = expr.ty();
        if from == ty {
            return Ok(expr);
        }
        if !assignable(from.family(), ty) {
            return Err(Error::mismatch(format!(
                "column \"{column}\" is of type {} but expression is of type {}",
                ty.pg_name(),
                from.pg_name()
            ))
            .with_hint("You will need to rewrite or cast the expression."));
        }
        Ok(expr)
    }

    /// Gives an open item the type `ty`; a typed expression is returned as it is.
    pub fn resolve(&mut self, item: Item, ty: DataType) -> Result<Expr> {
        Ok(match item {
            Item::Typed(e) => e,
            Item::Str(s) => Expr::literal(Value::parse(&s, ty)?, ty),
            Item::Null => Expr::literal(Value::Null, ty),
            Item::Param(i) => {
                let declared = *self.params[i].get_or_insert(ty);
                Expr::Param { index: i, ty: declared }
            }
        })
    }

    fn param_index(&mut self, text: &str) -> Result<usize> {
        let n: usize = text
            .strip_prefix('$')
            .and_then(|d| d.parse().ok())
            .filter(|n| (1..=65_535).contains(n))
            .ok_or_else(|| Error::syntax(format!("syntax error at or near \"{text}\"")))?;
        if self.params.len() < n {
            self.params.resize(n, None);
        }
        Ok(n - 1)
    }

    pub fn bind(&mut self, e: &ast::Expr) -> Result<Item> {
        use ast::Expr as A;
        Ok(match e {
            A::Identifier(ident) => self.column(None, ident)?,
            A::CompoundIdentifier(parts) => match parts.as_slice() {
                [t, c] => self.column(Some(t), c)?,
                [s, t, c] if fold_ident(s) == "public" => self.column(Some(t), c)?,
                _ => return Err(Error::undefined_column(&parts.iter().map(fold_ident).collect::<Vec<_>>().join("."))),
            },
            A::Value(v) => self.literal(&v.value)?,
            A::Nested(inner) => self.bind(inner)?,
            A::TypedString(ts) => {
                let ty = sql_type(&ts.data_type)?;
                let text = match &ts.value.value {
                    ast::Value::SingleQuotedString(s) => s.clone(),
                    other => return Err(unsupported(format!("typed literal {other}"))),
                };
                Item::Typed(Expr::literal(Value::parse(&text, ty)?, ty))
            }
            A::Cast { expr, data_type, format: None, array: false, .. } if timestamp_precision(data_type).is_some_and(|(_, p)| p < 6) => {
                let (ty, precision) = timestamp_precision(data_type).unwrap_or((DataType::Timestamp, 6));
                let cast = A::Cast {
                    kind: ast::CastKind::Cast,
                    expr: expr.clone(),
                    data_type: if ty == DataType::Timestamp {
                        ast::DataType::Timestamp(None, ast::TimezoneInfo::None)
                    } else {
                        ast::DataType::Timestamp(None, ast::TimezoneInfo::WithTimeZone)
                    },
                    array: false,
                    format: None,
                };
                match self.bind(&cast)? {
                    Item::Typed(e) => Item::Typed(with_precision(e, precision)),
                    other => other,
                }
            }
            A::Cast { expr, data_type, format: None, array: false, .. } => {
                let to = sql_type(data_type)?;
                match self.bind(expr)? {
                    Item::Str(s) => Item::Typed(Expr::literal(Value::parse(&s, to)?.cast(to)?, to)),
                    Item::Null => Item::Typed(Expr::literal(Value::Null, to)),
                    Item::Param(i) => Item::Typed(self.resolve(Item::Param(i), to)?).cast_to(to),
                    Item::Typed(e) => {
                        check_castable(e.ty(), to)?;
                        Item::Typed(e).cast_to(to)
                    }
                }
            }
            A::UnaryOp { op, expr } => self.unary(*op, expr)?,
            A::BinaryOp { left, op, right } => self.binary(left, op, right)?,
            A::IsNull(x) => self.is_null(x, false)?,
            A::IsNotNull(x) => self.is_null(x, true)?,
            A::IsTrue(x) => self.is_bool(x, true, false)?,
            A::IsNotTrue(x) => self.is_bool(x, true, true)?,
            A::IsFalse(x) => self.is_bool(x, false, false)?,
            A::IsNotFalse(x) => self.is_bool(x, false, true)?,
            A::IsDistinctFrom(l, r) => self.distinct(l, r, false)?,
            A::IsNotDistinctFrom(l, r) => self.distinct(l, r, true)?,
            A::Between { expr, negated, low, high } => {
                let ge = self.comparison(expr, BinaryOp::GtEq, low)?;
                let le = self.comparison(expr, BinaryOp::LtEq, high)?;
                let both = Expr::Binary { op: BinaryOp::And, left: Box::new(ge), right: Box::new(le), ty: DataType::Bool };
                Item::Typed(if *negated { Expr::Not(Box::new(both)) } else { both })
            }
            A::InList { expr, list, negated } => self.in_list(expr, list, *negated)?,
            A::AnyOp { left, compare_op, right, .. } => self.quantified(left, compare_op, right, false)?,
            A::AllOp { left, compare_op, right } => self.quantified(left, compare_op, right, true)?,
            A::Like { negated, any: false, expr, pattern, escape_char: None } => self.like(expr, pattern, *negated, false)?,
            A::ILike { negated, any: false, expr, pattern, escape_char: None } => self.like(expr, pattern, *negated, true)?,
            A::Case { operand, conditions, else_result, .. } => self.case(operand.as_deref(), conditions, else_result.as_deref())?,
            A::Function(f) => self.function(f)?,
            A::Substring { expr, substring_from, substring_for, .. } => {
                let mut args = vec![self.bind_expr(expr, Some(DataType::Text))?];
                let from = match substring_from {
                    Some(f) => self.bind_expr(f, Some(DataType::Int64))?,
                    None => Expr::literal(Value::Int64(1), DataType::Int64),
                };
                args.push(from);
                if let Some(n) = substring_for {
                    args.push(self.bind_expr(n, Some(DataType::Int64))?);
                }
                self.call("substring", Func::Substring, args)?
            }
            A::Trim { expr, trim_where, trim_what, trim_characters: None } => {
                let func = match trim_where {
                    Some(ast::TrimWhereField::Leading) => Func::Ltrim,
                    Some(ast::TrimWhereField::Trailing) => Func::Rtrim,
                    _ => Func::Btrim,
                };
                let mut args = vec![self.bind_expr(expr, Some(DataType::Text))?];
                if let Some(w) = trim_what {
                    args.push(self.bind_expr(w, Some(DataType::Text))?);
                }
                self.call("trim", func, args)?
            }
            A::Extract { field, expr, .. } => {
                let name = extract_field(field)?;
                let value = self.bind_expr(expr, Some(DataType::Timestamp))?;
                if !matches!(value.ty().family(), TypeFamily::Date | TypeFamily::Timestamp) {
                    return Err(unsupported(format!("EXTRACT from {}", value.ty().pg_name())));
                }
                let args = vec![Expr::literal(Value::Text(name.into()), DataType::Text), value];
                Item::Typed(Expr::Func { func: Func::Extract, args, ty: DataType::Float64 })
            }
            A::Ceil { expr, field: ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime) } => {
                let arg = self.bind_expr(expr, Some(DataType::Float64))?;
                self.call("ceil", Func::Ceil, vec![arg])?
            }
            A::Floor { expr, field: ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime) } => {
                let arg = self.bind_expr(expr, Some(DataType::Float64))?;
                self.call("floor", Func::Floor, vec![arg])?
            }
            A::Subquery(_) | A::InSubquery { .. } | A::Exists { .. } => {
                return Err(unsupported("a subquery on the short-statement path"))
            }
            other => return Err(unsupported(format!("expression {other}"))),
        })
    }

    fn column(&mut self, qualifier: Option<&ast::Ident>, ident: &ast::Ident) -> Result<Item> {
        let name = fold_ident(ident);
        let Some(scope) = &self.scope else {
            // Without a table, a bare word is a column reference that cannot resolve.
            if ident.quote_style.is_none() && matches!(name.as_str(), "current_timestamp" | "localtimestamp" | "current_date") {
                return self.current_time(&name, None);
            }
            return Err(Error::undefined_column(&name));
        };
        if let Some(q) = qualifier {
            let q = fold_ident(q);
            if scope.excluded && q == "excluded" && !scope.qualifiers.contains(&q) {
                let width = scope.table.columns.len();
                return match scope.table.column_index(&name) {
                    Some(index) => Ok(Item::Typed(Expr::Column { index: width + index, ty: scope.table.columns[index].ty })),
                    None => Err(Error::new(SqlState::UndefinedColumn, format!("column excluded.{name} does not exist"))),
                };
            }
            if !scope.qualifiers.contains(&q) {
                return Err(Error::new(
                    SqlState::UndefinedTable,
                    format!("missing FROM-clause entry for table \"{q}\""),
                ));
            }
        }
        match scope.table.column_index(&name) {
            Some(index) => Ok(Item::Typed(Expr::Column { index, ty: scope.table.columns[index].ty })),
            None if qualifier.is_none()
                && ident.quote_style.is_none()
                && matches!(name.as_str(), "current_timestamp" | "localtimestamp" | "current_date") =>
            {
                self.current_time(&name, None)
            }
            None => Err(Error::undefined_column(&match qualifier {
                Some(q) => format!("{}.{name}", fold_ident(q)),
                None => name,
            })),
        }
    }

    fn literal(&mut self, v: &ast::Value) -> Result<Item> {
        Ok(match v {
            ast::Value::Number(text, _) => Item::Typed(number_literal(text)?),
            ast::Value::SingleQuotedString(s)
            | ast::Value::EscapedStringLiteral(s)
            | ast::Value::NationalStringLiteral(s) => {
                if s.contains('\0') {
                    return Err(Error::new(SqlState::CharacterNotInRepertoire, "invalid byte sequence for encoding \"UTF8\": 0x00"));
                }
                Item::Str(s.clone())
            }
            ast::Value::DollarQuotedString(s) => Item::Str(s.value.clone()),
            ast::Value::Boolean(b) => Item::Typed(Expr::literal(Value::Bool(*b), DataType::Bool)),
            ast::Value::Null => Item::Null,
            ast::Value::Placeholder(p) => {
                let i = self.param_index(p)?;
                match self.params[i] {
                    Some(ty) => Item::Typed(Expr::Param { index: i, ty }),
                    None => Item::Param(i),
                }
            }
            other => return Err(unsupported(format!("literal {other}"))),
        })
    }

    fn unary(&mut self, op: ast::UnaryOperator, expr: &ast::Expr) -> Result<Item> {
        match op {
            ast::UnaryOperator::Not => {
                let e = self.bind_expr(expr, Some(DataType::Bool))?;
                if e.ty() != DataType::Bool {
                    return Err(Error::mismatch(format!(
                        "argument of NOT must be type boolean, not type {}",
                        e.ty().pg_name()
                    )));
                }
                Ok(Item::Typed(Expr::Not(Box::new(e))))
            }
            ast::UnaryOperator::Minus => match self.bind(expr)? {
                Item::Typed(Expr::Literal { value, ty }) if ty.is_numeric() => {
                    let v = super::expr::binary(BinaryOp::Sub, Value::Int64(0), value.clone(), ty)
                        .or_else(|_| match value {
                            Value::Int64(i) => i.checked_neg().map(Value::Int64).ok_or_else(|| Error::out_of_range("bigint")),
                            other => Ok(other),
                        })?;
                    Ok(Item::Typed(Expr::literal(v, ty)))
                }
                item => {
                    let e = self.resolve(item, DataType::Float64)?;
                    if !e.ty().is_numeric() {
                        return Err(operator_error("-", None, e.ty()));
                    }
                    let ty = e.ty();
                    Ok(Item::Typed(Expr::Negate { expr: Box::new(e), ty }))
                }
            },
            ast::UnaryOperator::Plus => Ok(Item::Typed(self.bind_expr(expr, Some(DataType::Float64))?)),
            other => Err(unsupported(format!("operator {other}"))),
        }
    }

    fn binary(&mut self, left: &ast::Expr, op: &ast::BinaryOperator, right: &ast::Expr) -> Result<Item> {
        use ast::BinaryOperator as B;
        let op = match op {
            B::Plus => BinaryOp::Add,
            B::Minus => BinaryOp::Sub,
            B::Multiply => BinaryOp::Mul,
            B::Divide => BinaryOp::Div,
            B::Modulo => BinaryOp::Mod,
            B::And => BinaryOp::And,
            B::Or => BinaryOp::Or,
            B::StringConcat => BinaryOp::Concat,
            other => comparison_op(other).ok_or_else(|| unsupported(format!("operator {other}")))?,
        };
        if let Some(item) = self.interval_arithmetic(left, op, right)? {
            return Ok(Item::Typed(item));
        }
        Ok(Item::Typed(match op {
            BinaryOp::And | BinaryOp::Or => {
                let l = self.bind_expr(left, Some(DataType::Bool))?;
                let r = self.bind_expr(right, Some(DataType::Bool))?;
                for side in [&l, &r] {
                    if side.ty() != DataType::Bool {
                        return Err(Error::mismatch(format!(
                            "argument of {} must be type boolean, not type {}",
                            op.symbol(),
                            side.ty().pg_name()
                        )));
                    }
                }
                Expr::Binary { op, left: Box::new(l), right: Box::new(r), ty: DataType::Bool }
            }
            BinaryOp::Concat => {
                let l = self.bind_expr(left, Some(DataType::Text))?;
                let r = self.bind_expr(right, Some(DataType::Text))?;
                if !l.ty().is_string() && !r.ty().is_string() {
                    return Err(operator_error("||", Some(l.ty()), r.ty()));
                }
                Expr::Binary { op, left: Box::new(shown(l)), right: Box::new(shown(r)), ty: DataType::Text }
            }
            op if op.is_comparison() => self.comparison(left, op, right)?,
            op => {
                let (l, r) = self.pair(left, right)?;
                let ty = arithmetic_type(op, l.ty(), r.ty())?;
                Expr::Binary { op, left: Box::new(l), right: Box::new(r), ty }
            }
        }))
    }

    /// `t + INTERVAL '…'`, `INTERVAL '…' + t` and `t - INTERVAL '…'` for a date or timestamp `t`
    /// and a constant interval, or a constant interval scaled by a number (`n * INTERVAL
    /// '1 minute'`, `INTERVAL '1 day' * n`, `INTERVAL '1 hour' / n`, [`Interval::scaled`]):
    /// `t` moved by the interval (PostgreSQL's result types: a date becomes a timestamp).
    /// `None` if neither side is an interval of those forms.
    ///
    /// [`Interval::scaled`]: crate::types::datetime::Interval::scaled
    fn interval_arithmetic(&mut self, left: &ast::Expr, op: BinaryOp, right: &ast::Expr) -> Result<Option<Expr>> {
        let (subject, term, negate) = match (op, interval_term(left), interval_term(right)) {
            (BinaryOp::Add | BinaryOp::Sub, _, Some(term)) => (left, term, op == BinaryOp::Sub),
            (BinaryOp::Add, Some(term), _) => (right, term, false),
            (_, Some(_), _) | (_, _, Some(_)) => {
                return Err(unsupported(format!("operator {} with an interval", op.symbol())));
            }
            _ => return Ok(None),
        };
        let interval = term.interval?;
        let interval = if negate { interval.negated() } else { interval };
        let t = self.bind_expr(subject, Some(DataType::Timestamp))?;
        if !matches!(t.ty().family(), TypeFamily::Date | TypeFamily::Timestamp) {
            return Err(Error::new(SqlState::UndefinedFunction, format!("operator does not exist: {} {} interval", t.ty().pg_name(), op.symbol()))
                .with_hint("No operator matches the given name and argument types. You might need to add explicit type casts."));
        }
        let ty = if t.ty() == DataType::TimestampTz { DataType::TimestampTz } else { DataType::Timestamp };
        let mut args = vec![
            t,
            Expr::literal(Value::Int32(interval.months), DataType::Int32),
            Expr::literal(Value::Int32(interval.days), DataType::Int32),
            Expr::literal(Value::Int64(interval.micros), DataType::Int64),
        ];
        if let Some((factor, divide)) = term.factor {
            let factor = self.bind_expr(factor, Some(DataType::Float64))?;
            if !factor.ty().is_numeric() {
                let symbol = if divide { "/" } else { "*" };
                return Err(Error::new(SqlState::UndefinedFunction, format!("operator does not exist: interval {symbol} {}", factor.ty().pg_name()))
                    .with_hint("No operator matches the given name and argument types. You might need to add explicit type casts."));
            }
            args.push(Expr::Cast { expr: Box::new(factor), to: DataType::Float64 });
            args.push(Expr::literal(Value::Bool(divide), DataType::Bool));
        }
        Ok(Some(Expr::Func { func: Func::AddInterval, args, ty }))
    }

    /// Binds two operands, giving an open side the other side's type.
    fn pair(&mut self, left: &ast::Expr, right: &ast::Expr) -> Result<(Expr, Expr)> {
        let (l, r) = (self.bind(left)?, self.bind(right)?);
        match (l, r) {
            (Item::Typed(l), r) => {
                let ty = l.ty();
                Ok((l, self.resolve(r, ty)?))
            }
            (l, Item::Typed(r)) => {
                let ty = r.ty();
                Ok((self.resolve(l, ty)?, r))
            }
            (l, r) => Ok((self.resolve(l, DataType::Text)?, self.resolve(r, DataType::Text)?)),
        }
    }

    pub fn comparison(&mut self, left: &ast::Expr, op: BinaryOp, right: &ast::Expr) -> Result<Expr> {
        let (l, r) = self.pair(left, right)?;
        check_comparable(l.ty(), r.ty(), op.symbol())?;
        Ok(Expr::Binary { op, left: Box::new(l), right: Box::new(r), ty: DataType::Bool })
    }

    fn is_null(&mut self, e: &ast::Expr, negated: bool) -> Result<Item> {
        let e = self.bind_expr(e, None)?;
        Ok(Item::Typed(Expr::IsNull { expr: Box::new(e), negated }))
    }

    fn is_bool(&mut self, e: &ast::Expr, value: bool, negated: bool) -> Result<Item> {
        let e = self.bind_expr(e, Some(DataType::Bool))?;
        if e.ty() != DataType::Bool {
            return Err(Error::mismatch(format!("argument of IS {} must be type boolean", if value { "TRUE" } else { "FALSE" })));
        }
        Ok(Item::Typed(Expr::IsBool { expr: Box::new(e), value, negated }))
    }

    fn distinct(&mut self, l: &ast::Expr, r: &ast::Expr, negated: bool) -> Result<Item> {
        let (l, r) = self.pair(l, r)?;
        check_comparable(l.ty(), r.ty(), "IS DISTINCT FROM")?;
        Ok(Item::Typed(Expr::IsDistinct { left: Box::new(l), right: Box::new(r), negated }))
    }

    fn in_list(&mut self, expr: &ast::Expr, list: &[ast::Expr], negated: bool) -> Result<Item> {
        let subject = self.bind(expr)?;
        let items: Vec<Item> = list.iter().map(|e| self.bind(e)).collect::<Result<_>>()?;
        let mut types: Vec<DataType> = items.iter().filter_map(|i| if let Item::Typed(e) = i { Some(e.ty()) } else { None }).collect();
        if let Item::Typed(e) = &subject {
            types.insert(0, e.ty());
        }
        let ty = if types.is_empty() { DataType::Text } else { functions::common_type(&types)? };
        let subject = self.resolve(subject, ty)?;
        let list = items.into_iter().map(|i| self.resolve(i, ty)).collect::<Result<Vec<_>>>()?;
        for e in &list {
            check_comparable(subject.ty(), e.ty(), "IN")?;
        }
        Ok(Item::Typed(Expr::InList { expr: Box::new(subject), list, negated }))
    }

    /// `x op ANY (ARRAY[…])` (`SOME`) and `x op ALL (ARRAY[…])`: `x IN (…)` for `= ANY`, `x NOT IN
    /// (…)` for `<> ALL` (so a key's lookups can use the list), otherwise the comparisons joined
    /// by OR (ANY) or AND (ALL), which give the same three-valued result: true if one (every)
    /// comparison is, else NULL if one is NULL, else false. Over an empty array ANY is false
    /// and ALL true, whatever `x`; over anything but an `ARRAY[…]` of values, a subquery on
    /// the analytical side.
    fn quantified(&mut self, left: &ast::Expr, op: &ast::BinaryOperator, right: &ast::Expr, all: bool) -> Result<Item> {
        use ast::BinaryOperator as B;
        let quantifier = if all { "ALL" } else { "ANY" };
        let mut right = right;
        while let ast::Expr::Nested(inner) = right {
            right = inner;
        }
        // An array's text form, `'{1,2}'` or `'{1,2}'::int[]`: its elements, as literals.
        let written = array_text_elements(right)?.map(|elem| ast::Expr::Array(ast::Array { elem, named: true }));
        let right = written.as_ref().unwrap_or(right);
        let ast::Expr::Array(array) = right else {
            return Err(unsupported(format!("{quantifier} over {right}")));
        };
        if array.elem.is_empty() && written.is_some() {
            // `x = ANY('{}')`: an empty array of the element type.
            return Ok(Item::Typed(Expr::literal(Value::Bool(all), DataType::Bool)));
        }
        if array.elem.iter().any(|e| matches!(e, ast::Expr::Array(_))) {
            return Err(unsupported(format!("{quantifier} over a multi-dimensional array")));
        }
        if array.elem.is_empty() {
            return Err(Error::new(SqlState::Custom("42P18"), "cannot determine type of empty array")
                .with_hint("Explicitly cast to the desired type, for example ARRAY[]::integer[]."));
        }
        let op = match op {
            B::Eq if !all => return self.in_list(left, &array.elem, false),
            B::NotEq if all => return self.in_list(left, &array.elem, true),
            other => comparison_op(other).ok_or_else(|| unsupported(format!("operator {other} {quantifier}")))?,
        };
        let join = if all { BinaryOp::And } else { BinaryOp::Or };
        let mut level: Vec<Expr> = array.elem.iter().map(|e| self.comparison(left, op, e)).collect::<Result<_>>()?;
        // Joined pairwise, level by level: a long array makes a shallow tree, not a chain as
        // deep as the array is long (which evaluation and drop would recurse down).
        while level.len() > 1 {
            let mut next = Vec::with_capacity(level.len().div_ceil(2));
            let mut items = level.into_iter();
            while let Some(a) = items.next() {
                next.push(match items.next() {
                    Some(b) => Expr::Binary { op: join, left: Box::new(a), right: Box::new(b), ty: DataType::Bool },
                    None => a,
                });
            }
            level = next;
        }
        Ok(Item::Typed(level.pop().expect("not empty")))
    }

    fn like(&mut self, expr: &ast::Expr, pattern: &ast::Expr, negated: bool, ci: bool) -> Result<Item> {
        let e = self.bind_expr(expr, Some(DataType::Text))?;
        let p = self.bind_expr(pattern, Some(DataType::Text))?;
        if !e.ty().is_string() || !p.ty().is_string() {
            return Err(operator_error(if ci { "~~*" } else { "~~" }, Some(e.ty()), p.ty()));
        }
        Ok(Item::Typed(Expr::Like { expr: Box::new(e), pattern: Box::new(p), negated, case_insensitive: ci }))
    }

    fn case(&mut self, operand: Option<&ast::Expr>, conditions: &[ast::CaseWhen], otherwise: Option<&ast::Expr>) -> Result<Item> {
        let operand = operand.map(|o| self.bind_expr(o, None)).transpose()?;
        let mut whens = Vec::with_capacity(conditions.len());
        let mut results = Vec::with_capacity(conditions.len() + 1);
        for c in conditions {
            let w = match &operand {
                Some(o) => {
                    let item = self.bind(&c.condition)?;
                    let w = self.resolve(item, o.ty())?;
                    check_comparable(o.ty(), w.ty(), "=")?;
                    w
                }
                None => {
                    let w = self.bind_expr(&c.condition, Some(DataType::Bool))?;
                    if w.ty() != DataType::Bool {
                        return Err(Error::mismatch(format!(
                            "argument of CASE/WHEN must be type boolean, not type {}",
                            w.ty().pg_name()
                        )));
                    }
                    w
                }
            };
            whens.push(w);
            results.push(self.bind(&c.result)?);
        }
        if let Some(e) = otherwise {
            results.push(self.bind(e)?);
        }
        let types: Vec<DataType> = results.iter().filter_map(|i| if let Item::Typed(e) = i { Some(e.ty()) } else { None }).collect();
        let ty = if types.is_empty() { DataType::Text } else { functions::common_type(&types)? };
        let mut results: Vec<Expr> = results.into_iter().map(|i| self.resolve(i, ty)).collect::<Result<_>>()?;
        let otherwise = if otherwise.is_some() { results.pop().map(Box::new) } else { None };
        Ok(Item::Typed(Expr::Case {
            operand: operand.map(Box::new),
            whens: whens.into_iter().zip(results).collect(),
            otherwise,
            ty,
        }))
    }

    /// Whether a call of `name` (not an aggregate) is one the short path evaluates.
    pub fn knows_function(name: &str) -> bool {
        matches!(name, "current_timestamp" | "localtimestamp") || functions::lookup(name).is_some()
    }

    fn function(&mut self, f: &ast::Function) -> Result<Item> {
        let name = f.name.0.last().and_then(|p| p.as_ident()).map(fold_ident).unwrap_or_default();
        if f.over.is_some() || f.filter.is_some() || is_aggregate(&name) {
            return Err(unsupported(format!("aggregate or window function {name} on the short-statement path")));
        }
        if matches!(name.as_str(), "current_timestamp" | "localtimestamp") && f.name.0.len() == 1 {
            return self.current_time(&name, current_time_precision(&f.args)?);
        }
        let func = functions::lookup(&name).ok_or_else(|| unsupported(format!("function {name} on the short-statement path")))?;
        let args: Vec<&ast::Expr> = match &f.args {
            ast::FunctionArguments::None => vec![],
            ast::FunctionArguments::List(list) => {
                if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
                    return Err(unsupported(format!("arguments of {name}")));
                }
                list.args
                    .iter()
                    .map(|a| match a {
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Ok(e),
                        _ => Err(unsupported(format!("arguments of {name}"))),
                    })
                    .collect::<Result<_>>()?
            }
            ast::FunctionArguments::Subquery(_) => return Err(unsupported("a subquery as function argument")),
        };
        let items: Vec<Item> = args.iter().map(|a| self.bind(a)).collect::<Result<_>>()?;
        // Open arguments take the common type of the typed ones for the variadic functions,
        // and a per-function default otherwise.
        let typed: Vec<DataType> = items.iter().filter_map(|i| if let Item::Typed(e) = i { Some(e.ty()) } else { None }).collect();
        let default = match func {
            Func::Coalesce | Func::Greatest | Func::Least | Func::NullIf if !typed.is_empty() => functions::common_type(&typed)?,
            Func::Abs | Func::Round | Func::Floor | Func::Ceil | Func::PgSleep => DataType::Float64,
            Func::Mod | Func::Advisory(_) => DataType::Int64,
            _ => DataType::Text,
        };
        let mut bound = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            let hint = match (func, i) {
                (Func::Substring, 1 | 2) | (Func::Round, 1) => DataType::Int64,
                _ => default,
            };
            bound.push(self.resolve(item, hint)?);
        }
        self.call(&name, func, bound)
    }

    /// `CURRENT_TIMESTAMP`, `LOCALTIMESTAMP` (the statement's start time as an instant, or as
    /// the wall time of the session's zone, UTC) or `CURRENT_DATE`, rounded to `precision`
    /// fractional digits if one is given.
    fn current_time(&mut self, name: &str, precision: Option<u64>) -> Result<Item> {
        if name == "current_date" {
            return self.call(name, Func::CurrentDate, vec![]);
        }
        let now = Expr::Func { func: Func::Now, args: vec![], ty: DataType::TimestampTz };
        let now = if name == "localtimestamp" { Expr::Cast { expr: Box::new(now), to: DataType::Timestamp } } else { now };
        Ok(Item::Typed(with_precision(now, precision.unwrap_or(6))))
    }

    fn call(&mut self, name: &str, func: Func, args: Vec<Expr>) -> Result<Item> {
        let types: Vec<DataType> = args.iter().map(Expr::ty).collect();
        let mut ty = functions::result_type(name, func, &types)?;
        // A numeric rounded has the scale asked for, as in PostgreSQL: round(x) and floor(x)
        // are integral, round(x, k) with a constant k has scale k.
        if let DataType::Decimal { precision, scale } = ty {
            // A constant k, possibly widened to the argument's type (a literal is int4).
            let constant = |e: &Expr| match e {
                Expr::Literal { value, .. } => value.as_i64(),
                Expr::Cast { expr, .. } => match expr.as_ref() {
                    Expr::Literal { value, .. } => value.as_i64(),
                    _ => None,
                },
                _ => None,
            };
            let asked = match (func, args.get(1)) {
                (Func::Round, Some(k)) => constant(k).map(|k| k.clamp(0, MAX_DECIMAL_PRECISION as i64) as u8),
                (Func::Round | Func::Floor | Func::Ceil, None) => Some(0),
                _ => None,
            };
            if let Some(k) = asked {
                ty = DataType::Decimal { precision: (precision - scale + k + 1).min(MAX_DECIMAL_PRECISION), scale: k };
            }
        }
        Ok(Item::Typed(Expr::Func { func, args, ty }))
    }
}

impl Item {
    fn cast_to(self, to: DataType) -> Item {
        match self {
            Item::Typed(e) if e.ty() == to => Item::Typed(e),
            Item::Typed(e) if to.is_string() => Item::Typed(Expr::Cast { expr: Box::new(shown(e)), to }),
            Item::Typed(e) => Item::Typed(Expr::Cast { expr: Box::new(e), to }),
            other => other,
        }
    }
}

/// A numeric literal: BIGINT if it is an integer that fits, NUMERIC otherwise (the analytical
/// side reads literals with a fraction as decimals too).
pub fn number_literal(text: &str) -> Result<Expr> {
    // As PostgreSQL: integer if it fits, else bigint (the analytical side's rewrite agrees,
    // `freshet_olap::rewrite::integer_literals`).
    if let Ok(i) = text.parse::<i32>() {
        return Ok(Expr::literal(Value::Int32(i), DataType::Int32));
    }
    if let Ok(i) = text.parse::<i64>() {
        return Ok(Expr::literal(Value::Int64(i), DataType::Int64));
    }
    // A literal beyond NUMERIC(38) (like 1e300) is a double precision, not an error.
    let Ok(d) = Decimal::parse(text) else {
        return match text.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(Expr::literal(Value::Float64(f), DataType::Float64)),
            _ => Err(Error::new(SqlState::NumericValueOutOfRange, format!("numeric literal {text} is out of range"))),
        };
    };
    let digits = if d.value == 0 { 1 } else { d.value.unsigned_abs().ilog10() as u8 + 1 };
    let precision = digits.max(d.scale).max(1);
    if precision > 38 {
        return Ok(Expr::literal(Value::Float64(text.parse().unwrap_or(f64::NAN)), DataType::Float64));
    }
    Ok(Expr::literal(Value::Decimal(d), DataType::Decimal { precision, scale: d.scale }))
}

fn operator_error(op: &str, left: Option<DataType>, right: DataType) -> Error {
    let text = match left {
        Some(l) => format!("operator does not exist: {} {op} {}", l.pg_name(), right.pg_name()),
        None => format!("operator does not exist: {op} {}", right.pg_name()),
    };
    Error::new(SqlState::UndefinedFunction, text)
        .with_hint("No operator matches the given name and argument types. You might need to add explicit type casts.")
}

pub fn check_comparable(l: DataType, r: DataType, op: &str) -> Result<()> {
    use TypeFamily::*;
    let ok = match (l.family(), r.family()) {
        (a, b) if a == b => true,
        (Integer | Decimal | Float, Integer | Decimal | Float) => true,
        (Date | Timestamp, Date | Timestamp) => true,
        _ => false,
    };
    if ok { Ok(()) } else { Err(operator_error(op, Some(l), r)) }
}

fn check_castable(from: DataType, to: DataType) -> Result<()> {
    use TypeFamily::*;
    let ok = matches!(
        (from.family(), to.family()),
        (_, String)
            | (String, _)
            | (Integer | Decimal | Float, Integer | Decimal | Float)
            | (Bool, Bool)
            | (Bool, Integer)
            | (Integer, Bool)
            | (Date | Timestamp, Date | Timestamp)
    );
    if ok {
        Ok(())
    } else {
        Err(Error::new(
            SqlState::CannotCoerce,
            format!("cannot cast type {} to {}", from.pg_name(), to.pg_name()),
        ))
    }
}

fn extract_field(field: &ast::DateTimeField) -> Result<&'static str> {
    use ast::DateTimeField as F;
    Ok(match field {
        F::Year => "year",
        F::Month => "month",
        F::Day => "day",
        F::Hour => "hour",
        F::Minute => "minute",
        F::Second => "second",
        F::Dow => "dow",
        F::Doy => "doy",
        F::Quarter => "quarter",
        F::Epoch => "epoch",
        other => return Err(unsupported(format!("EXTRACT field {other}"))),
    })
}

/// An interval operand of `+` or `-`: a constant, or a constant scaled by a number (the
/// number's expression, and whether it divides).
struct IntervalTerm<'a> {
    interval: Result<crate::types::datetime::Interval>,
    factor: Option<(&'a ast::Expr, bool)>,
}

/// The interval term an expression spells (see [`IntervalTerm`]); `None` if it is not one.
fn interval_term(e: &ast::Expr) -> Option<IntervalTerm<'_>> {
    if let Some(interval) = interval_constant(e) {
        return Some(IntervalTerm { interval, factor: None });
    }
    match e {
        ast::Expr::Nested(inner) => interval_term(inner),
        ast::Expr::BinaryOp { left, op: ast::BinaryOperator::Multiply, right } => match (interval_constant(left), interval_constant(right)) {
            (_, Some(interval)) => Some(IntervalTerm { interval, factor: Some((left, false)) }),
            (Some(interval), _) => Some(IntervalTerm { interval, factor: Some((right, false)) }),
            _ => None,
        },
        ast::Expr::BinaryOp { left, op: ast::BinaryOperator::Divide, right } => {
            interval_constant(left).map(|interval| IntervalTerm { interval, factor: Some((right, true)) })
        }
        _ => None,
    }
}

/// The interval an expression spells as a constant (`INTERVAL '1 day'`, `INTERVAL '5' MINUTE`,
/// `'1 day'::interval`), parsed; `None` if it is not one.
pub fn interval_constant(e: &ast::Expr) -> Option<Result<crate::types::datetime::Interval>> {
    use crate::types::datetime::parse_interval;
    let text = |v: &ast::Expr| match v {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) => Some(s.clone()),
            ast::Value::Number(n, _) => Some(n.clone()),
            _ => None,
        },
        _ => None,
    };
    match e {
        ast::Expr::Nested(inner) => interval_constant(inner),
        ast::Expr::Interval(iv) => {
            let unit = iv.leading_field.as_ref().map(|f| f.to_string().to_ascii_lowercase());
            Some(parse_interval(&text(&iv.value)?, unit.as_deref()))
        }
        ast::Expr::Cast { expr, data_type: ast::DataType::Interval { .. }, .. } => Some(parse_interval(&text(expr)?, None)),
        ast::Expr::TypedString(ts) if matches!(ts.data_type, ast::DataType::Interval { .. }) => match &ts.value.value {
            ast::Value::SingleQuotedString(s) => Some(parse_interval(s, None)),
            _ => None,
        },
        _ => None,
    }
}

/// A SQL type name from the parser's AST.
pub fn sql_type(t: &ast::DataType) -> Result<DataType> {
    use ast::DataType as T;
    if let Some((ty, precision)) = timestamp_precision(t) {
        // timestamp(6) (and above, which PostgreSQL reduces to 6) is the type itself; a
        // coarser precision is kept by a column (`column_type`) or applied by a cast, and
        // refused anywhere else (ALTER COLUMN … TYPE, a routine's variable).
        return if precision >= 6 {
            Ok(ty)
        } else {
            Err(Error::unsupported(format!("type {t} here (a timestamp precision below 6 is kept by a column's type or a cast)")))
        };
    }
    let len = |l: &Option<ast::CharacterLength>| -> Vec<u64> {
        match l {
            Some(ast::CharacterLength::IntegerLength { length, .. }) => vec![*length],
            _ => vec![],
        }
    };
    let exact = |info: &ast::ExactNumberInfo| -> Vec<u64> {
        match info {
            ast::ExactNumberInfo::None => vec![],
            ast::ExactNumberInfo::Precision(p) => vec![*p],
            ast::ExactNumberInfo::PrecisionAndScale(p, s) => vec![*p, (*s).max(0) as u64],
        }
    };
    match t {
        T::Boolean | T::Bool => DataType::from_sql_name("boolean", &[]),
        T::SmallInt(_) | T::Int2(_) => DataType::from_sql_name("smallint", &[]),
        T::Int(_) | T::Integer(_) | T::Int4(_) => DataType::from_sql_name("integer", &[]),
        T::BigInt(_) | T::Int8(_) => DataType::from_sql_name("bigint", &[]),
        T::Real | T::Float4 => DataType::from_sql_name("real", &[]),
        T::DoublePrecision | T::Double(_) | T::Float8 => DataType::from_sql_name("double precision", &[]),
        T::Float(info) => DataType::from_sql_name("float", &exact(info)),
        T::Numeric(info) | T::Decimal(info) | T::Dec(info) => DataType::from_sql_name("numeric", &exact(info)),
        T::Char(l) | T::Character(l) => DataType::from_sql_name("char", &len(l)),
        T::Varchar(l) | T::CharacterVarying(l) | T::CharVarying(l) => DataType::from_sql_name("varchar", &len(l)),
        T::Text | T::String(_) => DataType::from_sql_name("text", &[]),
        T::Date => DataType::from_sql_name("date", &[]),
        T::Uuid => DataType::from_sql_name("uuid", &[]),
        // A relation named by text: what the sequence functions take (`nextval('s'::regclass)`,
        // as pg_dump and psql's \d write column defaults).
        T::Regclass => Ok(DataType::Text),
        T::Timestamp(None, ast::TimezoneInfo::None | ast::TimezoneInfo::WithoutTimeZone) => {
            DataType::from_sql_name("timestamp", &[])
        }
        T::Timestamp(None, ast::TimezoneInfo::WithTimeZone | ast::TimezoneInfo::Tz) => DataType::from_sql_name("timestamptz", &[]),
        T::Custom(name, mods) => {
            let n = name.0.last().and_then(|p| p.as_ident()).map(fold_ident).unwrap_or_default();
            let mods: Vec<u64> = mods.iter().filter_map(|m| m.parse().ok()).collect();
            DataType::from_sql_name(&n, &mods)
        }
        other => Err(Error::unsupported(format!("type {other}"))),
    }
}

/// The type of a column and, for `timestamp(p)` with p below 6, the precision its values are
/// rounded to.
pub fn column_type(t: &ast::DataType) -> Result<(DataType, Option<u8>)> {
    match timestamp_precision(t) {
        Some((ty, p)) if p < 6 => Ok((ty, Some(p as u8))),
        _ => Ok((sql_type(t)?, None)),
    }
}

/// The type and precision of a timestamp type written with a precision: `timestamp(p)`,
/// `timestamp(p) with time zone`, `timestamptz(p)`.
pub fn timestamp_precision(t: &ast::DataType) -> Option<(DataType, u64)> {
    match t {
        ast::DataType::Timestamp(Some(p), ast::TimezoneInfo::None | ast::TimezoneInfo::WithoutTimeZone) => Some((DataType::Timestamp, *p)),
        ast::DataType::Timestamp(Some(p), ast::TimezoneInfo::WithTimeZone | ast::TimezoneInfo::Tz) => Some((DataType::TimestampTz, *p)),
        ast::DataType::Custom(name, mods) if mods.len() == 1 => {
            let ty = match name.0.last().and_then(|p| p.as_ident()).map(fold_ident)?.as_str() {
                "timestamp" => DataType::Timestamp,
                "timestamptz" => DataType::TimestampTz,
                _ => return None,
            };
            Some((ty, mods[0].parse().ok()?))
        }
        _ => None,
    }
}

/// The precision of `CURRENT_TIMESTAMP(p)` / `LOCALTIMESTAMP(p)`: an unsigned integer
/// constant, as PostgreSQL's grammar requires.
pub fn current_time_precision(args: &ast::FunctionArguments) -> Result<Option<u64>> {
    let bad = || Error::syntax("CURRENT_TIMESTAMP and LOCALTIMESTAMP take an integer constant precision");
    match args {
        ast::FunctionArguments::None => Ok(None),
        ast::FunctionArguments::List(list) if list.args.is_empty() => Err(bad()),
        ast::FunctionArguments::List(list) => match list.args.as_slice() {
            [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(ast::Expr::Value(v)))] => match &v.value {
                ast::Value::Number(n, _) => n.parse().map(Some).map_err(|_| bad()),
                _ => Err(bad()),
            },
            _ => Err(bad()),
        },
        ast::FunctionArguments::Subquery(_) => Err(bad()),
    }
}

/// `e` as text output shows it: a NUMERIC without a declared scale loses the trailing zeros
/// of its storage scale (`1.5`, not `1.5000000000`), as when it is a result column.
fn shown(e: Expr) -> Expr {
    if e.ty() != crate::types::DEFAULT_NUMERIC {
        return e;
    }
    Expr::Func { func: Func::ShownNumeric, args: vec![e], ty: crate::types::DEFAULT_NUMERIC }
}

/// Wraps `e` (a timestamp) to round it to `precision` fractional digits, if that is coarser
/// than the microsecond.
fn with_precision(e: Expr, precision: u64) -> Expr {
    if precision >= 6 {
        return e;
    }
    let ty = e.ty();
    Expr::Func { func: Func::TimePrecision, args: vec![e, Expr::literal(Value::Int32(precision as i32), DataType::Int32)], ty }
}

/// The comparison an operator is (`=`, `<>`, `<`, `<=`, `>`, `>=`), if it is one.
fn comparison_op(op: &ast::BinaryOperator) -> Option<BinaryOp> {
    use ast::BinaryOperator as B;
    Some(match op {
        B::Eq => BinaryOp::Eq,
        B::NotEq => BinaryOp::NotEq,
        B::Lt => BinaryOp::Lt,
        B::LtEq => BinaryOp::LtEq,
        B::Gt => BinaryOp::Gt,
        B::GtEq => BinaryOp::GtEq,
        _ => return None,
    })
}

/// The elements of an array written in its text form, `'{1,"a b",NULL}'` or `'{1,2}'::int[]`
/// (as the right side of ANY or ALL): each a string literal (cast to the element type if the
/// text is) or NULL; `None` if `e` is not such text.
pub fn array_text_elements(e: &ast::Expr) -> Result<Option<Vec<ast::Expr>>> {
    let (text, elem) = match e {
        ast::Expr::Value(v) if let ast::Value::SingleQuotedString(text) = &v.value => (text, None),
        ast::Expr::Cast { expr, data_type: ast::DataType::Array(elem), .. }
            if let ast::Expr::Value(v) = expr.as_ref()
                && let ast::Value::SingleQuotedString(text) = &v.value =>
        {
            let elem = match elem {
                ast::ArrayElemTypeDef::AngleBracket(t) | ast::ArrayElemTypeDef::SquareBracket(t, _) | ast::ArrayElemTypeDef::Parenthesis(t) => Some(t.as_ref().clone()),
                ast::ArrayElemTypeDef::None => None,
            };
            (text, elem)
        }
        _ => return Ok(None),
    };
    let items = crate::sql::plpgsql::parse_array_text(text, DataType::Text)?;
    let element = |v: Value| {
        let literal = match v {
            Value::Text(t) => ast::Value::SingleQuotedString(t),
            _ => ast::Value::Null,
        };
        let e = ast::Expr::Value(literal.with_empty_span());
        match &elem {
            Some(t) => ast::Expr::Cast { kind: ast::CastKind::Cast, expr: Box::new(e), data_type: t.clone(), array: false, format: None },
            None => e,
        }
    };
    Ok(Some(items.into_iter().map(element).collect()))
}
