//! The consistency conditions 1–4 of TPC-C clause 3.3.2, each as one query that counts the
//! groups it checked and the groups that violate it. A condition holds when no group
//! violates it and every warehouse or district was checked.

use crate::conn::{Conn, DbResult};

pub struct Condition {
    pub number: u8,
    pub description: &'static str,
    sql: &'static str,
}

pub const CONDITIONS: [Condition; 4] = [
    Condition {
        number: 1,
        description: "W_YTD = sum(D_YTD) per warehouse",
        sql: "SELECT count(*), coalesce(sum(CASE WHEN w.w_ytd <> d.ytd THEN 1 ELSE 0 END), 0) \
              FROM warehouse w JOIN (SELECT d_w_id, sum(d_ytd) AS ytd FROM district GROUP BY d_w_id) d ON w.w_id = d.d_w_id",
    },
    Condition {
        number: 2,
        description: "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) per district",
        sql: "SELECT count(*), coalesce(sum(CASE WHEN d.d_next_o_id - 1 <> o.m OR (n.m IS NOT NULL AND n.m <> o.m) THEN 1 ELSE 0 END), 0) \
              FROM district d \
              JOIN (SELECT o_w_id, o_d_id, max(o_id) AS m FROM oorder GROUP BY o_w_id, o_d_id) o \
                ON o.o_w_id = d.d_w_id AND o.o_d_id = d.d_id \
              LEFT JOIN (SELECT no_w_id, no_d_id, max(no_o_id) AS m FROM new_order GROUP BY no_w_id, no_d_id) n \
                ON n.no_w_id = d.d_w_id AND n.no_d_id = d.d_id",
    },
    Condition {
        number: 3,
        description: "max(NO_O_ID) - min(NO_O_ID) + 1 = count(NEW-ORDER rows) per district",
        sql: "SELECT count(*), coalesce(sum(CASE WHEN hi - lo + 1 <> n THEN 1 ELSE 0 END), 0) \
              FROM (SELECT no_w_id, no_d_id, max(no_o_id) AS hi, min(no_o_id) AS lo, count(*) AS n \
                    FROM new_order GROUP BY no_w_id, no_d_id) x",
    },
    Condition {
        number: 4,
        description: "sum(O_OL_CNT) = count(ORDER-LINE rows) per district",
        sql: "SELECT count(*), coalesce(sum(CASE WHEN o.s <> l.c THEN 1 ELSE 0 END), 0) \
              FROM (SELECT o_w_id, o_d_id, sum(o_ol_cnt) AS s FROM oorder GROUP BY o_w_id, o_d_id) o \
              JOIN (SELECT ol_w_id, ol_d_id, count(*) AS c FROM order_line GROUP BY ol_w_id, ol_d_id) l \
                ON o.o_w_id = l.ol_w_id AND o.o_d_id = l.ol_d_id",
    },
];

/// The outcome of one condition.
#[derive(Clone, Debug)]
pub struct ConditionResult {
    pub number: u8,
    pub description: &'static str,
    pub groups: i64,
    pub violations: i64,
    pub holds: bool,
}

/// Checks conditions 1–4 on a database with `warehouses` warehouses. Condition 3 is checked
/// over the districts that have new orders (all of them may have been delivered).
pub async fn check<C: Conn>(conn: &mut C, warehouses: i64) -> DbResult<Vec<ConditionResult>> {
    let mut out = Vec::new();
    for c in &CONDITIONS {
        let rows = conn.simple(c.sql).await?;
        let (groups, violations) = rows.first().map(|r| (r[0].as_i64(), r[1].as_i64())).unwrap_or((0, -1));
        let expected = if c.number == 1 { warehouses } else { warehouses * 10 };
        let complete = if c.number == 3 { groups <= expected } else { groups == expected };
        out.push(ConditionResult { number: c.number, description: c.description, groups, violations, holds: violations == 0 && complete });
    }
    Ok(out)
}
