//! The five TPC-C transactions as stored procedures: one call per transaction.
//!
//! - [`PLPGSQL`]: PL/pgSQL functions, the same text for Freshet and PostgreSQL. Each returns a
//!   line of text with what the terminal displays (`o_id total`, `c_id balance`, …), because
//!   a function returns one value and both systems accept that.
//! - [`register_native`]: the same transactions as Freshet native procedures (Rust closures
//!   registered with `Database::register_typed_procedure`, so their arguments arrive typed,
//!   and returning the fields of that line as typed columns). Their bodies (`native.rs`)
//!   read and write rows through the call's `ProcedureContext` record by record, taking the
//!   statement driver's steps ([`StatementDriver`]) in the same order.
//! - [`CallDriver`]: a [`TpccDriver`] that calls either kind with one prepared statement per
//!   transaction type (`SELECT tpcc_new_order($1, …)` or `CALL tpcc_native_new_order($1, …)`).
//!
//! The PL/pgSQL bodies are written for both systems: parameters and variables carry `p_`/`v_`
//! prefixes so no name is also a column (PostgreSQL rejects the ambiguity); New-Order's lines
//! arrive as three integer arrays; the customer by last name is the middle one of a FOR loop
//! over the matching rows; Delivery sums the amounts its `UPDATE … RETURNING` hands back, and
//! Stock-Level counts the low stock rows of the items of the district's last 20 orders with
//! `s_i_id IN (SELECT ol_i_id …)`, whose rows each count once. Those last three keep every
//! statement on one table's index (Stock-Level's subquery giving its lookups' keys), which
//! Freshet runs on its short path (a join would go to the analytical engine and scan a
//! snapshot), and PostgreSQL runs the same text; Delivery's RETURNING also saves the separate
//! SUM over the order's lines.
//!
//! An unused item id (the 1% of New-Orders clause 2.4.2.3 rolls back) raises SQLSTATE
//! [`UNUSED_ITEM`], which rolls the call back in both systems; [`CallDriver`] reports it as
//! [`NewOrderOutcome::UnusedItem`].

use std::sync::Arc;

use super::txn::*;
use crate::conn::{value_cell, Cell, Conn, DbError, DbResult, Param, Rows};

/// The SQLSTATE New-Order raises for an unused item id.
pub const UNUSED_ITEM: &str = "TC001";

/// CREATE statements of the five PL/pgSQL functions and their helper, in order.
pub const PLPGSQL: [&str; 6] = [
    r#"CREATE OR REPLACE FUNCTION tpcc_customer_by_name(p_w_id INT, p_d_id INT, p_c_last VARCHAR(16)) RETURNS INT
LANGUAGE plpgsql AS $$
DECLARE
  v_c_id INT;
  v_count INT := 0;
  v_seen INT := 0;
BEGIN
  FOR v_c_id IN SELECT c_id FROM customer WHERE c_w_id = p_w_id AND c_d_id = p_d_id AND c_last = p_c_last LOOP
    v_count := v_count + 1;
  END LOOP;
  IF v_count = 0 THEN
    RAISE EXCEPTION 'no customer named % in district % of warehouse %', p_c_last, p_d_id, p_w_id USING ERRCODE = 'P0002';
  END IF;
  FOR v_c_id IN SELECT c_id FROM customer WHERE c_w_id = p_w_id AND c_d_id = p_d_id AND c_last = p_c_last ORDER BY c_first LOOP
    v_seen := v_seen + 1;
    EXIT WHEN v_seen >= (v_count + 1) / 2;
  END LOOP;
  RETURN v_c_id;
END
$$"#,
    r#"CREATE OR REPLACE FUNCTION tpcc_new_order(p_w_id INT, p_d_id INT, p_c_id INT, p_items INT[], p_supply INT[], p_quantities INT[], p_entry_d TIMESTAMP)
RETURNS TEXT LANGUAGE plpgsql AS $$
DECLARE
  v_discount NUMERIC(4,4);
  v_last VARCHAR(16);
  v_credit CHAR(2);
  v_w_tax NUMERIC(4,4);
  v_d_tax NUMERIC(4,4);
  v_o_id INT;
  v_count INT;
  v_all_local INT := 1;
  v_price NUMERIC(5,2);
  v_i_name VARCHAR(24);
  v_i_data VARCHAR(50);
  v_s_data VARCHAR(50);
  v_dist_info CHAR(24);
  v_amount NUMERIC(6,2);
  v_total NUMERIC(12,2) := 0;
BEGIN
  SELECT c_discount, c_last, c_credit INTO v_discount, v_last, v_credit
    FROM customer WHERE c_w_id = p_w_id AND c_d_id = p_d_id AND c_id = p_c_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'customer % not found', p_c_id USING ERRCODE = 'P0002';
  END IF;
  SELECT w_tax INTO v_w_tax FROM warehouse WHERE w_id = p_w_id;
  SELECT d_next_o_id, d_tax INTO v_o_id, v_d_tax FROM district WHERE d_w_id = p_w_id AND d_id = p_d_id FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'district % not found', p_d_id USING ERRCODE = 'P0002';
  END IF;
  UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = p_w_id AND d_id = p_d_id;
  v_count := array_length(p_items, 1);
  FOR i IN 1..v_count LOOP
    IF p_supply[i] <> p_w_id THEN
      v_all_local := 0;
    END IF;
  END LOOP;
  INSERT INTO oorder (o_w_id, o_d_id, o_id, o_c_id, o_carrier_id, o_ol_cnt, o_all_local, o_entry_d)
    VALUES (p_w_id, p_d_id, v_o_id, p_c_id, NULL, v_count, v_all_local, p_entry_d);
  INSERT INTO new_order (no_w_id, no_d_id, no_o_id) VALUES (p_w_id, p_d_id, v_o_id);
  FOR i IN 1..v_count LOOP
    SELECT i_price, i_name, i_data INTO v_price, v_i_name, v_i_data FROM item WHERE i_id = p_items[i];
    IF NOT FOUND THEN
      RAISE EXCEPTION 'item number % is not valid', p_items[i] USING ERRCODE = 'TC001';
    END IF;
    UPDATE stock SET s_quantity = CASE WHEN s_quantity >= p_quantities[i] + 10 THEN s_quantity - p_quantities[i]
                                       ELSE s_quantity - p_quantities[i] + 91 END,
                     s_ytd = s_ytd + p_quantities[i], s_order_cnt = s_order_cnt + 1,
                     s_remote_cnt = s_remote_cnt + CASE WHEN p_supply[i] <> p_w_id THEN 1 ELSE 0 END
      WHERE s_w_id = p_supply[i] AND s_i_id = p_items[i]
      RETURNING s_data,
                CASE p_d_id WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03 WHEN 4 THEN s_dist_04
                            WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06 WHEN 7 THEN s_dist_07 WHEN 8 THEN s_dist_08
                            WHEN 9 THEN s_dist_09 ELSE s_dist_10 END
      INTO v_s_data, v_dist_info;
    v_amount := p_quantities[i] * v_price;
    v_total := v_total + v_amount;
    INSERT INTO order_line (ol_w_id, ol_d_id, ol_o_id, ol_number, ol_i_id, ol_delivery_d, ol_amount, ol_supply_w_id, ol_quantity, ol_dist_info)
      VALUES (p_w_id, p_d_id, v_o_id, i, p_items[i], NULL, v_amount, p_supply[i], p_quantities[i], v_dist_info);
  END LOOP;
  RETURN v_o_id || ' ' || v_total;
END
$$"#,
    r#"CREATE OR REPLACE FUNCTION tpcc_payment(p_w_id INT, p_d_id INT, p_c_w_id INT, p_c_d_id INT, p_c_id INT, p_c_last VARCHAR(16), p_amount NUMERIC(6,2), p_date TIMESTAMP)
RETURNS TEXT LANGUAGE plpgsql AS $$
DECLARE
  v_w_name VARCHAR(10);
  v_d_name VARCHAR(10);
  v_c_id INT;
  v_credit CHAR(2);
  v_balance NUMERIC(12,2);
BEGIN
  UPDATE warehouse SET w_ytd = w_ytd + p_amount WHERE w_id = p_w_id RETURNING w_name INTO v_w_name;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'warehouse % not found', p_w_id USING ERRCODE = 'P0002';
  END IF;
  UPDATE district SET d_ytd = d_ytd + p_amount WHERE d_w_id = p_w_id AND d_id = p_d_id RETURNING d_name INTO v_d_name;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'district % not found', p_d_id USING ERRCODE = 'P0002';
  END IF;
  IF p_c_id IS NULL THEN
    SELECT tpcc_customer_by_name(p_c_w_id, p_c_d_id, p_c_last) INTO v_c_id;
  ELSE
    v_c_id := p_c_id;
  END IF;
  UPDATE customer SET c_balance = c_balance - p_amount, c_ytd_payment = c_ytd_payment + p_amount, c_payment_cnt = c_payment_cnt + 1
    WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_id = v_c_id
    RETURNING c_credit, c_balance INTO v_credit, v_balance;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'customer % not found', v_c_id USING ERRCODE = 'P0002';
  END IF;
  IF v_credit = 'BC' THEN
    -- C_DATA is read and rewritten only for a customer with bad credit (clause 2.5.2.2).
    UPDATE customer SET c_data = substr(v_c_id || ' ' || p_c_d_id || ' ' || p_c_w_id || ' ' || p_d_id || ' ' || p_w_id || ' ' || p_amount || ' | ' || c_data, 1, 500)
      WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_id = v_c_id;
  END IF;
  INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data)
    VALUES (v_c_id, p_c_d_id, p_c_w_id, p_d_id, p_w_id, p_date, p_amount, v_w_name || '    ' || v_d_name);
  RETURN v_c_id || ' ' || v_balance;
END
$$"#,
    r#"CREATE OR REPLACE FUNCTION tpcc_order_status(p_w_id INT, p_d_id INT, p_c_id INT, p_c_last VARCHAR(16))
RETURNS TEXT LANGUAGE plpgsql AS $$
DECLARE
  v_c_id INT;
  v_balance NUMERIC(12,2);
  v_first VARCHAR(16);
  v_middle CHAR(2);
  v_last VARCHAR(16);
  v_o_id INT;
  v_carrier INT;
  v_entry TIMESTAMP;
  v_i_id INT;
  v_supply INT;
  v_quantity INT;
  v_amount NUMERIC(6,2);
  v_delivery TIMESTAMP;
  v_lines INT := 0;
BEGIN
  IF p_c_id IS NULL THEN
    SELECT tpcc_customer_by_name(p_w_id, p_d_id, p_c_last) INTO v_c_id;
  ELSE
    v_c_id := p_c_id;
  END IF;
  SELECT c_balance, c_first, c_middle, c_last INTO v_balance, v_first, v_middle, v_last
    FROM customer WHERE c_w_id = p_w_id AND c_d_id = p_d_id AND c_id = v_c_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'customer % not found', v_c_id USING ERRCODE = 'P0002';
  END IF;
  SELECT o_id, o_carrier_id, o_entry_d INTO v_o_id, v_carrier, v_entry
    FROM oorder WHERE o_w_id = p_w_id AND o_d_id = p_d_id AND o_c_id = v_c_id ORDER BY o_id DESC LIMIT 1;
  IF NOT FOUND THEN
    RETURN v_c_id || ' - 0';
  END IF;
  FOR v_i_id, v_supply, v_quantity, v_amount, v_delivery IN
    SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line
      WHERE ol_w_id = p_w_id AND ol_d_id = p_d_id AND ol_o_id = v_o_id LOOP
    v_lines := v_lines + 1;
  END LOOP;
  RETURN v_c_id || ' ' || v_o_id || ' ' || v_lines;
END
$$"#,
    r#"CREATE OR REPLACE FUNCTION tpcc_delivery(p_w_id INT, p_carrier_id INT, p_date TIMESTAMP)
RETURNS TEXT LANGUAGE plpgsql AS $$
DECLARE
  v_o_id INT;
  v_c_id INT;
  v_amount NUMERIC(6,2);
  v_total NUMERIC(12,2);
  v_out TEXT := '';
BEGIN
  FOR v_d IN 1..10 LOOP
    -- A concurrent Delivery may take the oldest new order between the read and the delete
    -- (the delete then finds nothing): take the next one.
    LOOP
      SELECT no_o_id INTO v_o_id FROM new_order WHERE no_w_id = p_w_id AND no_d_id = v_d ORDER BY no_o_id LIMIT 1;
      EXIT WHEN NOT FOUND;
      DELETE FROM new_order WHERE no_w_id = p_w_id AND no_d_id = v_d AND no_o_id = v_o_id;
      EXIT WHEN FOUND;
    END LOOP;
    IF v_o_id IS NULL THEN
      v_out := v_out || '- ';
    ELSE
      UPDATE oorder SET o_carrier_id = p_carrier_id WHERE o_w_id = p_w_id AND o_d_id = v_d AND o_id = v_o_id
        RETURNING o_c_id INTO v_c_id;
      v_total := 0;
      FOR v_amount IN UPDATE order_line SET ol_delivery_d = p_date
                        WHERE ol_w_id = p_w_id AND ol_d_id = v_d AND ol_o_id = v_o_id RETURNING ol_amount LOOP
        v_total := v_total + v_amount;
      END LOOP;
      UPDATE customer SET c_balance = c_balance + v_total, c_delivery_cnt = c_delivery_cnt + 1
        WHERE c_w_id = p_w_id AND c_d_id = v_d AND c_id = v_c_id;
      v_out := v_out || v_o_id || ' ';
    END IF;
  END LOOP;
  RETURN v_out;
END
$$"#,
    r#"CREATE OR REPLACE FUNCTION tpcc_stock_level(p_w_id INT, p_d_id INT, p_threshold INT)
RETURNS INT LANGUAGE plpgsql AS $$
DECLARE
  v_next INT;
  v_count INT;
BEGIN
  SELECT d_next_o_id INTO v_next FROM district WHERE d_w_id = p_w_id AND d_id = p_d_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'district % not found', p_d_id USING ERRCODE = 'P0002';
  END IF;
  SELECT count(*) INTO v_count FROM stock
    WHERE s_w_id = p_w_id AND s_quantity < p_threshold
      AND s_i_id IN (SELECT ol_i_id FROM order_line
                       WHERE ol_w_id = p_w_id AND ol_d_id = p_d_id AND ol_o_id >= v_next - 20 AND ol_o_id < v_next);
  RETURN v_count;
END
$$"#,
];

/// Which procedures a [`CallDriver`] calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcedureKind {
    /// The PL/pgSQL functions of [`PLPGSQL`] (Freshet or PostgreSQL).
    PlPgSql,
    /// Freshet's native procedures of [`register_native`].
    Native,
}

const CALLS_PLPGSQL: [&str; 5] = [
    "SELECT tpcc_new_order($1, $2, $3, $4, $5, $6, $7)",
    "SELECT tpcc_payment($1, $2, $3, $4, $5, $6, $7, $8)",
    "SELECT tpcc_order_status($1, $2, $3, $4)",
    "SELECT tpcc_delivery($1, $2, $3)",
    "SELECT tpcc_stock_level($1, $2, $3)",
];

const CALLS_NATIVE: [&str; 5] = [
    "CALL tpcc_native_new_order($1, $2, $3, $4, $5, $6, $7)",
    "CALL tpcc_native_payment($1, $2, $3, $4, $5, $6, $7, $8)",
    "CALL tpcc_native_order_status($1, $2, $3, $4)",
    "CALL tpcc_native_delivery($1, $2, $3)",
    "CALL tpcc_native_stock_level($1, $2, $3)",
];

/// The transactions as one procedure call each.
pub struct CallDriver<C: Conn> {
    conn: C,
    calls: Vec<C::Stmt>,
}

/// The customer key as two parameters: the id, or NULL and the last name.
fn customer_params(key: &CustomerKey) -> [Param; 2] {
    match key {
        CustomerKey::Id(id) => [Param::Int(*id), Param::Text(String::new())],
        CustomerKey::LastName(name) => [Param::Null, Param::Text(name.clone())],
    }
}

/// The fields of a call's result: a native procedure's row as it is, or a PL/pgSQL function's
/// one text value split into its words (`-` standing for NULL).
fn fields(rows: &Rows) -> DbResult<Vec<Cell>> {
    let row = rows.first().ok_or_else(|| DbError::new("XX000", "a procedure call returned no row"))?;
    Ok(match row.as_slice() {
        [Cell::Text(s)] => s.split_whitespace().map(|w| if w == "-" { Cell::Null } else { Cell::Text(w.to_string()) }).collect(),
        cells => cells.to_vec(),
    })
}

fn field(fields: &[Cell], i: usize) -> DbResult<&Cell> {
    fields.get(i).ok_or_else(|| DbError::new("XX000", format!("procedure result {fields:?} has no field {i}")))
}

fn field_int(fields: &[Cell], i: usize) -> DbResult<Option<i64>> {
    match field(fields, i)? {
        Cell::Null => Ok(None),
        Cell::Int(v) => Ok(Some(*v)),
        Cell::Text(w) => w.parse().map(Some).map_err(|_| DbError::new("XX000", format!("procedure result field {w:?} is not an integer"))),
        other => Err(DbError::new("XX000", format!("procedure result field {other:?} is not an integer"))),
    }
}

/// An amount (`123.45`, or a NUMERIC) as hundredths.
fn field_cents(fields: &[Cell], i: usize) -> DbResult<i64> {
    let bad = |f: &dyn std::fmt::Debug| DbError::new("XX000", format!("procedure result field {f:?} is not an amount"));
    match field(fields, i)? {
        Cell::Text(w) => Param::parse_decimal(w, 2).ok_or_else(|| bad(w)),
        c @ (Cell::Int(_) | Cell::Decimal(..)) => Ok(c.as_scaled(2)),
        other => Err(bad(other)),
    }
}

impl<C: Conn> CallDriver<C> {
    /// Prepares the five calls on `conn`; the procedures must exist ([`PLPGSQL`] created, or
    /// [`register_native`] run on the database).
    pub async fn new(mut conn: C, kind: ProcedureKind) -> DbResult<Self> {
        let texts = match kind {
            ProcedureKind::PlPgSql => CALLS_PLPGSQL,
            ProcedureKind::Native => CALLS_NATIVE,
        };
        let mut calls = Vec::with_capacity(texts.len());
        for sql in texts {
            calls.push(conn.prepare(sql).await?);
        }
        Ok(CallDriver { conn, calls })
    }

    async fn call(&mut self, kind: TxnKind, params: &[Param]) -> DbResult<Vec<Cell>> {
        let rows = self.conn.query(&self.calls[kind.index()], params).await?;
        fields(&rows)
    }
}

impl<C: Conn> TpccDriver for CallDriver<C> {
    async fn new_order(&mut self, i: &NewOrderInput) -> DbResult<NewOrderOutcome> {
        let column = |f: fn(&OrderLineInput) -> i64| Param::IntArray(i.lines.iter().map(f).collect());
        let params = [
            Param::Int(i.w_id),
            Param::Int(i.d_id),
            Param::Int(i.c_id),
            column(|l| l.item),
            column(|l| l.supply_w_id),
            column(|l| l.quantity),
            Param::Timestamp(i.entry_d),
        ];
        match self.call(TxnKind::NewOrder, &params).await {
            Ok(w) => Ok(NewOrderOutcome::Committed { o_id: field_int(&w, 0)?.unwrap_or(0), total: field_cents(&w, 1)? }),
            Err(e) if e.code == UNUSED_ITEM => Ok(NewOrderOutcome::UnusedItem),
            Err(e) => Err(e),
        }
    }

    async fn payment(&mut self, i: &PaymentInput) -> DbResult<PaymentOutcome> {
        let [c_id, c_last] = customer_params(&i.customer);
        let params = [
            Param::Int(i.w_id),
            Param::Int(i.d_id),
            Param::Int(i.c_w_id),
            Param::Int(i.c_d_id),
            c_id,
            c_last,
            Param::Decimal(i.amount, 2),
            Param::Timestamp(i.date),
        ];
        let w = self.call(TxnKind::Payment, &params).await?;
        Ok(PaymentOutcome { c_id: field_int(&w, 0)?.unwrap_or(0), balance: field_cents(&w, 1)? })
    }

    async fn order_status(&mut self, i: &OrderStatusInput) -> DbResult<OrderStatusOutcome> {
        let [c_id, c_last] = customer_params(&i.customer);
        let w = self.call(TxnKind::OrderStatus, &[Param::Int(i.w_id), Param::Int(i.d_id), c_id, c_last]).await?;
        Ok(OrderStatusOutcome { c_id: field_int(&w, 0)?.unwrap_or(0), o_id: field_int(&w, 1)?, lines: field_int(&w, 2)?.unwrap_or(0) as usize })
    }

    async fn delivery(&mut self, i: &DeliveryInput) -> DbResult<DeliveryOutcome> {
        let w = self.call(TxnKind::Delivery, &[Param::Int(i.w_id), Param::Int(i.carrier_id), Param::Timestamp(i.date)]).await?;
        let delivered = (0..w.len()).map(|k| field_int(&w, k)).collect::<DbResult<Vec<_>>>()?;
        Ok(DeliveryOutcome { delivered })
    }

    async fn stock_level(&mut self, i: &StockLevelInput) -> DbResult<i64> {
        let w = self.call(TxnKind::StockLevel, &[Param::Int(i.w_id), Param::Int(i.d_id), Param::Int(i.threshold)]).await?;
        Ok(field_int(&w, 0)?.unwrap_or(0))
    }
}

// ---------------------------------------------------------------------------------------------
// Native procedures

fn arg_int(args: &[freshet::Value], i: usize) -> freshet::Result<i64> {
    use freshet::Value as V;
    match args.get(i) {
        Some(V::Int16(v)) => Ok(*v as i64),
        Some(V::Int32(v)) => Ok(*v as i64),
        Some(V::Int64(v)) => Ok(*v),
        Some(V::Text(s)) => s.trim().parse().map_err(|_| freshet::Error::mismatch(format!("argument {} is not an integer: {s:?}", i + 1))),
        other => Err(freshet::Error::mismatch(format!("argument {} is not an integer: {other:?}", i + 1))),
    }
}

fn arg_opt_int(args: &[freshet::Value], i: usize) -> freshet::Result<Option<i64>> {
    match args.get(i) {
        Some(freshet::Value::Null) => Ok(None),
        _ => arg_int(args, i).map(Some),
    }
}

fn arg_text(args: &[freshet::Value], i: usize) -> freshet::Result<String> {
    match args.get(i) {
        Some(freshet::Value::Text(s)) => Ok(s.clone()),
        other => Err(freshet::Error::mismatch(format!("argument {} is not text: {other:?}", i + 1))),
    }
}

/// Hundredths from a NUMERIC, integer or text argument.
fn arg_cents(args: &[freshet::Value], i: usize) -> freshet::Result<i64> {
    match args.get(i) {
        Some(freshet::Value::Decimal(d)) => Ok(value_cell(freshet::Value::Decimal(*d)).as_scaled(2)),
        Some(freshet::Value::Text(s)) => Param::parse_decimal(s, 2).ok_or_else(|| freshet::Error::mismatch(format!("argument {} is not an amount: {s:?}", i + 1))),
        _ => Ok(arg_int(args, i)? * 100),
    }
}

/// Microseconds since 1970 from a TIMESTAMP argument (or its text form).
fn arg_timestamp(args: &[freshet::Value], i: usize) -> freshet::Result<i64> {
    match args.get(i) {
        Some(freshet::Value::Timestamp(t)) => Ok(*t),
        Some(freshet::Value::Text(s)) => match freshet::Value::parse(s, freshet::DataType::Timestamp)? {
            freshet::Value::Timestamp(t) => Ok(t),
            other => Err(freshet::Error::mismatch(format!("argument {} is not a timestamp: {other:?}", i + 1))),
        },
        other => Err(freshet::Error::mismatch(format!("argument {} is not a timestamp: {other:?}", i + 1))),
    }
}

/// An integer array argument in its text form (`{1,2,3}`), read byte by byte: a New-Order
/// call reads three of them, and splitting and parsing each item as a string cost more than
/// the rest of the call's argument handling together.
fn arg_ints(args: &[freshet::Value], i: usize) -> freshet::Result<Vec<i64>> {
    let text = match args.get(i) {
        Some(freshet::Value::Text(s)) => s,
        other => return Err(freshet::Error::mismatch(format!("argument {} is not text: {other:?}", i + 1))),
    };
    let bad = || freshet::Error::mismatch(format!("argument {} is not an integer array: {text:?}", i + 1));
    let inner = text.trim().strip_prefix('{').and_then(|t| t.strip_suffix('}')).ok_or_else(bad)?;
    // Room for a whole order's lines.
    let mut out = Vec::with_capacity(16);
    // The item being read: its sign and value so far, and whether it has digits.
    let (mut negative, mut value, mut digits) = (false, 0i64, false);
    for (at, &b) in inner.as_bytes().iter().enumerate() {
        match b {
            b'0'..=b'9' => {
                let d = (b - b'0') as i64;
                value = value.checked_mul(10).and_then(|v| if negative { v.checked_sub(d) } else { v.checked_add(d) }).ok_or_else(bad)?;
                digits = true;
            }
            b'-' if !digits && !negative => negative = true,
            b',' if digits => {
                out.push(value);
                (negative, value, digits) = (false, 0, false);
            }
            // Blanks around an item, not inside it.
            b' ' if !digits || inner.as_bytes()[at + 1..].iter().find(|&&c| c != b' ').is_none_or(|&c| c == b',') => {}
            _ => return Err(bad()),
        }
    }
    if digits {
        out.push(value);
    } else if negative || !out.is_empty() {
        return Err(bad());
    }
    Ok(out)
}

fn customer_arg(args: &[freshet::Value], id: usize) -> freshet::Result<CustomerKey> {
    Ok(match arg_opt_int(args, id)? {
        Some(c) => CustomerKey::Id(c),
        None => CustomerKey::LastName(arg_text(args, id + 1)?),
    })
}

fn int_value(v: i64) -> freshet::Value {
    freshet::Value::Int64(v)
}

fn cents_value(cents: i64) -> freshet::Value {
    freshet::Value::Decimal(freshet::Decimal::new(cents as i128, 2))
}

/// The argument that is every transaction's warehouse.
const WAREHOUSE: usize = 0;

/// Registers the five transactions as native procedures `tpcc_native_new_order`, … with the
/// PL/pgSQL functions' parameters, declared with their types (an array as its text form), so
/// that the arguments reach the body converted. Each returns the fields of the PL/pgSQL
/// function's text line as typed columns (a missing order id: NULL). Each names its warehouse
/// argument as its partition ([`freshet::Database::register_partitioned_procedure`]): with
/// the tables partitioned by warehouse (`--partitions`), a call runs as one job on the
/// warehouse's partition.
pub fn register_native(db: &freshet::Database) -> freshet::Result<()> {
    use freshet::DataType as T;
    // An id, then an amount.
    let money = |i: usize| if i == 0 { T::Int64 } else { T::Decimal { precision: 12, scale: 2 } };
    let columns = |names: &[&str], ty: fn(usize) -> T| names.iter().enumerate().map(|(i, n)| freshet::ColumnInfo { name: n.to_string(), ty: ty(i) }).collect::<Vec<_>>();
    // A payment's amount, as the PL/pgSQL function declares it.
    let amount = T::Decimal { precision: 6, scale: 2 };
    // The tables and columns, resolved once per catalog version for all five.
    let resolved = Arc::new(freshet::Resolved::new());
    let schema = move |cx: &mut freshet::ProcedureContext| resolved.get(cx, super::native::Schema::resolve);
    let tables = schema.clone();
    db.register_partitioned_procedure(
        "tpcc_native_new_order",
        vec![T::Int64, T::Int64, T::Int64, T::Text, T::Text, T::Text, T::Timestamp],
        columns(&["o_id", "total"], money),
        WAREHOUSE,
        move |cx, args| {
            let (items, supply, quantities) = (arg_ints(args, 3)?, arg_ints(args, 4)?, arg_ints(args, 5)?);
            let lines = items
                .iter()
                .zip(&supply)
                .zip(&quantities)
                .map(|((&item, &supply_w_id), &quantity)| OrderLineInput { item, supply_w_id, quantity })
                .collect();
            let input = NewOrderInput { w_id: arg_int(args, 0)?, d_id: arg_int(args, 1)?, c_id: arg_int(args, 2)?, lines, entry_d: arg_timestamp(args, 6)? };
            let schema = tables(cx)?;
            match super::native::new_order(cx, &schema, &input)? {
                NewOrderOutcome::Committed { o_id, total } => Ok(vec![vec![int_value(o_id), cents_value(total)]]),
                // The call's error rolls back what the body did before the unused item.
                NewOrderOutcome::UnusedItem => Err(freshet::Error::new(
                    freshet::SqlState::custom(UNUSED_ITEM).unwrap_or(freshet::SqlState::RaiseException),
                    "item number is not valid",
                )),
            }
        },
    )?;
    let tables = schema.clone();
    db.register_partitioned_procedure(
        "tpcc_native_payment",
        vec![T::Int64, T::Int64, T::Int64, T::Int64, T::Int64, T::Text, amount, T::Timestamp],
        columns(&["c_id", "c_balance"], money),
        WAREHOUSE,
        move |cx, args| {
            let input = PaymentInput {
                w_id: arg_int(args, 0)?,
                d_id: arg_int(args, 1)?,
                c_w_id: arg_int(args, 2)?,
                c_d_id: arg_int(args, 3)?,
                customer: customer_arg(args, 4)?,
                amount: arg_cents(args, 6)?,
                date: arg_timestamp(args, 7)?,
            };
            let schema = tables(cx)?;
            let out = super::native::payment(cx, &schema, &input)?;
            Ok(vec![vec![int_value(out.c_id), cents_value(out.balance)]])
        },
    )?;
    let tables = schema.clone();
    db.register_partitioned_procedure(
        "tpcc_native_order_status",
        vec![T::Int64, T::Int64, T::Int64, T::Text],
        columns(&["c_id", "o_id", "lines"], |_| T::Int64),
        WAREHOUSE,
        move |cx, args| {
            let input = OrderStatusInput { w_id: arg_int(args, 0)?, d_id: arg_int(args, 1)?, customer: customer_arg(args, 2)? };
            let schema = tables(cx)?;
            let out = super::native::order_status(cx, &schema, &input)?;
            Ok(vec![vec![int_value(out.c_id), out.o_id.map_or(freshet::Value::Null, int_value), int_value(out.lines as i64)]])
        },
    )?;
    let tables = schema.clone();
    let districts: Vec<String> = (1..=super::generate::DISTRICTS_PER_WAREHOUSE).map(|d| format!("o_id_{d}")).collect();
    db.register_partitioned_procedure(
        "tpcc_native_delivery",
        vec![T::Int64, T::Int64, T::Timestamp],
        columns(&districts.iter().map(String::as_str).collect::<Vec<_>>(), |_| T::Int64),
        WAREHOUSE,
        move |cx, args| {
            let input = DeliveryInput { w_id: arg_int(args, 0)?, carrier_id: arg_int(args, 1)?, date: arg_timestamp(args, 2)? };
            let schema = tables(cx)?;
            let out = super::native::delivery(cx, &schema, &input)?;
            Ok(vec![out.delivered.iter().map(|o| o.map_or(freshet::Value::Null, int_value)).collect()])
        },
    )?;
    let tables = schema.clone();
    db.register_partitioned_procedure("tpcc_native_stock_level", vec![T::Int64, T::Int64, T::Int64], columns(&["low_stock"], |_| T::Int64), WAREHOUSE, move |cx, args| {
        let input = StockLevelInput { w_id: arg_int(args, 0)?, d_id: arg_int(args, 1)?, threshold: arg_int(args, 2)? };
        let schema = tables(cx)?;
        let count = super::native::stock_level(cx, &schema, &input)?;
        Ok(vec![vec![int_value(count)]])
    })
}

/// Creates (or replaces) the PL/pgSQL functions, as a job on any connection.
pub struct InstallPlPgSql;

impl crate::target::ConnJob for InstallPlPgSql {
    type Output = ();
    async fn run<C: Conn>(self, mut conn: C) -> DbResult<()> {
        for sql in PLPGSQL {
            let stmt = conn.prepare(sql).await?;
            conn.execute(&stmt, &[]).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::arg_ints;
    use freshet::Value;

    fn ints(s: &str) -> freshet::Result<Vec<i64>> {
        arg_ints(&[Value::Text(s.into())], 0)
    }

    #[test]
    fn integer_arrays_parse_from_their_text_form() {
        assert_eq!(ints("{1,2,3}").unwrap(), vec![1, 2, 3]);
        assert_eq!(ints(" { 10 , -20,30 } ").unwrap(), vec![10, -20, 30]);
        assert_eq!(ints("{}").unwrap(), Vec::<i64>::new());
        assert_eq!(ints("{9223372036854775807,-9223372036854775808}").unwrap(), vec![i64::MAX, i64::MIN]);
        for bad in ["1,2", "{1,,2}", "{1,}", "{,}", "{1 2}", "{x}", "{-}", "{--1}", "{1-}", "{9223372036854775808}"] {
            assert!(ints(bad).is_err(), "{bad:?} parsed");
        }
        assert!(arg_ints(&[Value::Int32(1)], 0).is_err());
    }
}
