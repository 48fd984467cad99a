//! A TPC-C terminal: picks transactions in the standard mix (45% New-Order, 43% Payment, 4%
//! each Order-Status, Delivery and Stock-Level) and generates their inputs as clauses 2.4.1,
//! 2.5.1, 2.6.1, 2.7.1 and 2.8.1 describe. No keying or think time: a terminal sends its next
//! transaction as soon as the last one ended.

use super::generate::{Scale, DISTRICTS_PER_WAREHOUSE};
use super::random::{last_name, NurandConstants, Rng};
use super::txn::*;

/// What every terminal of a run shares.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    pub warehouses: i64,
    pub scale: Scale,
    /// The run's NURand constants (see [`NurandConstants::for_run`]).
    pub constants: NurandConstants,
}

pub struct Terminal {
    pub rng: Rng,
    pub workload: Workload,
    /// The home warehouse.
    pub w_id: i64,
    /// The district of its Stock-Level transactions (fixed per terminal, clause 2.8.1.1).
    pub d_id: i64,
}

impl Terminal {
    /// Terminal `n` (0-based) of a run: warehouses and districts are dealt out in turn.
    pub fn new(n: usize, workload: Workload, seed: u64) -> Terminal {
        let w = workload.warehouses.max(1);
        Terminal {
            rng: Rng::stream(seed, n as u64 + 1, "terminal"),
            workload,
            w_id: n as i64 % w + 1,
            d_id: (n as i64 / w) % DISTRICTS_PER_WAREHOUSE + 1,
        }
    }

    pub fn next_kind(&mut self) -> TxnKind {
        match self.rng.uniform(1, 100) {
            1..=45 => TxnKind::NewOrder,
            46..=88 => TxnKind::Payment,
            89..=92 => TxnKind::OrderStatus,
            93..=96 => TxnKind::Delivery,
            _ => TxnKind::StockLevel,
        }
    }

    fn other_warehouse(&mut self) -> i64 {
        let w = self.workload.warehouses;
        if w == 1 {
            return self.w_id;
        }
        let x = self.rng.uniform(1, w - 1);
        if x >= self.w_id { x + 1 } else { x }
    }

    fn customer_id(&mut self) -> i64 {
        let c = self.workload.constants.c_id;
        self.rng.nurand(1023, 1, self.workload.scale.customers_per_district, c)
    }

    /// 60% by last name, 40% by id (clauses 2.5.1.2, 2.6.1.2). With fewer than 1,000
    /// customers per district (test scales) names are drawn from those that exist.
    fn customer_key(&mut self) -> CustomerKey {
        if self.rng.uniform(1, 100) <= 60 {
            let top = (self.workload.scale.customers_per_district - 1).min(999);
            let c = self.workload.constants.c_last;
            CustomerKey::LastName(last_name(self.rng.nurand(255, 0, top, c)))
        } else {
            CustomerKey::Id(self.customer_id())
        }
    }

    pub fn new_order(&mut self, now: i64) -> NewOrderInput {
        let d_id = self.rng.uniform(1, DISTRICTS_PER_WAREHOUSE);
        let c_id = self.customer_id();
        let count = self.rng.uniform(5, 15);
        let rollback = self.rng.uniform(1, 100) == 1;
        let items = self.workload.scale.items;
        let c = self.workload.constants.ol_i_id;
        let mut lines = Vec::with_capacity(count as usize);
        for n in 0..count {
            let item = if rollback && n == count - 1 { items + 1 } else { self.rng.nurand(8191, 1, items, c) };
            let supply_w_id = if self.rng.uniform(1, 100) == 1 { self.other_warehouse() } else { self.w_id };
            lines.push(OrderLineInput { item, supply_w_id, quantity: self.rng.uniform(1, 10) });
        }
        NewOrderInput { w_id: self.w_id, d_id, c_id, lines, entry_d: now }
    }

    pub fn payment(&mut self, now: i64) -> PaymentInput {
        let d_id = self.rng.uniform(1, DISTRICTS_PER_WAREHOUSE);
        let (c_w_id, c_d_id) = if self.rng.uniform(1, 100) <= 85 || self.workload.warehouses == 1 {
            (self.w_id, d_id)
        } else {
            (self.other_warehouse(), self.rng.uniform(1, DISTRICTS_PER_WAREHOUSE))
        };
        let customer = self.customer_key();
        PaymentInput { w_id: self.w_id, d_id, c_w_id, c_d_id, customer, amount: self.rng.uniform(100, 500_000), date: now }
    }

    pub fn order_status(&mut self) -> OrderStatusInput {
        let d_id = self.rng.uniform(1, DISTRICTS_PER_WAREHOUSE);
        OrderStatusInput { w_id: self.w_id, d_id, customer: self.customer_key() }
    }

    pub fn delivery(&mut self, now: i64) -> DeliveryInput {
        DeliveryInput { w_id: self.w_id, carrier_id: self.rng.uniform(1, 10), date: now }
    }

    pub fn stock_level(&mut self) -> StockLevelInput {
        StockLevelInput { w_id: self.w_id, d_id: self.d_id, threshold: self.rng.uniform(10, 20) }
    }
}

/// Microseconds since 1970 by the wall clock.
pub fn now_micros() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}
