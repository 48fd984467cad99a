//! An array variable as a whole inside a statement: compared with (`WHERE id = ANY(ids)`,
//! `x <> ALL(arr)`, `v > ANY(limits)`) or as any other value (`unnest(ids)`, `g(ids)`).
//!
//! SQL statements take scalar parameters only, so the compiler puts one placeholder in the
//! place of the whole comparison ([`ParamSource::Quantified`]) or of the array
//! ([`ParamSource::WholeArray`]), and the session runs the statement in a form made for the
//! array's length: the comparison with, or in place of the array, `ARRAY[$m+1, …]`, one
//! parameter per element after the statement's own. A comparison's forms are few: its length
//! is rounded up ([`spread_length`]) and the last element repeated to fill it, which changes
//! no ANY or ALL result (and `id IN (…)`, which `= ANY` becomes, looks each distinct key up
//! once); an array as a value has a form per length. Each form is planned once per session
//! and kept with the routine's statements.

use std::ops::ControlFlow;

use sqlparser::ast::{self, VisitMut, VisitorMut};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use super::compile::{ParamSource, Routine, SqlUnit};
use super::PlType;
use crate::error::{Error, Result, SqlState};
use crate::sql::plan::MAX_IN_LOOKUPS;
use crate::types::DataType;

/// The most parameters a statement's form may have (as a client's statement may; `$65536`
/// does not parse).
pub const MAX_FORM_PARAMETERS: usize = 65_535;

/// The length the form for an array of `n` elements has: the next power of two, but not past
/// the longest list a key's lookups use, so that lists that fit still fit, nor past the most
/// parameters a form may have.
pub fn spread_length(n: usize) -> usize {
    match n {
        0 => 0,
        n if n <= MAX_IN_LOOKUPS => n.next_power_of_two().min(MAX_IN_LOOKUPS),
        n => n.next_power_of_two().min(MAX_FORM_PARAMETERS).max(n),
    }
}

/// The length of the form parameter `p` (which [`ParamSource::spreads`]) has for an array of
/// `n` elements.
pub fn form_length(p: &ParamSource, n: usize) -> usize {
    match p {
        ParamSource::Quantified { .. } => spread_length(n),
        _ => n,
    }
}

/// A statement in the form for given array lengths ([`Routine::spread`]).
#[derive(Clone, Debug)]
pub struct Spread {
    pub text: String,
    /// The statement's own parameters' types, then one per added parameter.
    pub param_types: Vec<DataType>,
    /// The added parameters, in order: blocks of (array variable, count), each filled with
    /// the array's elements, the last repeated up to the count.
    pub blocks: Vec<(usize, usize)>,
}

impl SqlUnit {
    /// Whether a parameter of the statement compares with an array variable's elements.
    pub fn spreads(&self) -> bool {
        self.params.iter().any(ParamSource::spreads)
    }
}

impl Routine {
    /// Statement `unit` (which [`SqlUnit::spreads`]) in the form for arrays of `lengths`
    /// elements, one per parameter that [`ParamSource::spreads`], in order (as
    /// [`form_length`] gives them; `None` for a NULL array). A comparison's placeholder
    /// becomes `(left op ANY|ALL (ARRAY[$a, …]))`, or for no element FALSE (ANY) or TRUE
    /// (ALL), for a NULL array NULL, as PostgreSQL's comparisons with an array give; an
    /// array's becomes `ARRAY[$a, …]`, or an empty or NULL array of the element type.
    pub fn spread(&self, unit: usize, lengths: &[Option<usize>]) -> Result<Spread> {
        let unit = &self.sql[unit];
        let mut statement = unit.statement.clone();
        let mut spreader = Spreader { routine: self, unit, lengths, param_types: unit.param_types.clone(), blocks: Vec::new(), error: None };
        let _ = statement.visit(&mut spreader);
        if let Some(e) = spreader.error {
            return Err(e);
        }
        if spreader.param_types.len() > MAX_FORM_PARAMETERS {
            let elements: usize = spreader.blocks.iter().map(|&(_, n)| n).sum();
            return Err(Error::new(
                SqlState::ProgramLimitExceeded,
                format!("a statement with arrays of {elements} elements in all (at most {MAX_FORM_PARAMETERS} parameters, the statement's own included)"),
            ));
        }
        Ok(Spread { text: statement.to_string(), param_types: spreader.param_types, blocks: spreader.blocks })
    }
}

struct Spreader<'a> {
    routine: &'a Routine,
    unit: &'a SqlUnit,
    lengths: &'a [Option<usize>],
    param_types: Vec<DataType>,
    blocks: Vec<(usize, usize)>,
    error: Option<Error>,
}

impl Spreader<'_> {
    /// The replacement of placeholder `$n`, if it stands for a comparison with an array.
    fn replacement(&mut self, n: usize) -> Result<Option<ast::Expr>> {
        let Some(p) = self.unit.params.get(n.wrapping_sub(1)).filter(|p| p.spreads()) else { return Ok(None) };
        let ordinal = self.unit.params[..n - 1].iter().filter(|p| p.spreads()).count();
        let length = *self.lengths.get(ordinal).ok_or_else(|| Error::internal("a spread statement without the length of an array"))?;
        let (ParamSource::Quantified { array, .. } | ParamSource::WholeArray { array }) = p else { return Ok(None) };
        let PlType::Array(elem) = self.routine.slots[*array].ty else { return Err(Error::internal("a scalar variable spread as an array")) };
        let first = self.param_types.len() + 1;
        if let Some(count) = length.filter(|&c| c > 0) {
            self.param_types.extend(std::iter::repeat_n(elem, count));
            self.blocks.push((*array, count));
        }
        let quantified = match p {
            ParamSource::Quantified { left, op, all, .. } => Some((left.as_ref(), op, *all)),
            _ => None,
        };
        array_form(quantified, elem, first, length).map(Some)
    }
}

/// What stands in a statement's form for an array of `length` elements (`None`: a NULL
/// array) whose elements are the parameters from `$first` on: compared with (`quantified`:
/// the left side, the operator and whether ALL) or used as a value of element type `elem`.
/// A comparison becomes `(left op ANY|ALL (ARRAY[$a, …]))`, or for no element FALSE (ANY)
/// or TRUE (ALL), for a NULL array NULL, as PostgreSQL's comparisons with an array give; an
/// array becomes `ARRAY[$a, …]`, or an empty or NULL array of the element type.
pub(crate) fn array_form(quantified: Option<(&ast::Expr, &ast::BinaryOperator, bool)>, elem: DataType, first: usize, length: Option<usize>) -> Result<ast::Expr> {
    let elements = match length {
        Some(count) if count > 0 => Some(format!("ARRAY[{}]", (first..first + count).map(|i| format!("${i}")).collect::<Vec<_>>().join(", "))),
        _ => None,
    };
    // The element type as an array's (modifiers aside; a character type as text).
    let array_type = match elem {
        DataType::Char(_) | DataType::Varchar(_) => "text[]".to_string(),
        t => format!("{}[]", t.pg_name()),
    };
    let text = match (quantified, elements) {
        (Some((left, op, all)), Some(elements)) => format!("({left} {op} {}({elements}))", if all { "ALL" } else { "ANY" }),
        (Some((_, _, all)), None) if length == Some(0) => if all { "TRUE" } else { "FALSE" }.to_string(),
        (Some(_), None) => "CAST(NULL AS BOOLEAN)".to_string(),
        (None, Some(elements)) => elements,
        (None, None) if length == Some(0) => format!("CAST(ARRAY[] AS {array_type})"),
        (None, None) => format!("CAST(NULL AS {array_type})"),
    };
    let parsed = Parser::new(&PostgreSqlDialect {}).try_with_sql(&text).and_then(|mut p| p.parse_expr());
    parsed.map_err(|e| Error::internal(format!("the form of \"{text}\" for an array's elements: {e}")))
}

impl VisitorMut for Spreader<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut ast::Expr) -> ControlFlow<()> {
        let ast::Expr::Value(v) = expr else { return ControlFlow::Continue(()) };
        let ast::Value::Placeholder(p) = &v.value else { return ControlFlow::Continue(()) };
        let Ok(n) = p.trim_start_matches('$').parse::<usize>() else { return ControlFlow::Continue(()) };
        let replacement = self.replacement(n);
        replace(expr, replacement, &mut self.error)
    }
}

/// Puts `replacement`'s expression, if any, in `expr`'s place; an error is kept in `error`
/// and stops the visit.
pub(crate) fn replace(expr: &mut ast::Expr, replacement: Result<Option<ast::Expr>>, error: &mut Option<Error>) -> ControlFlow<()> {
    match replacement {
        Ok(Some(e)) => *expr = e,
        Ok(None) => {}
        Err(e) => {
            *error = Some(e);
            return ControlFlow::Break(());
        }
    }
    ControlFlow::Continue(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::plpgsql::compile;

    #[test]
    fn lengths_round_up_but_keep_lists_a_key_looks_up() {
        let lengths: Vec<usize> = [0, 1, 2, 3, 5, 8, 9, 600, 1000, 1001, 3000, 40_000, 70_000].into_iter().map(spread_length).collect();
        assert_eq!(lengths, vec![0, 1, 2, 4, 8, 8, 16, MAX_IN_LOOKUPS, MAX_IN_LOOKUPS, 1024, 4096, MAX_FORM_PARAMETERS, 70_000]);
    }

    #[test]
    fn a_form_per_length() {
        let r = compile(
            "CREATE FUNCTION f(ids INT[], k INT) RETURNS INT LANGUAGE plpgsql AS $$
             DECLARE n INT; names TEXT[];
             BEGIN SELECT count(*) INTO n FROM t WHERE a = k AND b = ANY(ids) AND c <> ALL(names) AND d > k; RETURN n; END $$",
        )
        .unwrap();
        let i = r.sql.iter().position(SqlUnit::spreads).unwrap();
        assert_eq!(r.sql[i].param_types, vec![DataType::Int32, DataType::Bool, DataType::Bool], "k is one parameter, each comparison one");
        let form = r.spread(i, &[Some(2), Some(1)]).unwrap();
        assert_eq!(form.text, "SELECT count(*) FROM t WHERE a = $1 AND (b = ANY(ARRAY[$4, $5])) AND (c <> ALL(ARRAY[$6])) AND d > $1");
        assert_eq!(form.param_types, vec![DataType::Int32, DataType::Bool, DataType::Bool, DataType::Int32, DataType::Int32, DataType::Text]);
        let names = r.slots.iter().position(|s| s.name == "names").unwrap();
        assert_eq!(form.blocks, vec![(0, 2), (names, 1)]);
        let form = r.spread(i, &[Some(0), None]).unwrap();
        assert_eq!(form.text, "SELECT count(*) FROM t WHERE a = $1 AND false AND CAST(NULL AS BOOLEAN) AND d > $1");
        assert!(form.blocks.is_empty());
    }

    #[test]
    fn an_array_as_a_value_has_a_form_per_length() {
        let r = compile(
            "CREATE FUNCTION f(ids INT[]) RETURNS INT LANGUAGE plpgsql AS $$
             DECLARE n INT;
             BEGIN SELECT count(*) INTO n FROM unnest(ids) u WHERE u = ANY($1); RETURN n; END $$",
        )
        .unwrap();
        let i = r.sql.iter().position(SqlUnit::spreads).unwrap();
        assert_eq!(form_length(&r.sql[i].params[0], 3), 3, "as it is");
        assert_eq!(form_length(&r.sql[i].params[1], 3), 4, "rounded up");
        let form = r.spread(i, &[Some(3), Some(4)]).unwrap();
        assert_eq!(form.text, "SELECT count(*) FROM UNNEST(ARRAY[$3, $4, $5]) u WHERE (u = ANY(ARRAY[$6, $7, $8, $9]))");
        assert_eq!(form.blocks, vec![(0, 3), (0, 4)]);
        let form = r.spread(i, &[Some(0), None]).unwrap();
        assert_eq!(form.text, "SELECT count(*) FROM UNNEST(CAST(ARRAY[] AS INTEGER[])) u WHERE CAST(NULL AS BOOLEAN)");
        let e = r.spread(i, &[Some(40_000), Some(spread_length(40_000))]).unwrap_err();
        assert_eq!(e.state, SqlState::ProgramLimitExceeded, "{e:?}");
        assert!(form.blocks.is_empty());
    }
}
