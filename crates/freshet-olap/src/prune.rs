//! Chunk skipping: the filters DataFusion pushes into a table scan, turned into integer ranges
//! that whole chunks can be tested against (a zone map).
//!
//! Each integer segment knows the smallest and largest value it holds
//! ([`ColumnSegment::int_range`], computed once per segment contents). A chunk whose range for
//! a column lies outside what a pushed-down conjunct allows holds no row that passes the
//! filter, so the scan leaves it out. The pruning is inexact by contract: DataFusion still
//! applies every filter to the rows of the chunks that remain.
//!
//! Understood conjuncts, on a 16/32/64-bit integer, date or timestamp column: `col op constant`
//! and `constant op col` for `=`, `<`, `<=`, `>`, `>=`; `col BETWEEN a AND b`; `col IN (…)`;
//! an OR of such conjuncts on one column.
//! The constant must have the column's kind (any integer type for an integer column, a date
//! for a date column, a timestamp with the column's unit and zone for a timestamp column): the
//! planner has already cast constants to the column's type wherever that is exact.
//!
//! A comparison or BETWEEN *is* its range (for integers, `x < 5` is `x <= 4`), so the scan can
//! also apply it exactly, row by row over the segment ([`test`], `crate::scan::selection`),
//! and DataFusion then leaves it out of the plan above the scan. An IN list or an OR is only
//! bounded by its range (its hull), so DataFusion keeps applying it.

use datafusion::arrow::datatypes::{DataType as ArrowType, Schema, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};
use datafusion::logical_expr::expr::InList;

pub use freshet_core::storage::RangeTest;

/// The range test `filter` implies, if it is one of the understood forms.
pub fn range_test(filter: &Expr, schema: &Schema) -> Option<RangeTest> {
    test(filter, schema).map(|(t, _)| t)
}

/// The range test `filter` implies, and whether it is exactly the filter (a row passes the
/// filter if and only if its value is not NULL and lies in the range): true for a comparison
/// with a constant or a BETWEEN.
pub fn test(filter: &Expr, schema: &Schema) -> Option<(RangeTest, bool)> {
    match filter {
        // Either side's range on the same column: their hull (small IN lists arrive as ORs),
        // which bounds the OR without being it.
        Expr::BinaryExpr(BinaryExpr { left, op: Operator::Or, right }) => {
            let (a, b) = (range_test(left, schema)?, range_test(right, schema)?);
            (a.column == b.column).then(|| (RangeTest { column: a.column, lo: a.lo.min(b.lo), hi: a.hi.max(b.hi) }, false))
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (column, op, value) = match (left.as_ref(), right.as_ref()) {
                (Expr::Column(c), Expr::Literal(v, _)) => (c, *op, v),
                (Expr::Literal(v, _), Expr::Column(c)) => (c, op.swap()?, v),
                _ => return None,
            };
            let index = schema.index_of(&column.name).ok()?;
            let v = constant(value, schema.field(index).data_type())?;
            let (lo, hi) = match op {
                Operator::Eq => (v, v),
                Operator::Lt => (i64::MIN, v.checked_sub(1)?),
                Operator::LtEq => (i64::MIN, v),
                Operator::Gt => (v.checked_add(1)?, i64::MAX),
                Operator::GtEq => (v, i64::MAX),
                _ => return None,
            };
            Some((RangeTest { column: index, lo, hi }, true))
        }
        Expr::Between(Between { expr, negated: false, low, high }) => {
            let (Expr::Column(c), Expr::Literal(low, _), Expr::Literal(high, _)) = (expr.as_ref(), low.as_ref(), high.as_ref())
            else {
                return None;
            };
            let index = schema.index_of(&c.name).ok()?;
            let ty = schema.field(index).data_type();
            Some((RangeTest { column: index, lo: constant(low, ty)?, hi: constant(high, ty)? }, true))
        }
        Expr::InList(InList { expr, list, negated: false }) => {
            let Expr::Column(c) = expr.as_ref() else { return None };
            let index = schema.index_of(&c.name).ok()?;
            let ty = schema.field(index).data_type();
            let mut values = list.iter().map(|e| match e {
                Expr::Literal(v, _) => constant(v, ty),
                _ => None,
            });
            let first = values.next()??;
            let (lo, hi) = values.try_fold((first, first), |(lo, hi), v| v.map(|v| (lo.min(v), hi.max(v))))?;
            Some((RangeTest { column: index, lo, hi }, false))
        }
        _ => None,
    }
}

/// `value` as the integer the storage holds for a column of type `ty`, if it is a non-NULL
/// constant of the column's kind.
fn constant(value: &ScalarValue, ty: &ArrowType) -> Option<i64> {
    let integer_column = matches!(ty, ArrowType::Int16 | ArrowType::Int32 | ArrowType::Int64);
    match value {
        ScalarValue::Int8(Some(v)) if integer_column => Some(*v as i64),
        ScalarValue::Int16(Some(v)) if integer_column => Some(*v as i64),
        ScalarValue::Int32(Some(v)) if integer_column => Some(*v as i64),
        ScalarValue::Int64(Some(v)) if integer_column => Some(*v),
        ScalarValue::UInt8(Some(v)) if integer_column => Some(*v as i64),
        ScalarValue::UInt16(Some(v)) if integer_column => Some(*v as i64),
        ScalarValue::UInt32(Some(v)) if integer_column => Some(*v as i64),
        ScalarValue::UInt64(Some(v)) if integer_column => i64::try_from(*v).ok(),
        ScalarValue::Date32(Some(v)) if *ty == ArrowType::Date32 => Some(*v as i64),
        ScalarValue::TimestampMicrosecond(Some(v), zone) => match ty {
            ArrowType::Timestamp(TimeUnit::Microsecond, column_zone) if column_zone == zone => Some(*v),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::Field;
    use datafusion::logical_expr::{col, lit};

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("a", ArrowType::Int32, true),
            Field::new("d", ArrowType::Date32, true),
            Field::new("f", ArrowType::Float64, true),
        ])
    }

    #[test]
    fn comparisons_with_constants_become_ranges() {
        let s = schema();
        let t = |e: Expr| range_test(&e, &s);
        assert_eq!(t(col("a").eq(lit(5i32))), Some(RangeTest { column: 0, lo: 5, hi: 5 }));
        assert_eq!(t(col("a").lt(lit(5i64))), Some(RangeTest { column: 0, lo: i64::MIN, hi: 4 }));
        assert_eq!(t(lit(5i32).lt(col("a"))), Some(RangeTest { column: 0, lo: 6, hi: i64::MAX }));
        assert_eq!(t(lit(5i32).gt_eq(col("a"))), Some(RangeTest { column: 0, lo: i64::MIN, hi: 5 }));
        assert_eq!(t(col("a").between(lit(2i32), lit(9i32))), Some(RangeTest { column: 0, lo: 2, hi: 9 }));
        assert_eq!(t(col("a").in_list(vec![lit(7i32), lit(3i32), lit(4i32)], false)), Some(RangeTest { column: 0, lo: 3, hi: 7 }));
        assert_eq!(t(col("d").gt_eq(lit(ScalarValue::Date32(Some(100))))), Some(RangeTest { column: 1, lo: 100, hi: i64::MAX }));
        assert_eq!(t(col("a").eq(lit(9i32)).or(col("a").lt(lit(2i32)))), Some(RangeTest { column: 0, lo: i64::MIN, hi: 9 }));
    }

    #[test]
    fn comparisons_and_between_are_exact_in_lists_and_ors_are_hulls() {
        let s = schema();
        let t = |e: Expr| test(&e, &s).and_then(|(t, exact)| exact.then_some(t));
        assert_eq!(t(col("a").eq(lit(5i32))), Some(RangeTest { column: 0, lo: 5, hi: 5 }));
        assert_eq!(t(col("a").lt(lit(5i64))), Some(RangeTest { column: 0, lo: i64::MIN, hi: 4 }));
        assert_eq!(t(col("a").between(lit(2i32), lit(9i32))), Some(RangeTest { column: 0, lo: 2, hi: 9 }));
        assert_eq!(t(col("a").in_list(vec![lit(7i32), lit(3i32)], false)), None, "3 and 7, not 3..=7");
        assert_eq!(t(col("a").eq(lit(9i32)).or(col("a").lt(lit(2i32)))), None);
        assert_eq!(t(col("f").eq(lit(1.5f64))), None);
    }

    #[test]
    fn other_filters_are_not_used() {
        let s = schema();
        let t = |e: Expr| range_test(&e, &s);
        assert_eq!(t(col("a").not_eq(lit(5i32))), None);
        assert_eq!(t(col("a").in_list(vec![lit(1i32)], true)), None);
        assert_eq!(t(col("a").not_between(lit(1i32), lit(2i32))), None);
        assert_eq!(t(col("f").eq(lit(1.5f64))), None, "floats have no range");
        assert_eq!(t(col("d").eq(lit(5i32))), None, "a date compared with an integer");
        assert_eq!(t(col("a").eq(lit(ScalarValue::Int32(None)))), None);
        assert_eq!(t(col("a").lt(lit(i64::MIN))), None, "nothing is below the smallest value");
        assert_eq!(t(col("a").eq(col("d"))), None);
        assert_eq!(t(col("a").in_list(vec![lit(1i32), col("d")], false)), None);
        assert_eq!(t(col("a").eq(lit(1i32)).or(col("d").eq(lit(ScalarValue::Date32(Some(1)))))), None, "OR over two columns");
        assert_eq!(t(col("a").eq(lit(1i32)).or(col("a").not_eq(lit(3i32)))), None);
    }
}
