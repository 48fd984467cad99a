//! The five TPC-C transactions (clauses 2.4–2.8) behind one trait, [`TpccDriver`], and their
//! statement-by-statement implementation over any [`Conn`], [`StatementDriver`]: BEGIN, one
//! prepared statement per step, COMMIT — what BenchBase does, and what runs against both
//! Freshet and PostgreSQL. A driver that calls stored procedures implements the same trait.
//!
//! Where the specification's SQL has an aggregate or a join, the statements here read the rows
//! by index and compute in the client, because Freshet's short path runs single-table,
//! index-driven statements only (an aggregate or join goes to the analytical engine and scans
//! a snapshot): Delivery sums `ol_amount` of the order's lines it read with one statement, and
//! Stock-Level reads the item ids of the district's last 20 orders with one statement and
//! their stock rows below the threshold with one more, an IN list of the distinct items (one
//! key lookup per item on both systems); New-Order reads its items the same way, with one
//! statement. PostgreSQL runs the same statements.
//!
//! Read-modify-write steps lock first (`SELECT … FOR UPDATE`) or update relatively
//! (`SET x = x + $1`), so every isolation level from READ COMMITTED up keeps the database
//! consistent.

use std::sync::LazyLock;

use super::generate::DISTRICTS_PER_WAREHOUSE;
use crate::conn::{Cell, Conn, DbError, DbResult, Param};

/// The transaction types, in the order of the standard mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnKind {
    NewOrder,
    Payment,
    OrderStatus,
    Delivery,
    StockLevel,
}

impl TxnKind {
    pub const ALL: [TxnKind; 5] = [TxnKind::NewOrder, TxnKind::Payment, TxnKind::OrderStatus, TxnKind::Delivery, TxnKind::StockLevel];

    pub fn name(self) -> &'static str {
        match self {
            TxnKind::NewOrder => "new_order",
            TxnKind::Payment => "payment",
            TxnKind::OrderStatus => "order_status",
            TxnKind::Delivery => "delivery",
            TxnKind::StockLevel => "stock_level",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// How Payment and Order-Status find their customer.
#[derive(Clone, Debug, PartialEq)]
pub enum CustomerKey {
    Id(i64),
    LastName(String),
}

#[derive(Clone, Debug)]
pub struct OrderLineInput {
    pub item: i64,
    pub supply_w_id: i64,
    pub quantity: i64,
}

#[derive(Clone, Debug)]
pub struct NewOrderInput {
    pub w_id: i64,
    pub d_id: i64,
    pub c_id: i64,
    pub lines: Vec<OrderLineInput>,
    /// Microseconds since 1970.
    pub entry_d: i64,
}

#[derive(Clone, Debug)]
pub struct PaymentInput {
    pub w_id: i64,
    pub d_id: i64,
    pub c_w_id: i64,
    pub c_d_id: i64,
    pub customer: CustomerKey,
    /// Hundredths.
    pub amount: i64,
    pub date: i64,
}

#[derive(Clone, Debug)]
pub struct OrderStatusInput {
    pub w_id: i64,
    pub d_id: i64,
    pub customer: CustomerKey,
}

#[derive(Clone, Debug)]
pub struct DeliveryInput {
    pub w_id: i64,
    pub carrier_id: i64,
    pub date: i64,
}

#[derive(Clone, Debug)]
pub struct StockLevelInput {
    pub w_id: i64,
    pub d_id: i64,
    pub threshold: i64,
}

/// What New-Order did.
#[derive(Clone, Debug, PartialEq)]
pub enum NewOrderOutcome {
    /// Committed order `o_id` with its total in hundredths (before tax and discount rounding).
    Committed { o_id: i64, total: i64 },
    /// Rolled back as the specification asks: an item id was unused (clause 2.4.2.3).
    UnusedItem,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PaymentOutcome {
    pub c_id: i64,
    /// The customer's balance after the payment, in hundredths.
    pub balance: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct OrderStatusOutcome {
    pub c_id: i64,
    pub o_id: Option<i64>,
    pub lines: usize,
}

/// What Delivery did: per district, the order delivered (None if it had no new order).
#[derive(Clone, Debug, PartialEq)]
pub struct DeliveryOutcome {
    pub delivered: Vec<Option<i64>>,
}

/// The five transactions. Each runs as one transaction and either commits (Ok) or is rolled
/// back and returns the error (a retryable one is 40001 or 40P01).
#[allow(async_fn_in_trait)]
pub trait TpccDriver {
    async fn new_order(&mut self, input: &NewOrderInput) -> DbResult<NewOrderOutcome>;
    async fn payment(&mut self, input: &PaymentInput) -> DbResult<PaymentOutcome>;
    async fn order_status(&mut self, input: &OrderStatusInput) -> DbResult<OrderStatusOutcome>;
    async fn delivery(&mut self, input: &DeliveryInput) -> DbResult<DeliveryOutcome>;
    /// Returns the number of distinct recently sold items whose stock is below the threshold.
    async fn stock_level(&mut self, input: &StockLevelInput) -> DbResult<i64>;
}

const STATEMENTS: [&str; 29] = [
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    // New-Order
    "SELECT c_discount, c_last, c_credit FROM customer WHERE c_w_id = $1 AND c_d_id = $2 AND c_id = $3",
    "SELECT w_tax FROM warehouse WHERE w_id = $1",
    "SELECT d_next_o_id, d_tax FROM district WHERE d_w_id = $1 AND d_id = $2 FOR UPDATE",
    "UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = $1 AND d_id = $2",
    "INSERT INTO oorder (o_w_id, o_d_id, o_id, o_c_id, o_carrier_id, o_ol_cnt, o_all_local, o_entry_d) \
     VALUES ($1, $2, $3, $4, NULL, $5, $6, $7)",
    "INSERT INTO new_order (no_w_id, no_d_id, no_o_id) VALUES ($1, $2, $3)",
    // The order's items, one key lookup each: up to 15 lines, unused slots NULL.
    "SELECT i_id, i_price, i_name, i_data FROM item \
     WHERE i_id IN ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
    "INSERT INTO order_line (ol_w_id, ol_d_id, ol_o_id, ol_number, ol_i_id, ol_delivery_d, ol_amount, \
     ol_supply_w_id, ol_quantity, ol_dist_info) VALUES ($1, $2, $3, $4, $5, NULL, $6, $7, $8, $9)",
    // Payment
    "UPDATE warehouse SET w_ytd = w_ytd + $1 WHERE w_id = $2",
    "SELECT w_name, w_street_1, w_street_2, w_city, w_state, w_zip FROM warehouse WHERE w_id = $1",
    "UPDATE district SET d_ytd = d_ytd + $1 WHERE d_w_id = $2 AND d_id = $3",
    "SELECT d_name, d_street_1, d_street_2, d_city, d_state, d_zip FROM district WHERE d_w_id = $1 AND d_id = $2",
    "SELECT c_id FROM customer WHERE c_w_id = $1 AND c_d_id = $2 AND c_last = $3 ORDER BY c_first",
    "SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, c_phone, c_since, c_credit, \
     c_credit_lim, c_discount, c_balance FROM customer WHERE c_w_id = $1 AND c_d_id = $2 AND c_id = $3 FOR UPDATE",
    "UPDATE customer SET c_balance = c_balance - $1, c_ytd_payment = c_ytd_payment + $1, \
     c_payment_cnt = c_payment_cnt + 1 WHERE c_w_id = $2 AND c_d_id = $3 AND c_id = $4",
    "UPDATE customer SET c_balance = c_balance - $1, c_ytd_payment = c_ytd_payment + $1, \
     c_payment_cnt = c_payment_cnt + 1, c_data = $5 WHERE c_w_id = $2 AND c_d_id = $3 AND c_id = $4",
    "INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    // Order-Status
    "SELECT c_balance, c_first, c_middle, c_last FROM customer WHERE c_w_id = $1 AND c_d_id = $2 AND c_id = $3",
    "SELECT o_id, o_carrier_id, o_entry_d FROM oorder WHERE o_w_id = $1 AND o_d_id = $2 AND o_c_id = $3 \
     ORDER BY o_id DESC LIMIT 1",
    "SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line \
     WHERE ol_w_id = $1 AND ol_d_id = $2 AND ol_o_id = $3",
    // Delivery
    "SELECT no_o_id FROM new_order WHERE no_w_id = $1 AND no_d_id = $2 ORDER BY no_o_id LIMIT 1",
    "DELETE FROM new_order WHERE no_w_id = $1 AND no_d_id = $2 AND no_o_id = $3",
    "UPDATE oorder SET o_carrier_id = $1 WHERE o_w_id = $2 AND o_d_id = $3 AND o_id = $4",
    "UPDATE order_line SET ol_delivery_d = $1 WHERE ol_w_id = $2 AND ol_d_id = $3 AND ol_o_id = $4",
    "UPDATE customer SET c_balance = c_balance + $1, c_delivery_cnt = c_delivery_cnt + 1 \
     WHERE c_w_id = $2 AND c_d_id = $3 AND c_id = $4",
    // Stock-Level (and Delivery's order lookup)
    "SELECT ol_i_id FROM order_line WHERE ol_w_id = $1 AND ol_d_id = $2 AND ol_o_id >= $3 AND ol_o_id < $4",
];

const EXTRA: [&str; 4] = [
    "SELECT o_c_id FROM oorder WHERE o_w_id = $1 AND o_d_id = $2 AND o_id = $3",
    "SELECT SUM(ol_amount) FROM order_line WHERE ol_w_id = $1 AND ol_d_id = $2 AND ol_o_id = $3",
    "SELECT d_next_o_id FROM district WHERE d_w_id = $1 AND d_id = $2",
    "SELECT c_data FROM customer WHERE c_w_id = $1 AND c_d_id = $2 AND c_id = $3",
];

// Positions in STATEMENTS, then EXTRA, NO_STOCK_TEXTS and SL_STOCK_TEXT (`statement_texts`).
const BEGIN: usize = 0;
const COMMIT: usize = 1;
const ROLLBACK: usize = 2;
const NO_CUSTOMER: usize = 3;
const NO_WAREHOUSE: usize = 4;
const NO_DISTRICT: usize = 5;
const NO_DISTRICT_NEXT: usize = 6;
const NO_ORDER: usize = 7;
const NO_NEW_ORDER: usize = 8;
const NO_ITEM: usize = 9;
/// The most lines an order has (clause 2.4.1.3), the IN-list slots of [`NO_ITEM`].
const NO_MAX_LINES: usize = 15;
const NO_LINE: usize = 10;
const PAY_WAREHOUSE_YTD: usize = 11;
const PAY_WAREHOUSE: usize = 12;
const PAY_DISTRICT_YTD: usize = 13;
const PAY_DISTRICT: usize = 14;
const CUSTOMER_BY_NAME: usize = 15;
const PAY_CUSTOMER: usize = 16;
const PAY_CUSTOMER_UPDATE: usize = 17;
const PAY_CUSTOMER_UPDATE_BC: usize = 18;
const PAY_HISTORY: usize = 19;
const OS_CUSTOMER: usize = 20;
const OS_ORDER: usize = 21;
const OS_LINES: usize = 22;
const DEL_OLDEST: usize = 23;
const DEL_DELETE: usize = 24;
const DEL_CARRIER: usize = 25;
const DEL_LINES_DATE: usize = 26;
const DEL_CUSTOMER: usize = 27;
const SL_ITEMS: usize = 28;
const DEL_ORDER_CUSTOMER: usize = 29;
const DEL_LINE_AMOUNTS: usize = 30;
const SL_DISTRICT: usize = 31;
/// C_DATA, read only for a customer with bad credit (clause 2.5.2.2).
const PAY_CUSTOMER_DATA: usize = 32;
/// After STATEMENTS and EXTRA, `NO_STOCK_DISTRICT + d - 1`: the stock statement of district `d`.
const NO_STOCK_DISTRICT: usize = 33;
/// After STATEMENTS, EXTRA and [`NO_STOCK_TEXTS`]: [`SL_STOCK_TEXT`].
const SL_STOCK: usize = 43;
const _: () = assert!(NO_STOCK_DISTRICT == STATEMENTS.len() + EXTRA.len() && SL_STOCK == NO_STOCK_DISTRICT + 10);

/// The most distinct items Stock-Level looks at: 20 orders of at most 15 lines.
const SL_MAX_ITEMS: usize = 20 * 15;

/// Stock-Level's stock rows below the threshold among the district's recent items, in one
/// statement: `s_i_id IN ($2, …)` with one parameter per item (those not needed are NULL,
/// which matches nothing) and the threshold last. Both systems look the items up by key.
static SL_STOCK_TEXT: LazyLock<String> = LazyLock::new(|| {
    let items: Vec<String> = (2..2 + SL_MAX_ITEMS).map(|i| format!("${i}")).collect();
    format!(
        "SELECT s_i_id FROM stock WHERE s_w_id = $1 AND s_quantity < ${} AND s_i_id IN ({})",
        SL_MAX_ITEMS + 2,
        items.join(", ")
    )
});

/// New-Order's stock update (clause 2.4.2.2: the quantity drops by the ordered amount, plus 91
/// when fewer than 10 would be left), returning S_DATA and the one S_DIST_xx of the order's
/// district (BenchBase reads all ten): one statement per district, at `NO_STOCK_DISTRICT + d - 1`.
/// One UPDATE … RETURNING rather than SELECT … FOR UPDATE and UPDATE: the row is locked and
/// changed at once.
static NO_STOCK_TEXTS: LazyLock<Vec<String>> = LazyLock::new(|| {
    (1..=DISTRICTS_PER_WAREHOUSE)
        .map(|d| {
            format!(
                "UPDATE stock SET s_quantity = CASE WHEN s_quantity >= $1 + 10 THEN s_quantity - $1 ELSE s_quantity - $1 + 91 END, \
                 s_ytd = s_ytd + $2, s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + $3 \
                 WHERE s_w_id = $4 AND s_i_id = $5 RETURNING s_data, s_dist_{d:02}"
            )
        })
        .collect()
});

/// Every statement's text, in position order.
fn statement_texts() -> impl Iterator<Item = &'static str> {
    let stock = NO_STOCK_TEXTS.iter().map(String::as_str);
    STATEMENTS.iter().chain(EXTRA.iter()).copied().chain(stock).chain([SL_STOCK_TEXT.as_str()])
}

/// The transactions as prepared statements over one connection.
pub struct StatementDriver<C: Conn> {
    pub conn: C,
    stmts: Vec<C::Stmt>,
}

fn int(p: i64) -> Param {
    Param::Int(p)
}

fn cents(p: i64) -> Param {
    Param::Decimal(p, 2)
}

fn missing(what: &str) -> DbError {
    DbError::new("P0002", format!("{what} not found"))
}

impl<C: Conn> StatementDriver<C> {
    /// Prepares every statement on `conn`.
    pub async fn new(mut conn: C) -> DbResult<Self> {
        let mut stmts = Vec::new();
        for sql in statement_texts() {
            stmts.push(conn.prepare(sql).await?);
        }
        Ok(StatementDriver { conn, stmts })
    }

    async fn q(&mut self, s: usize, params: &[Param]) -> DbResult<Vec<Vec<Cell>>> {
        self.conn.query(&self.stmts[s], params).await
    }

    async fn x(&mut self, s: usize, params: &[Param]) -> DbResult<u64> {
        self.conn.execute(&self.stmts[s], params).await
    }

    /// Runs `body` between BEGIN and COMMIT; rolls back when it fails.
    async fn in_transaction<T>(&mut self, body: impl AsyncFnOnce(&mut Self) -> DbResult<T>) -> DbResult<T> {
        self.x(BEGIN, &[]).await?;
        match body(self).await {
            Ok(v) => match self.x(COMMIT, &[]).await {
                Ok(_) => Ok(v),
                Err(e) => {
                    let _ = self.x(ROLLBACK, &[]).await;
                    Err(e)
                }
            },
            Err(e) => {
                let _ = self.x(ROLLBACK, &[]).await;
                Err(e)
            }
        }
    }

    /// The customer id for a key: by id, or the middle one (n/2 rounded up) of the customers
    /// with that last name ordered by first name (clause 2.5.2.2).
    async fn customer_id(&mut self, w: i64, d: i64, key: &CustomerKey) -> DbResult<i64> {
        match key {
            CustomerKey::Id(id) => Ok(*id),
            CustomerKey::LastName(name) => {
                let rows = self.q(CUSTOMER_BY_NAME, &[int(w), int(d), Param::Text(name.clone())]).await?;
                if rows.is_empty() {
                    return Err(missing("customer by last name"));
                }
                Ok(rows[rows.len().div_ceil(2) - 1][0].as_i64())
            }
        }
    }

    async fn new_order_body(&mut self, i: &NewOrderInput) -> DbResult<NewOrderOutcome> {
        let (w, d) = (i.w_id, i.d_id);
        if i.lines.len() > NO_MAX_LINES {
            return Err(DbError::new("XX000", format!("{} order lines", i.lines.len())));
        }
        let customer = self.q(NO_CUSTOMER, &[int(w), int(d), int(i.c_id)]).await?;
        let _discount = customer.first().ok_or_else(|| missing("customer"))?[0].as_scaled(4);
        let warehouse = self.q(NO_WAREHOUSE, &[int(w)]).await?;
        let _w_tax = warehouse.first().ok_or_else(|| missing("warehouse"))?[0].as_scaled(4);
        let district = self.q(NO_DISTRICT, &[int(w), int(d)]).await?;
        let o_id = district.first().ok_or_else(|| missing("district"))?[0].as_i64();
        self.x(NO_DISTRICT_NEXT, &[int(w), int(d)]).await?;
        let all_local = i.lines.iter().all(|l| l.supply_w_id == w) as i64;
        self.x(NO_ORDER, &[int(w), int(d), int(o_id), int(i.c_id), int(i.lines.len() as i64), int(all_local), Param::Timestamp(i.entry_d)])
            .await?;
        self.x(NO_NEW_ORDER, &[int(w), int(d), int(o_id)]).await?;
        let mut ids: Vec<Param> = i.lines.iter().map(|l| int(l.item)).collect();
        ids.resize(NO_MAX_LINES, Param::Null);
        let items = self.q(NO_ITEM, &ids).await?;
        let mut total = 0;
        for (n, line) in i.lines.iter().enumerate() {
            let Some(item) = items.iter().find(|r| r[0].as_i64() == line.item) else {
                return Ok(NewOrderOutcome::UnusedItem);
            };
            let price = item[1].as_scaled(2);
            let remote = (line.supply_w_id != w) as i64;
            let stock_key = [int(line.quantity), int(line.quantity), int(remote), int(line.supply_w_id), int(line.item)];
            let stock = self.q(NO_STOCK_DISTRICT + d as usize - 1, &stock_key).await?;
            let stock = stock.first().ok_or_else(|| missing("stock"))?;
            let dist_info = stock[1].as_str().to_string();
            let amount = line.quantity * price;
            total += amount;
            self.x(
                NO_LINE,
                &[
                    int(w),
                    int(d),
                    int(o_id),
                    int(n as i64 + 1),
                    int(line.item),
                    cents(amount),
                    int(line.supply_w_id),
                    int(line.quantity),
                    Param::Text(dist_info),
                ],
            )
            .await?;
        }
        Ok(NewOrderOutcome::Committed { o_id, total })
    }

    async fn payment_body(&mut self, i: &PaymentInput) -> DbResult<PaymentOutcome> {
        let amount = cents(i.amount);
        self.x(PAY_WAREHOUSE_YTD, &[amount.clone(), int(i.w_id)]).await?;
        let warehouse = self.q(PAY_WAREHOUSE, &[int(i.w_id)]).await?;
        let w_name = warehouse.first().ok_or_else(|| missing("warehouse"))?[0].as_str().to_string();
        self.x(PAY_DISTRICT_YTD, &[amount.clone(), int(i.w_id), int(i.d_id)]).await?;
        let district = self.q(PAY_DISTRICT, &[int(i.w_id), int(i.d_id)]).await?;
        let d_name = district.first().ok_or_else(|| missing("district"))?[0].as_str().to_string();
        let c_id = self.customer_id(i.c_w_id, i.c_d_id, &i.customer).await?;
        let customer = self.q(PAY_CUSTOMER, &[int(i.c_w_id), int(i.c_d_id), int(c_id)]).await?;
        let customer = customer.first().ok_or_else(|| missing("customer"))?;
        let balance = customer[13].as_scaled(2) - i.amount;
        let key = [amount.clone(), int(i.c_w_id), int(i.c_d_id), int(c_id)];
        if customer[10].as_str().starts_with("BC") {
            let old_data = self.q(PAY_CUSTOMER_DATA, &[int(i.c_w_id), int(i.c_d_id), int(c_id)]).await?;
            let old_data = old_data.first().ok_or_else(|| missing("customer"))?;
            let mut data = format!("{c_id} {} {} {} {} {}.{:02} | ", i.c_d_id, i.c_w_id, i.d_id, i.w_id, i.amount / 100, i.amount % 100);
            data.push_str(old_data[0].as_str());
            data.truncate(500);
            let mut params = key.to_vec();
            params.push(Param::Text(data));
            self.x(PAY_CUSTOMER_UPDATE_BC, &params).await?;
        } else {
            self.x(PAY_CUSTOMER_UPDATE, &key).await?;
        }
        let h_data = format!("{w_name}    {d_name}");
        self.x(
            PAY_HISTORY,
            &[int(c_id), int(i.c_d_id), int(i.c_w_id), int(i.d_id), int(i.w_id), Param::Timestamp(i.date), amount, Param::Text(h_data)],
        )
        .await?;
        Ok(PaymentOutcome { c_id, balance })
    }

    async fn order_status_body(&mut self, i: &OrderStatusInput) -> DbResult<OrderStatusOutcome> {
        let c_id = self.customer_id(i.w_id, i.d_id, &i.customer).await?;
        let customer = self.q(OS_CUSTOMER, &[int(i.w_id), int(i.d_id), int(c_id)]).await?;
        customer.first().ok_or_else(|| missing("customer"))?;
        let order = self.q(OS_ORDER, &[int(i.w_id), int(i.d_id), int(c_id)]).await?;
        let Some(o) = order.first() else {
            return Ok(OrderStatusOutcome { c_id, o_id: None, lines: 0 });
        };
        let o_id = o[0].as_i64();
        let lines = self.q(OS_LINES, &[int(i.w_id), int(i.d_id), int(o_id)]).await?;
        Ok(OrderStatusOutcome { c_id, o_id: Some(o_id), lines: lines.len() })
    }

    async fn delivery_body(&mut self, i: &DeliveryInput) -> DbResult<DeliveryOutcome> {
        let w = i.w_id;
        let mut delivered = Vec::with_capacity(DISTRICTS_PER_WAREHOUSE as usize);
        for d in 1..=DISTRICTS_PER_WAREHOUSE {
            // Under READ COMMITTED a concurrent Delivery may take the oldest new order between
            // our read and our delete (the delete then finds nothing): take the next one.
            let mut o_id = None;
            for _ in 0..10 {
                let oldest = self.q(DEL_OLDEST, &[int(w), int(d)]).await?;
                let Some(row) = oldest.first() else { break };
                let candidate = row[0].as_i64();
                if self.x(DEL_DELETE, &[int(w), int(d), int(candidate)]).await? == 1 {
                    o_id = Some(candidate);
                    break;
                }
            }
            let Some(o_id) = o_id else {
                delivered.push(None);
                continue;
            };
            let order = self.q(DEL_ORDER_CUSTOMER, &[int(w), int(d), int(o_id)]).await?;
            let c_id = order.first().ok_or_else(|| missing("order"))?[0].as_i64();
            self.x(DEL_CARRIER, &[int(i.carrier_id), int(w), int(d), int(o_id)]).await?;
            self.x(DEL_LINES_DATE, &[Param::Timestamp(i.date), int(w), int(d), int(o_id)]).await?;
            let amounts = self.q(DEL_LINE_AMOUNTS, &[int(w), int(d), int(o_id)]).await?;
            let total: i64 = amounts.first().map_or(0, |r| r[0].as_scaled(2));
            self.x(DEL_CUSTOMER, &[cents(total), int(w), int(d), int(c_id)]).await?;
            delivered.push(Some(o_id));
        }
        Ok(DeliveryOutcome { delivered })
    }

    async fn stock_level_body(&mut self, i: &StockLevelInput) -> DbResult<i64> {
        let district = self.q(SL_DISTRICT, &[int(i.w_id), int(i.d_id)]).await?;
        let next = district.first().ok_or_else(|| missing("district"))?[0].as_i64();
        let lines = self.q(SL_ITEMS, &[int(i.w_id), int(i.d_id), int(next - 20), int(next)]).await?;
        let mut items: Vec<i64> = lines.iter().map(|r| r[0].as_i64()).collect();
        items.sort_unstable();
        items.dedup();
        if items.len() > SL_MAX_ITEMS {
            return Err(DbError::new("XX000", format!("{} distinct items in the last 20 orders", items.len())));
        }
        let mut params = Vec::with_capacity(SL_MAX_ITEMS + 2);
        params.push(int(i.w_id));
        params.extend(items.iter().map(|&item| int(item)));
        params.resize(SL_MAX_ITEMS + 1, Param::Null);
        params.push(int(i.threshold));
        // Each item once in the list, so each qualifying stock row comes once.
        Ok(self.q(SL_STOCK, &params).await?.len() as i64)
    }
}

impl<C: Conn> TpccDriver for StatementDriver<C> {
    async fn new_order(&mut self, input: &NewOrderInput) -> DbResult<NewOrderOutcome> {
        self.x(BEGIN, &[]).await?;
        let outcome = self.new_order_body(input).await;
        // The unused-item case and every error end in ROLLBACK.
        if matches!(outcome, Ok(NewOrderOutcome::Committed { .. })) {
            if let Err(e) = self.x(COMMIT, &[]).await {
                let _ = self.x(ROLLBACK, &[]).await;
                return Err(e);
            }
        } else {
            let _ = self.x(ROLLBACK, &[]).await;
        }
        outcome
    }

    async fn payment(&mut self, input: &PaymentInput) -> DbResult<PaymentOutcome> {
        self.in_transaction(async |s: &mut Self| s.payment_body(input).await).await
    }

    async fn order_status(&mut self, input: &OrderStatusInput) -> DbResult<OrderStatusOutcome> {
        self.in_transaction(async |s: &mut Self| s.order_status_body(input).await).await
    }

    async fn delivery(&mut self, input: &DeliveryInput) -> DbResult<DeliveryOutcome> {
        self.in_transaction(async |s: &mut Self| s.delivery_body(input).await).await
    }

    async fn stock_level(&mut self, input: &StockLevelInput) -> DbResult<i64> {
        self.in_transaction(async |s: &mut Self| s.stock_level_body(input).await).await
    }
}
