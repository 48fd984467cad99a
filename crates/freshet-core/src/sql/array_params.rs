//! A client's parameters of array type: `WHERE id = ANY($1)` bound to an `int4[]`,
//! `x <> ALL($1::text[])`, `unnest($1::int[])`.
//!
//! A statement's parameters are scalars (a [`Value`](crate::types::Value) holds no array),
//! so a statement with an array parameter runs in a form made for the array's length, as a
//! routine's statements with array variables do ([`super::plpgsql::spread`]): in place of
//! the comparison `x op ANY($n)`, `(x op ANY(ARRAY[$a, …]))`, and in place of the array
//! anywhere else `ARRAY[$a, …]`, one parameter per element after the statement's own. A
//! parameter only compared with has few forms (its length is rounded up,
//! [`spread_length`], the last element repeated, which changes no ANY or ALL result); one
//! used as a value has one per length.
//!
//! Which parameters are arrays: one compared with by ANY or ALL (whose element type is then
//! the left side's, unless a cast or the client says it), one cast to an array type
//! (`$1::int[]`), one the client declared as an array type; such a parameter is an array
//! wherever else it appears too. Any other parameter is a scalar.

use std::ops::ControlFlow;

use sqlparser::ast::{self, Visit, VisitMut, Visitor, VisitorMut};

use super::bind::sql_type;
use super::parse::placeholder_index as placeholder;
use super::plpgsql::spread::{array_form, replace, spread_length, MAX_FORM_PARAMETERS};
use crate::error::{Error, Result, SqlState};
use crate::types::DataType;

/// A parameter of array type.
#[derive(Clone, Debug, PartialEq)]
pub struct ArrayParam {
    /// Which parameter: `$1` is 0.
    pub index: usize,
    /// Its element type, when a cast to an array type or the client's declaration says it.
    pub elem: Option<DataType>,
    /// Whether the statement uses the array as a value (not only compared with its
    /// elements): its forms then have exactly the array's length.
    pub whole: bool,
}

impl ArrayParam {
    /// The length of the form for an array of `n` elements (`None`: NULL), the key forms
    /// are kept by.
    pub fn form_length(&self, n: Option<usize>) -> Option<usize> {
        n.map(|n| if self.whole { n } else { spread_length(n) })
    }
}

/// The parameters of `statement` that are arrays, in order of their number, and the count
/// of its parameters (the highest number written, or declared). `declared` holds the types
/// the client declared (for an array, its element type), `arrays` whether it declared an
/// array type.
pub fn find(statement: &ast::Statement, declared: &[Option<DataType>], arrays: &[bool]) -> Result<(Vec<ArrayParam>, usize)> {
    let mut finder = Finder { found: Vec::new(), inner: Vec::new(), bare: Vec::new(), count: declared.len().max(arrays.len()), error: None };
    let _ = statement.visit(&mut finder);
    if let Some(e) = finder.error {
        return Err(e);
    }
    let mut found = finder.found;
    for (n, declared_array) in arrays.iter().enumerate() {
        if *declared_array {
            found.push(ArrayParam { index: n, elem: declared.get(n).copied().flatten(), whole: false });
        }
    }
    found.sort_by_key(|p| p.index);
    let mut params: Vec<ArrayParam> = Vec::with_capacity(found.len());
    for p in found {
        match params.last_mut() {
            Some(last) if last.index == p.index => {
                last.elem = last.elem.or(p.elem);
                last.whole |= p.whole;
            }
            _ => params.push(p),
        }
    }
    // Where else an array parameter appears, it is the array as a value.
    for n in finder.bare {
        if let Some(p) = params.iter_mut().find(|p| p.index == n) {
            p.whole = true;
        }
    }
    Ok((params, finder.count))
}

/// The element type of an array type (`int[]`, `text ARRAY`).
pub fn element_type(t: &ast::DataType) -> Option<Result<DataType>> {
    let ast::DataType::Array(def) = t else { return None };
    Some(match def {
        ast::ArrayElemTypeDef::SquareBracket(inner, _) | ast::ArrayElemTypeDef::AngleBracket(inner) | ast::ArrayElemTypeDef::Parenthesis(inner) => {
            if matches!(inner.as_ref(), ast::DataType::Array(_)) {
                Err(Error::new(SqlState::FeatureNotSupported, "multidimensional array parameters are not supported"))
            } else {
                sql_type(inner)
            }
        }
        ast::ArrayElemTypeDef::None => Err(Error::unsupported("an array type without an element type")),
    })
}

/// `$n` or `$n::type[]` as an operand: the parameter, the nodes it is written with (the
/// placeholder and the cast, which the visit passes over when it reaches them) and, with the
/// cast, its element type.
struct Operand {
    n: usize,
    nodes: [*const ast::Expr; 2],
    elem: Option<Result<DataType>>,
}

fn array_operand(e: &ast::Expr) -> Option<Operand> {
    match e {
        ast::Expr::Nested(inner) => array_operand(inner),
        ast::Expr::Cast { expr, data_type, .. } => {
            let elem = element_type(data_type)?;
            placeholder(expr).map(|n| Operand { n, nodes: [expr.as_ref() as *const ast::Expr, e as *const ast::Expr], elem: Some(elem) })
        }
        e => placeholder(e).map(|n| Operand { n, nodes: [e as *const ast::Expr; 2], elem: None }),
    }
}

struct Finder {
    found: Vec<ArrayParam>,
    /// The nodes of a use already recorded (a placeholder, its cast).
    inner: Vec<*const ast::Expr>,
    /// Placeholders seen anywhere else.
    bare: Vec<usize>,
    /// The count of parameters: the highest placeholder's number so far.
    count: usize,
    error: Option<Error>,
}

impl Visitor for Finder {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &ast::Expr) -> ControlFlow<()> {
        if let Some(n) = placeholder(expr) {
            self.count = self.count.max(n + 1);
        }
        if self.inner.contains(&(expr as *const ast::Expr)) {
            return ControlFlow::Continue(());
        }
        let (Operand { n, nodes, elem }, whole) = match expr {
            ast::Expr::AnyOp { right, .. } | ast::Expr::AllOp { right, .. } => match array_operand(right) {
                Some(operand) => (operand, false),
                None => return ControlFlow::Continue(()),
            },
            ast::Expr::Cast { data_type: ast::DataType::Array(_), .. } => match array_operand(expr) {
                Some(operand) => (operand, true),
                None => return ControlFlow::Continue(()),
            },
            e => {
                if let Some(n) = placeholder(e) {
                    self.bare.push(n);
                }
                return ControlFlow::Continue(());
            }
        };
        let elem = match elem.transpose() {
            Ok(elem) => elem,
            Err(e) => {
                self.error = Some(e);
                return ControlFlow::Break(());
            }
        };
        self.inner.extend(nodes);
        self.found.push(ArrayParam { index: n, elem, whole });
        ControlFlow::Continue(())
    }
}

/// A statement in the form for its array parameters' lengths ([`form`]).
#[derive(Clone, Debug)]
pub struct Form {
    pub statement: ast::Statement,
    /// The added parameters, in order: per block, the array parameter (its position in the
    /// list [`find`] gave) and the count of parameters, which its elements fill, the last
    /// repeated up to the count.
    pub blocks: Vec<(usize, usize)>,
    /// The count of parameters in all.
    pub params: usize,
}

/// `statement` in the form for arrays of `lengths` elements, one per parameter of
/// `params` (as [`ArrayParam::form_length`] gives them; `None` for NULL), of element types
/// `elems`; `own` is the statement's count of parameters. With `typing`, the form that
/// types the statement: its comparisons with an array compare with one element
/// (`x op $a`), its arrays hold one, so that what the element types are follows from where
/// they are used as any parameter's type does.
pub fn form(statement: &ast::Statement, params: &[ArrayParam], elems: &[Option<DataType>], own: usize, lengths: &[Option<usize>], typing: bool) -> Result<Form> {
    let mut statement = statement.clone();
    let mut spreader = Spreader { params, elems, lengths, typing, next: own + 1, blocks: Vec::new(), firsts: vec![None; params.len()], error: None };
    let _ = VisitMut::visit(&mut statement, &mut spreader);
    if let Some(e) = spreader.error {
        return Err(e);
    }
    let total = spreader.next - 1;
    if total > MAX_FORM_PARAMETERS {
        let elements: usize = spreader.blocks.iter().map(|&(_, n)| n).sum();
        return Err(Error::new(
            SqlState::ProgramLimitExceeded,
            format!("a statement with arrays of {elements} elements in all (at most {MAX_FORM_PARAMETERS} parameters, the statement's own included)"),
        ));
    }
    Ok(Form { statement, blocks: spreader.blocks, params: total })
}

struct Spreader<'a> {
    params: &'a [ArrayParam],
    elems: &'a [Option<DataType>],
    lengths: &'a [Option<usize>],
    typing: bool,
    /// The number of the next parameter added.
    next: usize,
    blocks: Vec<(usize, usize)>,
    /// Per array parameter, the first of its block's parameters once it has one.
    firsts: Vec<Option<usize>>,
    error: Option<Error>,
}

impl Spreader<'_> {
    /// The array parameter `$n+1` is, as its position in `params`.
    fn array(&self, n: usize) -> Option<usize> {
        self.params.iter().position(|p| p.index == n)
    }

    /// The first parameter of array `a`'s block, and its length.
    fn block(&mut self, a: usize) -> (usize, Option<usize>) {
        let length = if self.typing { Some(1) } else { self.lengths.get(a).copied().flatten() };
        let first = match self.firsts[a] {
            Some(first) => first,
            None => {
                let first = self.next;
                if let Some(count) = length.filter(|&c| c > 0) {
                    self.next += count;
                    self.blocks.push((a, count));
                }
                self.firsts[a] = Some(first);
                first
            }
        };
        (first, length)
    }

    fn replacement(&mut self, expr: &ast::Expr) -> Result<Option<ast::Expr>> {
        match expr {
            ast::Expr::AnyOp { left, compare_op, right, .. } | ast::Expr::AllOp { left, compare_op, right } => {
                let Some(a) = array_operand(right).and_then(|o| self.array(o.n)) else { return Ok(None) };
                let all = matches!(expr, ast::Expr::AllOp { .. });
                let (first, length) = self.block(a);
                if self.typing {
                    let element = ast::Expr::Value(ast::Value::Placeholder(format!("${first}")).with_empty_span());
                    let compare = ast::Expr::BinaryOp { left: left.clone(), op: compare_op.clone(), right: Box::new(element) };
                    return Ok(Some(ast::Expr::Nested(Box::new(compare))));
                }
                let elem = self.elems.get(a).copied().flatten().unwrap_or(DataType::Text);
                array_form(Some((left, compare_op, all)), elem, first, length).map(Some)
            }
            e => {
                let Some(a) = placeholder(e).and_then(|n| self.array(n)) else { return Ok(None) };
                let (first, length) = self.block(a);
                let elem = self.elems.get(a).copied().flatten().unwrap_or(DataType::Text);
                array_form(None, elem, first, length).map(Some)
            }
        }
    }
}

impl VisitorMut for Spreader<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut ast::Expr) -> ControlFlow<()> {
        let replacement = self.replacement(expr);
        replace(expr, replacement, &mut self.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statement(sql: &str) -> ast::Statement {
        crate::sql::parse(sql).unwrap().remove(0)
    }

    #[test]
    fn arrays_by_use_cast_and_declaration() {
        let s = statement("SELECT * FROM t WHERE a = $1 AND b = ANY($2) AND c <> ALL($3::text[]) AND d IN (SELECT unnest($4::int[])) AND e = $5");
        let (found, count) = find(&s, &[], &[]).unwrap();
        assert_eq!(count, 5);
        assert_eq!(
            found,
            vec![
                ArrayParam { index: 1, elem: None, whole: false },
                ArrayParam { index: 2, elem: Some(DataType::Text), whole: false },
                ArrayParam { index: 3, elem: Some(DataType::Int32), whole: true },
            ]
        );
        let (declared, _) = find(&s, &[None, None, None, None, Some(DataType::Int64)], &[false, false, false, false, true]).unwrap();
        assert_eq!(declared.last(), Some(&ArrayParam { index: 4, elem: Some(DataType::Int64), whole: true }));
        let (again, _) = find(&statement("SELECT cardinality($1), $1 = ANY($1)"), &[], &[]).unwrap();
        assert_eq!(again, vec![ArrayParam { index: 0, elem: None, whole: true }], "an array wherever it appears");
        assert_eq!(find(&statement("SELECT $1 + 1"), &[None, None], &[]).unwrap(), (vec![], 2), "declared, if more");
        assert_eq!(find(&statement("SELECT $1::int[][]"), &[], &[]).unwrap_err().state, SqlState::FeatureNotSupported);
    }

    #[test]
    fn forms_per_length() {
        let s = statement("SELECT count(*) FROM t WHERE a = $1 AND b = ANY($2) AND c <> ALL($3::text[]) AND b > ANY($2)");
        let (params, _) = find(&s, &[], &[]).unwrap();
        let elems = [Some(DataType::Int32), Some(DataType::Text)];
        let typing = form(&s, &params, &[None, Some(DataType::Text)], 3, &[Some(1), Some(1)], true).unwrap();
        assert_eq!(typing.statement.to_string(), "SELECT count(*) FROM t WHERE a = $1 AND (b = $4) AND (c <> $5) AND (b > $4)");
        assert_eq!(typing.params, 5);
        let lengths = [params[0].form_length(Some(3)), params[1].form_length(Some(1))];
        let f = form(&s, &params, &elems, 3, &lengths, false).unwrap();
        assert_eq!(f.statement.to_string(), "SELECT count(*) FROM t WHERE a = $1 AND (b = ANY(ARRAY[$4, $5, $6, $7])) AND (c <> ALL(ARRAY[$8])) AND (b > ANY(ARRAY[$4, $5, $6, $7]))");
        assert_eq!((f.blocks, f.params), (vec![(0, 4), (1, 1)], 8));
        let f = form(&s, &params, &elems, 3, &[Some(0), None], false).unwrap();
        assert_eq!(f.statement.to_string(), "SELECT count(*) FROM t WHERE a = $1 AND false AND CAST(NULL AS BOOLEAN) AND false");
        assert!(f.blocks.is_empty());
        let whole = statement("INSERT INTO t SELECT * FROM unnest($1::int[])");
        let (params, _) = find(&whole, &[], &[]).unwrap();
        let f = form(&whole, &params, &[Some(DataType::Int32)], 1, &[params[0].form_length(Some(3))], false).unwrap();
        assert_eq!(f.statement.to_string(), "INSERT INTO t SELECT * FROM UNNEST(ARRAY[$2, $3, $4]::INT[])");
        let f = form(&whole, &params, &[Some(DataType::Int32)], 1, &[Some(0)], false).unwrap();
        assert_eq!(f.statement.to_string(), "INSERT INTO t SELECT * FROM UNNEST(CAST(ARRAY[] AS INTEGER[])::INT[])");
        let e = form(&whole, &params, &[Some(DataType::Int32)], 1, &[Some(MAX_FORM_PARAMETERS)], false).unwrap_err();
        assert_eq!(e.state, SqlState::ProgramLimitExceeded);
    }
}
