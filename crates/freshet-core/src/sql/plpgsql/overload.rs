//! Which of the routines of one name a call means (overloading), by PostgreSQL's rules for
//! function calls (its documentation, "Type Conversion: Functions").
//!
//! A call's arguments have types, or are of unknown type: a string literal, NULL, or a `$n`
//! whose type the client did not declare. A routine is a candidate if it takes the arguments
//! (as many as given by position, the named ones by name, and defaults for the rest), and
//! the candidates are narrowed in PostgreSQL's order:
//! 1. those to whose parameters every typed argument converts implicitly (an unknown one
//!    converts to anything); one left is the answer;
//! 2. those with the most arguments of exactly their parameter's type;
//! 3. those with the most arguments of exactly their type or of the preferred type of its
//!    category (text, double precision, timestamptz, boolean) where a conversion is needed;
//! 4. for each unknown argument, the category its parameters have: string if any candidate
//!    takes a string there, else the one category all take (if they differ, this step
//!    decides nothing); candidates of another category, or not of the preferred type where
//!    one is, are dropped;
//! 5. if all typed arguments have one type, the unknown ones are taken to have it too.
//!
//! More than one left at the end is ambiguous (42725); none is 42883. One difference, kept
//! from before routines could share a name: when only one routine of the name takes that
//! many arguments but a typed argument does not convert implicitly (`f(1.5)` for
//! `f(integer)`, `f(1)` for `f(text)`), the call still means it and the argument is converted
//! as an assignment would, where PostgreSQL finds no function.

use super::PlType;
use crate::types::DataType;

/// A call's argument: its type, `None` if unknown.
pub type ArgType = Option<PlType>;

/// The outcome of [`resolve`].
#[derive(Debug, PartialEq)]
pub enum Resolution {
    /// The index of the routine the call means, and whether its VARIADIC parameter takes the
    /// trailing arguments as its elements (`expanded`) rather than one array.
    Found { index: usize, expanded: bool },
    NotFound,
    Ambiguous,
}

/// A routine's parameters as a candidate sees them: name, type and whether it has a default;
/// and whether the last is VARIADIC.
pub trait Candidate {
    fn parameters(&self) -> Vec<(&str, PlType, bool)>;
    fn variadic(&self) -> bool {
        false
    }
}

impl Candidate for super::Routine {
    fn parameters(&self) -> Vec<(&str, PlType, bool)> {
        self.params.iter().zip(&self.defaults).map(|((n, t), d)| (n.as_str(), *t, d.is_some())).collect()
    }
    fn variadic(&self) -> bool {
        self.variadic
    }
}

impl Candidate for crate::catalog::ProcedureDef {
    fn parameters(&self) -> Vec<(&str, PlType, bool)> {
        self.routine.parameters()
    }
    fn variadic(&self) -> bool {
        self.routine.variadic
    }
}

impl<T: Candidate> Candidate for std::sync::Arc<T> {
    fn parameters(&self) -> Vec<(&str, PlType, bool)> {
        (**self).parameters()
    }
    fn variadic(&self) -> bool {
        (**self).variadic()
    }
}

/// One way a candidate takes the call's arguments: the routine, the parameter type each
/// argument goes to, and whether the VARIADIC parameter is expanded.
struct Form {
    index: usize,
    types: Vec<PlType>,
    expanded: bool,
}

/// The types a VARIADIC routine's parameters give `n` positional arguments when the trailing
/// ones are the variadic array's elements (at least one), if it takes that many.
fn expand(params: &[(&str, PlType, bool)], n: usize) -> Option<Vec<PlType>> {
    let (last, fixed) = params.split_last()?;
    let PlType::Array(elem) = last.1 else { return None };
    (n > fixed.len()).then(|| fixed.iter().map(|p| p.1).chain(std::iter::repeat_n(PlType::Scalar(elem), n - fixed.len())).collect())
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Category {
    Boolean,
    Numeric,
    String,
    DateTime,
    User,
    Array,
}

fn category(t: &PlType) -> Category {
    match t {
        PlType::Array(_) => Category::Array,
        PlType::Scalar(t) => match t {
            DataType::Bool => Category::Boolean,
            DataType::Int16 | DataType::Int32 | DataType::Int64 | DataType::Float32 | DataType::Float64 | DataType::Decimal { .. } => Category::Numeric,
            DataType::Char(_) | DataType::Varchar(_) | DataType::Text => Category::String,
            DataType::Date | DataType::Timestamp | DataType::TimestampTz => Category::DateTime,
            DataType::Uuid => Category::User,
        },
    }
}

/// The preferred type of its category (PostgreSQL's `typispreferred`).
fn preferred(t: &PlType) -> bool {
    matches!(t, PlType::Scalar(DataType::Text | DataType::Float64 | DataType::TimestampTz | DataType::Bool))
}

/// Whether PostgreSQL converts a value of type `from` to `to` implicitly (its casts marked
/// implicit in `pg_cast`, between the types Freshet has).
pub fn implicit(from: &PlType, to: &PlType) -> bool {
    use DataType::*;
    if from.same_type(to) {
        return true;
    }
    match (from, to) {
        (PlType::Array(a), PlType::Array(b)) => implicit(&PlType::Scalar(*a), &PlType::Scalar(*b)),
        (PlType::Scalar(a), PlType::Scalar(b)) => matches!(
            (a, b),
            (Int16, Int32 | Int64 | Float32 | Float64 | Decimal { .. })
                | (Int32, Int64 | Float32 | Float64 | Decimal { .. })
                | (Int64, Float32 | Float64 | Decimal { .. })
                | (Decimal { .. }, Float32 | Float64)
                | (Float32, Float64)
                | (Text, Varchar(_) | Char(_))
                | (Varchar(_), Text | Char(_))
                | (Char(_), Text | Varchar(_))
                | (Date, Timestamp | TimestampTz)
                | (Timestamp, TimestampTz)
        ),
        _ => false,
    }
}

/// For each argument, the type of the parameter it goes to, if `params` can take these
/// arguments: given by position, then by name, with defaults for the parameters left out.
fn fit(params: &[(&str, PlType, bool)], names: &[Option<String>]) -> Option<Vec<PlType>> {
    let mut given = vec![false; params.len()];
    let mut types = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let at = match name {
            None => i,
            Some(n) => params.iter().position(|(p, _, _)| p == n)?,
        };
        if at >= params.len() || std::mem::replace(&mut given[at], true) {
            return None;
        }
        types.push(params[at].1);
    }
    params.iter().zip(&given).all(|((_, _, default), given)| *given || *default).then_some(types)
}

/// The routine among `candidates` (all of one name) that a call with arguments of `args`
/// types (named as `names` says; `None` for a positional one) means.
pub fn resolve<C: Candidate>(candidates: &[C], args: &[ArgType], names: &[Option<String>]) -> Resolution {
    // One name (or none) per argument, whatever the caller gave.
    let names: Vec<Option<String>> = (0..args.len()).map(|i| names.get(i).cloned().flatten()).collect();
    let names = names.as_slice();
    let mut fitting: Vec<Form> = Vec::new();
    for (index, c) in candidates.iter().enumerate() {
        let params = c.parameters();
        if let Some(types) = fit(&params, names) {
            fitting.push(Form { index, types, expanded: false });
        }
        // A VARIADIC parameter's elements given one by one (positional arguments only).
        if c.variadic()
            && names.iter().all(Option::is_none)
            && let Some(types) = expand(&params, names.len())
        {
            fitting.push(Form { index, types, expanded: true });
        }
    }
    // An expanded form that another routine takes as it is loses to it, as in PostgreSQL.
    let plain: Vec<Vec<PlType>> = fitting.iter().filter(|f| !f.expanded).map(|f| f.types.clone()).collect();
    fitting.retain(|f| !f.expanded || !plain.iter().any(|t| super::same_types(t, &f.types)));
    let found = |f: &Form| Resolution::Found { index: f.index, expanded: f.expanded };
    let converts = |types: &[PlType], args: &[ArgType]| args.iter().zip(types).all(|(a, p)| a.as_ref().is_none_or(|a| implicit(a, p)));
    let mut left: Vec<&Form> = fitting.iter().filter(|f| converts(&f.types, args)).collect();
    match (left.len(), fitting.len()) {
        (1, _) => return found(left[0]),
        (0, 1) => return found(&fitting[0]),
        (0, _) => return Resolution::NotFound,
        _ => {}
    }
    // Keeps the candidates with the most arguments for which `scores` holds.
    let keep_most = |left: &mut Vec<&Form>, scores: &dyn Fn(&ArgType, &PlType) -> bool| {
        let score = |types: &[PlType]| args.iter().zip(types).filter(|(a, p)| scores(a, p)).count();
        let best = left.iter().map(|f| score(&f.types)).max().unwrap_or(0);
        left.retain(|f| score(&f.types) == best);
    };
    keep_most(&mut left, &|a, p| a.as_ref().is_some_and(|a| a.same_type(p)));
    if left.len() == 1 {
        return found(left[0]);
    }
    keep_most(&mut left, &|a, p| a.as_ref().is_some_and(|a| a.same_type(p) || preferred(p)));
    if left.len() == 1 {
        return found(left[0]);
    }
    // Unknown arguments: the category their parameters have.
    let mut slots = Vec::new();
    for (i, _) in args.iter().enumerate().filter(|(_, a)| a.is_none()) {
        let mut slot: Option<(Category, bool)> = None;
        let mut conflict = false;
        for f in &left {
            let (cat, pref) = (category(&f.types[i]), preferred(&f.types[i]));
            match slot {
                None => slot = Some((cat, pref)),
                Some((c, p)) if c == cat => slot = Some((c, p || pref)),
                Some(_) if cat == Category::String => slot = Some((cat, pref)),
                Some(_) => conflict = true,
            }
        }
        match slot {
            Some((c, p)) if !conflict || c == Category::String => slots.push((i, c, p)),
            _ => {
                slots.clear();
                break;
            }
        }
    }
    if !slots.is_empty() {
        left.retain(|f| slots.iter().all(|&(i, c, p)| category(&f.types[i]) == c && (!p || preferred(&f.types[i]))));
        if left.len() == 1 {
            return found(left[0]);
        }
    }
    // All typed arguments of one type: the unknown ones taken to be of it too.
    let mut known = args.iter().flatten();
    if let Some(first) = known.next()
        && known.all(|t| t.same_type(first))
    {
        let assumed: Vec<ArgType> = args.iter().map(|_| Some(*first)).collect();
        let fits: Vec<_> = left.iter().filter(|f| converts(&f.types, &assumed)).collect();
        if let [only] = fits.as_slice() {
            return found(only);
        }
    }
    Resolution::Ambiguous
}

#[cfg(test)]
mod tests {
    use super::*;
    use DataType::*;

    struct C(Vec<(&'static str, PlType, bool)>, bool);
    impl Candidate for C {
        fn parameters(&self) -> Vec<(&str, PlType, bool)> {
            self.0.clone()
        }
        fn variadic(&self) -> bool {
            self.1
        }
    }

    fn c(types: &[DataType]) -> C {
        C(types.iter().map(|t| ("", PlType::Scalar(*t), false)).collect(), false)
    }

    fn args(types: &[Option<DataType>]) -> Vec<ArgType> {
        types.iter().map(|t| t.map(PlType::Scalar)).collect()
    }

    fn found(index: usize) -> Resolution {
        Resolution::Found { index, expanded: false }
    }

    fn pick(cands: &[C], a: &[Option<DataType>]) -> Resolution {
        resolve(cands, &args(a), &vec![None; a.len()])
    }

    // Each expectation below is what PostgreSQL 15 answered for the same functions.
    #[test]
    fn picks_as_postgresql_does() {
        let f = [c(&[Int32]), c(&[Text]), c(&[crate::types::DEFAULT_NUMERIC]), c(&[Int32, Int32])];
        assert_eq!(pick(&f, &[Some(Int32)]), found(0));
        assert_eq!(pick(&f, &[None]), found(1), "an unknown literal prefers the string category");
        assert_eq!(pick(&f, &[Some(crate::types::DEFAULT_NUMERIC)]), found(2));
        assert_eq!(pick(&f, &[Some(Int32), None]), found(3));
        assert_eq!(pick(&f, &[Some(Bool)]), Resolution::NotFound);
        // int8 converts to numeric only; int2 to int4 and numeric, and int4 has more in common.
        assert_eq!(pick(&f, &[Some(Int64)]), found(2));
        assert_eq!(pick(&f, &[Some(Int16)]), Resolution::Ambiguous);
        assert_eq!(pick(&f, &[Some(Float64)]), Resolution::NotFound);
        let m = [c(&[Int32]), c(&[Int64])];
        assert_eq!(pick(&m, &[None]), Resolution::Ambiguous);
        assert_eq!(pick(&m, &[Some(Int16)]), Resolution::Ambiguous);
        let n = [c(&[Int32, Int64]), c(&[Int64, Int32])];
        assert_eq!(pick(&n, &[Some(Int32), Some(Int32)]), Resolution::Ambiguous);
        assert_eq!(pick(&n, &[Some(Int32), None]), found(0));
        let k = [c(&[Date]), c(&[TimestampTz])];
        assert_eq!(pick(&k, &[None]), found(1), "the preferred type of the category");
        assert_eq!(pick(&k, &[Some(Timestamp)]), found(1));
        let g = [c(&[Varchar(None)]), c(&[Text])];
        assert_eq!(pick(&g, &[None]), found(1));
        assert_eq!(pick(&g, &[Some(Varchar(Some(3)))]), found(0));
        assert_eq!(pick(&g, &[Some(Char(3))]), found(1));
    }

    #[test]
    fn defaults_and_names() {
        let h = [C(vec![("a", PlType::Scalar(Int32), false), ("b", PlType::Scalar(Text), true)], false), c(&[Int32])];
        assert_eq!(pick(&h, &[Some(Int32)]), Resolution::Ambiguous, "two routines take one integer");
        assert_eq!(pick(&h, &[Some(Int32), None]), found(0));
        let named = resolve(&h, &args(&[None, Some(Int32)]), &[Some("b".into()), Some("a".into())]);
        assert_eq!(named, found(0));
        assert_eq!(resolve(&h, &args(&[Some(Int32)]), &[Some("z".into())]), Resolution::NotFound);
    }

    #[test]
    fn one_routine_that_takes_the_arguments_is_the_one_meant() {
        let f = [c(&[Int32]), c(&[Int32, Int32])];
        assert_eq!(pick(&f, &[Some(crate::types::DEFAULT_NUMERIC)]), found(0));
        assert_eq!(pick(&f, &[Some(Int32), Some(Int32), Some(Int32)]), Resolution::NotFound);
    }

    #[test]
    fn variadic_elements_or_the_array() {
        let v = |fixed: &[DataType], elem: DataType| C(fixed.iter().map(|t| ("", PlType::Scalar(*t), false)).chain([("rest", PlType::Array(elem), false)]).collect(), true);
        let expanded = |index| Resolution::Found { index, expanded: true };
        let f = [v(&[Text], Int32)];
        assert_eq!(pick(&f, &[None, Some(Int32), Some(Int32), Some(Int32)]), expanded(0));
        assert_eq!(pick(&f, &[None, Some(Int32)]), expanded(0));
        assert_eq!(pick(&f, &[None]), Resolution::NotFound, "at least one element");
        assert_eq!(resolve(&f, &[None, Some(PlType::Array(Int32))], &[None, None]), found(0), "the array itself");
        // A routine that takes the arguments as they are wins over an expanded VARIADIC one.
        let g = [v(&[], Int32), c(&[Int32])];
        assert_eq!(pick(&g, &[Some(Int32)]), found(1));
        assert_eq!(pick(&g, &[Some(Int32), Some(Int32)]), expanded(0));
        // An unknown literal: the element (string category) rather than the array.
        let t = [v(&[], Text)];
        assert_eq!(pick(&t, &[None]), expanded(0));
    }
}
