//! The five TPC-C transactions as native procedure bodies over record-level access
//! (`ProcedureContext::read_each`, `modify_each`, `insert`, `delete`): each step reads or
//! changes rows through an index, reading their columns where they are stored (a string is
//! borrowed, no row of values is built), as HyPer's compiled transactions do (seed 000
//! §3.1). Every column the specification has a transaction retrieve for its terminal is
//! read (`retrieve`), though nothing displays it. They take the same steps as the statement driver ([`super::txn`]) — the same rows
//! read, locked and written — so the consistency conditions and the outcomes the terminals
//! check are the same. Where the rows a step needs are known ahead, a body first asks for
//! them all at once (`ProcedureContext::prefetch`), so that their cache misses overlap; for
//! that Delivery takes its steps in phases across the ten districts (every oldest new order,
//! then the orders, then the lines and customers) rather than district by district.
//!
//! A call outside a transaction block runs as one executor job and these reads and writes go
//! straight to storage; otherwise each runs as the SQL statement it stands for.

use freshet::{Decimal, Error, ProcedureContext, RecordRead, RecordRow, Result, SqlState, TableRef, Value};

use super::generate::DISTRICTS_PER_WAREHOUSE;
use super::txn::*;

/// An integer value. TPC-C's integer columns are INT, and a value of the column's type is
/// used as it is (a key needs no conversion before it is encoded, a row none before it is
/// stored); one out of INT's range stays int8 and fails as the column's assignment does.
fn int(v: i64) -> Value {
    i32::try_from(v).map_or(Value::Int64(v), Value::Int32)
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

/// Adds `cents` to the year-to-date column `ytd` of the one row `read` finds (its columns:
/// the year-to-date amount, the name, then the address) and returns the row's name.
fn add_year_to_date(cx: &mut ProcedureContext, table: &TableRef, read: &RecordRead, ytd: usize, cents: i64, what: &str) -> Result<String> {
    let mut name = None;
    cx.modify_each(table, read, &mut |row| {
        retrieve(row);
        name = Some(row.str(1).unwrap_or("").to_string());
        Ok(vec![(ytd, plus_cents(&row.value(0), cents)?)])
    })?;
    name.ok_or_else(|| missing(what))
}

fn missing(what: &str) -> Error {
    Error::new(SqlState::custom("P0002").unwrap_or(SqlState::RaiseException), format!("{what} not found"))
}

/// The tables, columns and indexes the transactions use, resolved by name once per catalog
/// version ([`freshet::Resolved`]) rather than on every call. Column lists are in the order
/// the bodies read them.
pub(crate) struct Schema {
    warehouse: TableRef,
    /// w_tax
    w_tax: Vec<usize>,
    /// w_ytd, w_name, w_street_1, w_street_2, w_city, w_state, w_zip
    w_payment: Vec<usize>,
    district: TableRef,
    /// d_next_o_id, d_tax
    d_next_tax: Vec<usize>,
    /// d_ytd, d_name, d_street_1, d_street_2, d_city, d_state, d_zip
    d_payment: Vec<usize>,
    d_next_o_id: usize,
    customer: TableRef,
    c_by_name: usize,
    c_id: usize,
    c_data: usize,
    /// c_discount, c_last, c_credit
    c_new_order: Vec<usize>,
    /// c_balance, c_ytd_payment, c_payment_cnt, c_credit, then the customer's details
    c_payment: Vec<usize>,
    /// c_balance, c_first, c_middle, c_last
    c_status: Vec<usize>,
    /// c_balance, c_delivery_cnt
    c_delivery: Vec<usize>,
    history: TableRef,
    oorder: TableRef,
    /// o_w_id, o_d_id, o_id, o_c_id, o_ol_cnt, o_all_local, o_entry_d
    o_insert: [usize; 7],
    o_by_customer: usize,
    /// o_id, o_carrier_id, o_entry_d
    o_status: Vec<usize>,
    o_carrier_id: usize,
    o_c_id: usize,
    new_order: TableRef,
    no_o_id: usize,
    item: TableRef,
    /// i_price, i_name, i_data
    i_new_order: Vec<usize>,
    stock: TableRef,
    /// Per district (index d - 1): s_quantity, s_ytd, s_order_cnt, s_remote_cnt, s_data,
    /// s_dist_<d>
    s_new_order: Vec<Vec<usize>>,
    s_quantity: usize,
    order_line: TableRef,
    /// ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d
    ol_status: Vec<usize>,
    ol_amount: usize,
    ol_delivery_d: usize,
    ol_i_id: usize,
}

impl Schema {
    pub(crate) fn resolve(cx: &mut ProcedureContext) -> Result<Schema> {
        let warehouse = cx.table("warehouse")?;
        let district = cx.table("district")?;
        let customer = cx.table("customer")?;
        let oorder = cx.table("oorder")?;
        let new_order = cx.table("new_order")?;
        let item = cx.table("item")?;
        let stock = cx.table("stock")?;
        let order_line = cx.table("order_line")?;
        let o_insert = oorder.columns(&["o_w_id", "o_d_id", "o_id", "o_c_id", "o_ol_cnt", "o_all_local", "o_entry_d"])?;
        let s_new_order = (1..=DISTRICTS_PER_WAREHOUSE)
            .map(|d| stock.columns(&["s_quantity", "s_ytd", "s_order_cnt", "s_remote_cnt", "s_data", &format!("s_dist_{d:02}")]))
            .collect::<Result<Vec<_>>>()?;
        Ok(Schema {
            w_tax: warehouse.columns(&["w_tax"])?,
            w_payment: warehouse.columns(&["w_ytd", "w_name", "w_street_1", "w_street_2", "w_city", "w_state", "w_zip"])?,
            d_next_tax: district.columns(&["d_next_o_id", "d_tax"])?,
            d_payment: district.columns(&["d_ytd", "d_name", "d_street_1", "d_street_2", "d_city", "d_state", "d_zip"])?,
            d_next_o_id: district.column("d_next_o_id")?,
            c_by_name: customer.index(&["c_w_id", "c_d_id", "c_last", "c_first"])?,
            c_id: customer.column("c_id")?,
            c_data: customer.column("c_data")?,
            c_new_order: customer.columns(&["c_discount", "c_last", "c_credit"])?,
            c_payment: customer.columns(&[
                "c_balance", "c_ytd_payment", "c_payment_cnt", "c_credit", "c_first", "c_middle", "c_last", "c_street_1", "c_street_2", "c_city",
                "c_state", "c_zip", "c_phone", "c_since", "c_credit_lim", "c_discount",
            ])?,
            c_status: customer.columns(&["c_balance", "c_first", "c_middle", "c_last"])?,
            c_delivery: customer.columns(&["c_balance", "c_delivery_cnt"])?,
            history: cx.table("history")?,
            o_insert: o_insert.try_into().map_err(|_| Error::internal("seven oorder columns"))?,
            o_by_customer: oorder.index(&["o_w_id", "o_d_id", "o_c_id", "o_id"])?,
            o_status: oorder.columns(&["o_id", "o_carrier_id", "o_entry_d"])?,
            o_carrier_id: oorder.column("o_carrier_id")?,
            o_c_id: oorder.column("o_c_id")?,
            no_o_id: new_order.column("no_o_id")?,
            i_new_order: item.columns(&["i_price", "i_name", "i_data"])?,
            s_new_order,
            s_quantity: stock.column("s_quantity")?,
            ol_status: order_line.columns(&["ol_i_id", "ol_supply_w_id", "ol_quantity", "ol_amount", "ol_delivery_d"])?,
            ol_amount: order_line.column("ol_amount")?,
            ol_delivery_d: order_line.column("ol_delivery_d")?,
            ol_i_id: order_line.column("ol_i_id")?,
            warehouse,
            district,
            customer,
            oorder,
            new_order,
            item,
            stock,
            order_line,
        })
    }
}

/// Reads every column a read gives where it is stored (the strings without copying them):
/// what the transaction retrieves for its terminal, which these bodies do not display.
fn retrieve(row: &RecordRow) {
    for c in 0..row.len() {
        match row.str(c) {
            Some(text) => {
                std::hint::black_box(text);
            }
            None => {
                std::hint::black_box(row.value(c));
            }
        }
    }
}

/// Column `i` of a row as an integer (a missing or NULL value is an error).
fn int_at(row: &RecordRow, i: usize) -> Result<i64> {
    row.int(i).ok_or_else(|| Error::mismatch(format!("expected an integer, found {:?}", row.value(i))))
}

/// Column `i` of a row in hundredths (a NUMERIC or an integer).
fn cents_at(row: &RecordRow, i: usize) -> Result<i64> {
    as_cents(&row.value(i))
}

/// Reads the one row `read` finds, retrieving its columns; P0002 naming `what` if none.
fn read_one(cx: &mut ProcedureContext, table: &TableRef, read: &RecordRead, what: &str) -> Result<()> {
    let found = cx.read_each(table, read, &mut |row| {
        retrieve(row);
        Ok(false)
    })?;
    if found == 0 { Err(missing(what)) } else { Ok(()) }
}

/// The customer id for a key: by id, or the middle one (n/2 rounded up) of the customers with
/// that last name in first-name order (clause 2.5.2.2), read from the by-name index.
fn customer_id(cx: &mut ProcedureContext, s: &Schema, w: i64, d: i64, key: &CustomerKey) -> Result<i64> {
    match key {
        CustomerKey::Id(id) => Ok(*id),
        CustomerKey::LastName(name) => {
            let by_name = RecordRead { index: s.c_by_name, eq: vec![int(w), int(d), Value::Text(name.clone())], columns: vec![s.c_id], ..RecordRead::default() };
            let mut ids = Vec::with_capacity(8);
            cx.read_each(&s.customer, &by_name, &mut |row| {
                ids.push(int_at(row, 0)?);
                Ok(true)
            })?;
            if ids.is_empty() {
                return Err(missing("customer by last name"));
            }
            Ok(ids[ids.len().div_ceil(2) - 1])
        }
    }
}

pub(crate) fn new_order(cx: &mut ProcedureContext, s: &Schema, i: &NewOrderInput) -> Result<NewOrderOutcome> {
    let (w, d) = (i.w_id, i.d_id);
    let stock_columns = s.s_new_order.get(d as usize - 1).ok_or_else(|| missing("district"))?;
    // Every row the order reads by key is known from its input: ask for the customer, the
    // items and the stock rows at once, so that their cache misses overlap (HyPer's
    // transactions are as short as their memory accesses).
    let customer = s.customer.key(vec![int(w), int(d), int(i.c_id)], s.c_new_order.clone())?;
    let mut items = Vec::with_capacity(i.lines.len());
    let mut stocks = Vec::with_capacity(i.lines.len());
    for line in &i.lines {
        items.push(s.item.key(vec![int(line.item)], s.i_new_order.clone())?);
        stocks.push(s.stock.key(vec![int(line.supply_w_id), int(line.item)], stock_columns.clone())?);
    }
    cx.prefetch_tables(&[(&s.customer, std::slice::from_ref(&customer)), (&s.item, &items), (&s.stock, &stocks)]);
    read_one(cx, &s.customer, &customer, "customer")?;
    read_one(cx, &s.warehouse, &s.warehouse.key(vec![int(w)], s.w_tax.clone())?, "warehouse")?;
    let read = s.district.key(vec![int(w), int(d)], s.d_next_tax.clone())?;
    let mut o_id = None;
    cx.modify_each(&s.district, &read, &mut |r| {
        retrieve(r);
        let next = int_at(r, 0)?;
        o_id = Some(next);
        Ok(vec![(s.d_next_o_id, int(next + 1))])
    })?;
    let o_id = o_id.ok_or_else(|| missing("district"))?;
    // The keys the order inserts are known now: their primary keys' hash slots load while
    // the rows are written.
    let order_key = [s.oorder.key(vec![int(w), int(d), int(o_id)], Vec::new())?];
    let new_order_key = [s.new_order.key(vec![int(w), int(d), int(o_id)], Vec::new())?];
    let mut line_keys = Vec::with_capacity(i.lines.len());
    for n in 1..=i.lines.len() as i64 {
        line_keys.push(s.order_line.key(vec![int(w), int(d), int(o_id), int(n)], Vec::new())?);
    }
    cx.prefetch_tables(&[(&s.oorder, &order_key), (&s.new_order, &new_order_key), (&s.order_line, &line_keys)]);
    let all_local = i.lines.iter().all(|l| l.supply_w_id == w) as i64;
    let mut row = vec![Value::Null; s.oorder.width()];
    let values = [int(w), int(d), int(o_id), int(i.c_id), int(i.lines.len() as i64), int(all_local), Value::Timestamp(i.entry_d)];
    for (&c, v) in s.o_insert.iter().zip(values) {
        row[c] = v;
    }
    cx.insert(&s.oorder, row)?;
    cx.insert(&s.new_order, vec![int(w), int(d), int(o_id)])?;

    let mut total = 0;
    for (n, ((line, item), read)) in i.lines.iter().zip(&items).zip(&stocks).enumerate() {
        let mut price = None;
        cx.read_each(&s.item, item, &mut |r| {
            retrieve(r);
            price = Some(cents_at(r, 0)?);
            Ok(false)
        })?;
        let Some(price) = price else {
            return Ok(NewOrderOutcome::UnusedItem);
        };
        let remote = (line.supply_w_id != w) as i64;
        let mut dist_info = None;
        cx.modify_each(&s.stock, read, &mut |r| {
            retrieve(r);
            let quantity = int_at(r, 0)?;
            let left = if quantity >= line.quantity + 10 { quantity - line.quantity } else { quantity - line.quantity + 91 };
            dist_info = Some(r.value(5));
            Ok(vec![
                (stock_columns[0], int(left)),
                (stock_columns[1], int(int_at(r, 1)? + line.quantity)),
                (stock_columns[2], int(int_at(r, 2)? + 1)),
                (stock_columns[3], int(int_at(r, 3)? + remote)),
            ])
        })?;
        let dist_info = dist_info.ok_or_else(|| missing("stock"))?;
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
            dist_info,
        ];
        cx.insert(&s.order_line, row)?;
    }
    Ok(NewOrderOutcome::Committed { o_id, total })
}

pub(crate) fn payment(cx: &mut ProcedureContext, s: &Schema, i: &PaymentInput) -> Result<PaymentOutcome> {
    let warehouse = s.warehouse.key(vec![int(i.w_id)], s.w_payment.clone())?;
    let district = s.district.key(vec![int(i.w_id), int(i.d_id)], s.d_payment.clone())?;
    let columns = &s.c_payment;
    // The warehouse, the district and (by id) the customer are known from the input: their
    // cache misses overlap.
    let by_id = match i.customer {
        CustomerKey::Id(c_id) => Some(s.customer.key(vec![int(i.c_w_id), int(i.c_d_id), int(c_id)], columns.clone())?),
        CustomerKey::LastName(_) => None,
    };
    cx.prefetch_tables(&[
        (&s.warehouse, std::slice::from_ref(&warehouse)),
        (&s.district, std::slice::from_ref(&district)),
        (&s.customer, by_id.as_slice()),
    ]);
    // The names go into the history row.
    let w_name = add_year_to_date(cx, &s.warehouse, &warehouse, s.w_payment[0], i.amount, "warehouse")?;
    let d_name = add_year_to_date(cx, &s.district, &district, s.d_payment[0], i.amount, "district")?;

    let c_id = customer_id(cx, s, i.c_w_id, i.c_d_id, &i.customer)?;
    let read = match by_id {
        Some(read) => read,
        None => s.customer.key(vec![int(i.c_w_id), int(i.c_d_id), int(c_id)], columns.clone())?,
    };
    let mut paid = None;
    cx.modify_each(&s.customer, &read, &mut |c| {
        retrieve(c);
        paid = Some((cents_at(c, 0)?, c.str(3).is_some_and(|credit| credit.starts_with("BC"))));
        Ok(vec![
            (columns[0], plus_cents(&c.value(0), -i.amount)?),
            (columns[1], plus_cents(&c.value(1), i.amount)?),
            (columns[2], int(int_at(c, 2)? + 1)),
        ])
    })?;
    let (balance, bad_credit) = paid.ok_or_else(|| missing("customer"))?;
    let balance = balance - i.amount;
    if bad_credit {
        // Bad credit: the payment's details go in front of C_DATA (clause 2.5.2.2). The row
        // is this transaction's already; C_DATA is read only here, not for every customer.
        let by_data = RecordRead { columns: vec![s.c_data], ..read.clone() };
        cx.modify_each(&s.customer, &by_data, &mut |old| {
            let mut data = format!("{c_id} {} {} {} {} {}.{:02} | ", i.c_d_id, i.c_w_id, i.d_id, i.w_id, i.amount / 100, i.amount % 100);
            data.push_str(old.str(0).unwrap_or(""));
            data.truncate(500);
            Ok(vec![(s.c_data, Value::Text(data))])
        })?;
    }

    let row = vec![
        int(c_id),
        int(i.c_d_id),
        int(i.c_w_id),
        int(i.d_id),
        int(i.w_id),
        Value::Timestamp(i.date),
        Value::Decimal(Decimal::new(i.amount as i128, 2)),
        Value::Text(format!("{w_name}    {d_name}")),
    ];
    cx.insert(&s.history, row)?;
    Ok(PaymentOutcome { c_id, balance })
}

pub(crate) fn order_status(cx: &mut ProcedureContext, s: &Schema, i: &OrderStatusInput) -> Result<OrderStatusOutcome> {
    let c_id = customer_id(cx, s, i.w_id, i.d_id, &i.customer)?;
    read_one(cx, &s.customer, &s.customer.key(vec![int(i.w_id), int(i.d_id), int(c_id)], s.c_status.clone())?, "customer")?;
    let newest = RecordRead {
        index: s.o_by_customer,
        eq: vec![int(i.w_id), int(i.d_id), int(c_id)],
        reverse: true,
        limit: Some(1),
        columns: s.o_status.clone(),
        ..RecordRead::default()
    };
    let mut o_id = None;
    cx.read_each(&s.oorder, &newest, &mut |order| {
        retrieve(order);
        o_id = Some(int_at(order, 0)?);
        Ok(false)
    })?;
    let Some(o_id) = o_id else {
        return Ok(OrderStatusOutcome { c_id, o_id: None, lines: 0 });
    };
    let lines = RecordRead { eq: vec![int(i.w_id), int(i.d_id), int(o_id)], columns: s.ol_status.clone(), ..RecordRead::default() };
    let lines = cx.read_each(&s.order_line, &lines, &mut |line| {
        retrieve(line);
        Ok(true)
    })?;
    Ok(OrderStatusOutcome { c_id, o_id: Some(o_id), lines })
}

pub(crate) fn delivery(cx: &mut ProcedureContext, s: &Schema, i: &DeliveryInput) -> Result<DeliveryOutcome> {
    let w = i.w_id;
    // First each district's oldest new order (taken), so that the orders' rows, and then
    // their customers', can be asked for together: ten districts' misses overlap instead of
    // following one another. The steps and their order per district are the statement
    // driver's.
    let mut delivered = Vec::with_capacity(DISTRICTS_PER_WAREHOUSE as usize);
    for d in 1..=DISTRICTS_PER_WAREHOUSE {
        // Under READ COMMITTED a concurrent Delivery may take the oldest new order between
        // our read and our delete (the delete then finds nothing): take the next one.
        let oldest = RecordRead { eq: vec![int(w), int(d)], limit: Some(1), columns: vec![s.no_o_id], ..RecordRead::default() };
        let mut o_id = None;
        for _ in 0..10 {
            let mut candidate = None;
            cx.read_each(&s.new_order, &oldest, &mut |row| {
                candidate = Some(int_at(row, 0)?);
                Ok(false)
            })?;
            let Some(candidate) = candidate else { break };
            if cx.delete(&s.new_order, &s.new_order.key(vec![int(w), int(d), int(candidate)], Vec::new())?)? == 1 {
                o_id = Some(candidate);
                break;
            }
        }
        delivered.push(o_id);
    }
    let mut orders = Vec::with_capacity(delivered.len());
    for (d, o) in (1..=DISTRICTS_PER_WAREHOUSE).zip(&delivered) {
        if let Some(o_id) = o {
            orders.push(s.oorder.key(vec![int(w), int(d), int(*o_id)], vec![s.o_c_id])?);
        }
    }
    cx.prefetch(&s.oorder, &orders);
    let mut customers = Vec::with_capacity(orders.len());
    for read in &orders {
        let mut c_id = None;
        cx.modify_each(&s.oorder, read, &mut |order| {
            c_id = Some(int_at(order, 0)?);
            Ok(vec![(s.o_carrier_id, int(i.carrier_id))])
        })?;
        let c_id = c_id.ok_or_else(|| missing("order"))?;
        customers.push(s.customer.key(vec![read.eq[0].clone(), read.eq[1].clone(), int(c_id)], s.c_delivery.clone())?);
    }
    cx.prefetch(&s.customer, &customers);
    for (order, customer) in orders.iter().zip(&customers) {
        let lines = RecordRead { eq: order.eq.clone(), columns: vec![s.ol_amount], ..RecordRead::default() };
        let mut total = 0;
        cx.modify_each(&s.order_line, &lines, &mut |line| {
            total += cents_at(line, 0)?;
            Ok(vec![(s.ol_delivery_d, Value::Timestamp(i.date))])
        })?;
        let found = cx.modify_each(&s.customer, customer, &mut |c| {
            Ok(vec![(s.c_delivery[0], plus_cents(&c.value(0), total)?), (s.c_delivery[1], int(int_at(c, 1)? + 1))])
        })?;
        if found == 0 {
            return Err(missing("customer"));
        }
    }
    Ok(DeliveryOutcome { delivered })
}

pub(crate) fn stock_level(cx: &mut ProcedureContext, s: &Schema, i: &StockLevelInput) -> Result<i64> {
    let read = s.district.key(vec![int(i.w_id), int(i.d_id)], vec![s.d_next_o_id])?;
    let mut next = None;
    cx.read_each(&s.district, &read, &mut |r| {
        next = Some(int_at(r, 0)?);
        Ok(false)
    })?;
    let next = next.ok_or_else(|| missing("district"))?;
    let recent = RecordRead {
        eq: vec![int(i.w_id), int(i.d_id)],
        lower: Some((int(next - 20), true)),
        upper: Some((int(next), false)),
        columns: vec![s.ol_i_id],
        ..RecordRead::default()
    };
    let mut items = Vec::with_capacity(300);
    cx.read_each(&s.order_line, &recent, &mut |r| {
        items.push(int_at(r, 0)?);
        Ok(true)
    })?;
    items.sort_unstable();
    items.dedup();
    // The stock rows of those items, read as one list of keys (as the statement driver's
    // IN list reads them).
    let listed = RecordRead { eq: vec![int(i.w_id)], any: items.into_iter().map(int).collect(), columns: vec![s.s_quantity], ..RecordRead::default() };
    let mut low = 0;
    cx.read_each(&s.stock, &listed, &mut |row| {
        if int_at(row, 0)? < i.threshold {
            low += 1;
        }
        Ok(true)
    })?;
    Ok(low)
}
