//! The five TPC-C transactions as native procedure bodies over record-level access
//! (`ProcedureContext::read`, `modify`, `update`, `insert`, `delete`): each step reads or changes rows
//! through an index with values in and out, as HyPer's compiled transactions do (seed 000
//! §3.1). They take the same steps as the statement driver ([`super::txn`]) — the same rows
//! read, locked and written in the same order — so the consistency conditions and the
//! outcomes the terminals check are the same.
//!
//! A call outside a transaction block runs as one executor job and these reads and writes go
//! straight to storage; otherwise each runs as the SQL statement it stands for.

use freshet::{Decimal, Error, ProcedureContext, RecordRead, Result, SqlState, TableRef, Value};

use super::generate::DISTRICTS_PER_WAREHOUSE;
use super::txn::*;

/// An integer value. TPC-C's integer columns are INT, and a value of the column's type is
/// used as it is (a key needs no conversion before it is encoded, a row none before it is
/// stored); one out of INT's range stays int8 and fails as the column's assignment does.
fn int(v: i64) -> Value {
    i32::try_from(v).map_or(Value::Int64(v), Value::Int32)
}

fn as_int(v: &Value) -> Result<i64> {
    v.as_i64().ok_or_else(|| Error::mismatch(format!("expected an integer, found {v:?}")))
}

/// Hundredths of a NUMERIC (or integer) value.
fn as_cents(v: &Value) -> Result<i64> {
    let d = v.as_decimal().ok_or_else(|| Error::mismatch(format!("expected a number, found {v:?}")))?;
    Ok(d.rescale(2)?.value as i64)
}

fn plus_cents(v: &Value, cents: i64) -> Result<Value> {
    let d = v.as_decimal().ok_or_else(|| Error::mismatch(format!("expected a number, found {v:?}")))?;
    Ok(Value::Decimal(d.checked_add(Decimal::new(cents as i128, 2))?))
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

fn missing(what: &str) -> Error {
    Error::new(SqlState::custom("P0002").unwrap_or(SqlState::RaiseException), format!("{what} not found"))
}

/// The first row of a read, or P0002 naming what was not found.
fn one(rows: Vec<Vec<Value>>, what: &str) -> Result<Vec<Value>> {
    rows.into_iter().next().ok_or_else(|| missing(what))
}

/// The customer id for a key: by id, or the middle one (n/2 rounded up) of the customers with
/// that last name in first-name order (clause 2.5.2.2), read from the by-name index.
fn customer_id(cx: &mut ProcedureContext, customer: &TableRef, w: i64, d: i64, key: &CustomerKey) -> Result<i64> {
    match key {
        CustomerKey::Id(id) => Ok(*id),
        CustomerKey::LastName(name) => {
            let by_name = RecordRead {
                index: customer.index(&["c_w_id", "c_d_id", "c_last", "c_first"])?,
                eq: vec![int(w), int(d), Value::Text(name.clone())],
                columns: vec![customer.column("c_id")?],
                ..RecordRead::default()
            };
            let rows = cx.read(customer, &by_name)?;
            if rows.is_empty() {
                return Err(missing("customer by last name"));
            }
            as_int(&rows[rows.len().div_ceil(2) - 1][0])
        }
    }
}

pub(crate) fn new_order(cx: &mut ProcedureContext, i: &NewOrderInput) -> Result<NewOrderOutcome> {
    let (w, d) = (i.w_id, i.d_id);
    let customer = cx.table("customer")?;
    let read = customer.key(vec![int(w), int(d), int(i.c_id)], customer.columns(&["c_discount", "c_last", "c_credit"])?)?;
    one(cx.read(&customer, &read)?, "customer")?;
    let warehouse = cx.table("warehouse")?;
    one(cx.read(&warehouse, &warehouse.key(vec![int(w)], warehouse.columns(&["w_tax"])?)?)?, "warehouse")?;
    let district = cx.table("district")?;
    let columns = district.columns(&["d_next_o_id", "d_tax"])?;
    let read = district.key(vec![int(w), int(d)], columns.clone())?;
    let seen = cx.modify(&district, &read, &mut |r| Ok(vec![(columns[0], int(as_int(&r[0])? + 1))]))?;
    let o_id = as_int(&one(seen, "district")?[0])?;
    let all_local = i.lines.iter().all(|l| l.supply_w_id == w) as i64;
    let oorder = cx.table("oorder")?;
    let row = oorder.row(vec![
        ("o_w_id", int(w)),
        ("o_d_id", int(d)),
        ("o_id", int(o_id)),
        ("o_c_id", int(i.c_id)),
        ("o_ol_cnt", int(i.lines.len() as i64)),
        ("o_all_local", int(all_local)),
        ("o_entry_d", Value::Timestamp(i.entry_d)),
    ])?;
    cx.insert(&oorder, row)?;
    let new_order = cx.table("new_order")?;
    cx.insert(&new_order, vec![int(w), int(d), int(o_id)])?;

    let item = cx.table("item")?;
    let item_columns = item.columns(&["i_price", "i_name", "i_data"])?;
    let stock = cx.table("stock")?;
    let dist = format!("s_dist_{d:02}");
    let stock_columns = stock.columns(&["s_quantity", "s_ytd", "s_order_cnt", "s_remote_cnt", "s_data", &dist])?;
    let order_line = cx.table("order_line")?;
    let mut total = 0;
    for (n, line) in i.lines.iter().enumerate() {
        let Some(found) = cx.read(&item, &item.key(vec![int(line.item)], item_columns.clone())?)?.into_iter().next() else {
            return Ok(NewOrderOutcome::UnusedItem);
        };
        let price = as_cents(&found[0])?;
        let read = stock.key(vec![int(line.supply_w_id), int(line.item)], stock_columns.clone())?;
        let remote = (line.supply_w_id != w) as i64;
        let s = cx.modify(&stock, &read, &mut |s| {
            let quantity = as_int(&s[0])?;
            let left = if quantity >= line.quantity + 10 { quantity - line.quantity } else { quantity - line.quantity + 91 };
            Ok(vec![
                (stock_columns[0], int(left)),
                (stock_columns[1], int(as_int(&s[1])? + line.quantity)),
                (stock_columns[2], int(as_int(&s[2])? + 1)),
                (stock_columns[3], int(as_int(&s[3])? + remote)),
            ])
        })?;
        let s = one(s, "stock")?;
        let amount = line.quantity * price;
        total += amount;
        let row = vec![
            int(w),
            int(d),
            int(o_id),
            int(n as i64 + 1),
            int(line.item),
            Value::Null,
            Value::Decimal(Decimal::new(amount as i128, 2)),
            int(line.supply_w_id),
            int(line.quantity),
            s[5].clone(),
        ];
        cx.insert(&order_line, row)?;
    }
    Ok(NewOrderOutcome::Committed { o_id, total })
}

pub(crate) fn payment(cx: &mut ProcedureContext, i: &PaymentInput) -> Result<PaymentOutcome> {
    let warehouse = cx.table("warehouse")?;
    let columns = warehouse.columns(&["w_ytd", "w_name", "w_street_1", "w_street_2", "w_city", "w_state", "w_zip"])?;
    let read = warehouse.key(vec![int(i.w_id)], columns.clone())?;
    let w = one(cx.modify(&warehouse, &read, &mut |w| Ok(vec![(columns[0], plus_cents(&w[0], i.amount)?)]))?, "warehouse")?;

    let district = cx.table("district")?;
    let columns = district.columns(&["d_ytd", "d_name", "d_street_1", "d_street_2", "d_city", "d_state", "d_zip"])?;
    let read = district.key(vec![int(i.w_id), int(i.d_id)], columns.clone())?;
    let d = one(cx.modify(&district, &read, &mut |d| Ok(vec![(columns[0], plus_cents(&d[0], i.amount)?)]))?, "district")?;

    let customer = cx.table("customer")?;
    let c_id = customer_id(cx, &customer, i.c_w_id, i.c_d_id, &i.customer)?;
    let columns = customer.columns(&[
        "c_balance", "c_ytd_payment", "c_payment_cnt", "c_credit", "c_first", "c_middle", "c_last", "c_street_1", "c_street_2", "c_city",
        "c_state", "c_zip", "c_phone", "c_since", "c_credit_lim", "c_discount",
    ])?;
    let read = customer.key(vec![int(i.c_w_id), int(i.c_d_id), int(c_id)], columns.clone())?;
    let paid = |c: &[Value]| -> Result<Vec<(usize, Value)>> {
        Ok(vec![(columns[0], plus_cents(&c[0], -i.amount)?), (columns[1], plus_cents(&c[1], i.amount)?), (columns[2], int(as_int(&c[2])? + 1))])
    };
    let c = one(cx.modify(&customer, &read, &mut |c| paid(c))?, "customer")?;
    let balance = as_cents(&c[0])? - i.amount;
    if text(&c[3]).starts_with("BC") {
        // Bad credit: the payment's details go in front of C_DATA (clause 2.5.2.2). The row
        // is this transaction's already; C_DATA is read only here, not for every customer.
        let data_column = customer.column("c_data")?;
        let by_data = RecordRead { columns: vec![data_column], ..read.clone() };
        cx.modify(&customer, &by_data, &mut |old| {
            let mut data = format!("{c_id} {} {} {} {} {}.{:02} | ", i.c_d_id, i.c_w_id, i.d_id, i.w_id, i.amount / 100, i.amount % 100);
            data.push_str(text(&old[0]));
            data.truncate(500);
            Ok(vec![(data_column, Value::Text(data))])
        })?;
    }

    let history = cx.table("history")?;
    let row = vec![
        int(c_id),
        int(i.c_d_id),
        int(i.c_w_id),
        int(i.d_id),
        int(i.w_id),
        Value::Timestamp(i.date),
        Value::Decimal(Decimal::new(i.amount as i128, 2)),
        Value::Text(format!("{}    {}", text(&w[1]), text(&d[1]))),
    ];
    cx.insert(&history, row)?;
    Ok(PaymentOutcome { c_id, balance })
}

pub(crate) fn order_status(cx: &mut ProcedureContext, i: &OrderStatusInput) -> Result<OrderStatusOutcome> {
    let customer = cx.table("customer")?;
    let c_id = customer_id(cx, &customer, i.w_id, i.d_id, &i.customer)?;
    let columns = customer.columns(&["c_balance", "c_first", "c_middle", "c_last"])?;
    one(cx.read(&customer, &customer.key(vec![int(i.w_id), int(i.d_id), int(c_id)], columns)?)?, "customer")?;
    let oorder = cx.table("oorder")?;
    let newest = RecordRead {
        index: oorder.index(&["o_w_id", "o_d_id", "o_c_id", "o_id"])?,
        eq: vec![int(i.w_id), int(i.d_id), int(c_id)],
        reverse: true,
        limit: Some(1),
        columns: oorder.columns(&["o_id", "o_carrier_id", "o_entry_d"])?,
        ..RecordRead::default()
    };
    let Some(order) = cx.read(&oorder, &newest)?.into_iter().next() else {
        return Ok(OrderStatusOutcome { c_id, o_id: None, lines: 0 });
    };
    let o_id = as_int(&order[0])?;
    let order_line = cx.table("order_line")?;
    let lines = RecordRead {
        eq: vec![int(i.w_id), int(i.d_id), int(o_id)],
        columns: order_line.columns(&["ol_i_id", "ol_supply_w_id", "ol_quantity", "ol_amount", "ol_delivery_d"])?,
        ..RecordRead::default()
    };
    let lines = cx.read(&order_line, &lines)?.len();
    Ok(OrderStatusOutcome { c_id, o_id: Some(o_id), lines })
}

pub(crate) fn delivery(cx: &mut ProcedureContext, i: &DeliveryInput) -> Result<DeliveryOutcome> {
    let w = i.w_id;
    let (new_order, oorder, order_line, customer) = (cx.table("new_order")?, cx.table("oorder")?, cx.table("order_line")?, cx.table("customer")?);
    let carrier = oorder.column("o_carrier_id")?;
    let delivery_d = order_line.column("ol_delivery_d")?;
    let balance_columns = customer.columns(&["c_balance", "c_delivery_cnt"])?;
    let mut delivered = Vec::with_capacity(DISTRICTS_PER_WAREHOUSE as usize);
    for d in 1..=DISTRICTS_PER_WAREHOUSE {
        // Under READ COMMITTED a concurrent Delivery may take the oldest new order between
        // our read and our delete (the delete then finds nothing): take the next one.
        let oldest = RecordRead { eq: vec![int(w), int(d)], limit: Some(1), columns: vec![new_order.column("no_o_id")?], ..RecordRead::default() };
        let mut o_id = None;
        for _ in 0..10 {
            let Some(row) = cx.read(&new_order, &oldest)?.into_iter().next() else { break };
            let candidate = as_int(&row[0])?;
            if cx.delete(&new_order, &new_order.key(vec![int(w), int(d), int(candidate)], Vec::new())?)? == 1 {
                o_id = Some(candidate);
                break;
            }
        }
        let Some(o_id) = o_id else {
            delivered.push(None);
            continue;
        };
        let read = oorder.key(vec![int(w), int(d), int(o_id)], vec![oorder.column("o_c_id")?])?;
        let c_id = as_int(&one(cx.modify(&oorder, &read, &mut |_| Ok(vec![(carrier, int(i.carrier_id))]))?, "order")?[0])?;
        let lines = RecordRead { eq: vec![int(w), int(d), int(o_id)], columns: vec![order_line.column("ol_amount")?], ..RecordRead::default() };
        let amounts = cx.update(&order_line, &lines, &[(delivery_d, Value::Timestamp(i.date))])?;
        let total = amounts.iter().map(|r| as_cents(&r[0])).sum::<Result<i64>>()?;
        let read = customer.key(vec![int(w), int(d), int(c_id)], balance_columns.clone())?;
        let delivered_to = |c: &[Value]| -> Result<Vec<(usize, Value)>> {
            Ok(vec![(balance_columns[0], plus_cents(&c[0], total)?), (balance_columns[1], int(as_int(&c[1])? + 1))])
        };
        one(cx.modify(&customer, &read, &mut |c| delivered_to(c))?, "customer")?;
        delivered.push(Some(o_id));
    }
    Ok(DeliveryOutcome { delivered })
}

pub(crate) fn stock_level(cx: &mut ProcedureContext, i: &StockLevelInput) -> Result<i64> {
    let district = cx.table("district")?;
    let read = district.key(vec![int(i.w_id), int(i.d_id)], vec![district.column("d_next_o_id")?])?;
    let next = as_int(&one(cx.read(&district, &read)?, "district")?[0])?;
    let order_line = cx.table("order_line")?;
    let recent = RecordRead {
        eq: vec![int(i.w_id), int(i.d_id)],
        lower: Some((int(next - 20), true)),
        upper: Some((int(next), false)),
        columns: vec![order_line.column("ol_i_id")?],
        ..RecordRead::default()
    };
    let mut items = cx.read(&order_line, &recent)?.iter().map(|r| as_int(&r[0])).collect::<Result<Vec<_>>>()?;
    items.sort_unstable();
    items.dedup();
    // The stock rows of those items, read as one list of keys (as the statement driver's
    // IN list reads them).
    let stock = cx.table("stock")?;
    let listed = RecordRead { eq: vec![int(i.w_id)], any: items.into_iter().map(int).collect(), columns: vec![stock.column("s_quantity")?], ..RecordRead::default() };
    let mut low = 0;
    for s in cx.read(&stock, &listed)? {
        if as_int(&s[0])? < i.threshold {
            low += 1;
        }
    }
    Ok(low)
}
