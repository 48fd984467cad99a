//! TPC-C and CH-benCHmark tooling on Freshet: the loader's database passes the consistency
//! conditions, each transaction has its specified effects (including New-Order's rollback on
//! an unused item) whether it runs statement by statement, as one PL/pgSQL call or as one
//! native procedure call, short mixed runs of each kind stay consistent in-process and over
//! the wire, and the
//! CH queries give the answers DuckDB gave on the same generated data.
//!
//! All of it runs at `Scale::TINY` (1,000 items, 30 customers and 30 orders per district) so
//! that a debug build loads in about a second; the specification's scale differs only in
//! cardinalities.

use freshet::{Config, Database};
use freshet_bench::ch::{self, answers};
use freshet_bench::conn::{Cell, Conn, DbResult, Embedded};
use freshet_bench::target::{ConnJob, Target};
use freshet_bench::tpcc::generate::Scale;
use freshet_bench::tpcc::load::{load, LoadSpec};
use freshet_bench::tpcc::random::NurandConstants;
use freshet_bench::tpcc::run::{run, DriverKind, RunSpec};
use freshet_bench::tpcc::schema::Flavor;
use freshet_bench::tpcc::terminal::Workload;
use freshet_bench::tpcc::txn::*;
use freshet_bench::tpcc::procedures::{register_native, CallDriver, InstallPlPgSql, ProcedureKind};
use freshet_bench::tpcc::StatementDriver;

const SEED: u64 = 42;

fn loaded(warehouses: i64) -> Database {
    let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
    let spec = LoadSpec { warehouses, scale: Scale::TINY, seed: SEED, threads: 2, progress: false, partitioned: false };
    load(&Target::embedded(db.clone()), Flavor::Freshet, spec).unwrap();
    db
}

fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    futures::executor::block_on(f)
}

/// The three ways the tests drive the transactions in-process: statement by statement, one
/// PL/pgSQL function call, one native procedure call.
#[derive(Clone, Copy, Debug)]
enum Drive {
    Statements,
    PlPgSql,
    Native,
}

const DRIVES: [Drive; 3] = [Drive::Statements, Drive::PlPgSql, Drive::Native];

enum AnyDriver {
    Statements(StatementDriver<Embedded>),
    Calls(CallDriver<Embedded>),
}

impl TpccDriver for AnyDriver {
    async fn new_order(&mut self, i: &NewOrderInput) -> DbResult<NewOrderOutcome> {
        match self {
            AnyDriver::Statements(d) => d.new_order(i).await,
            AnyDriver::Calls(d) => d.new_order(i).await,
        }
    }
    async fn payment(&mut self, i: &PaymentInput) -> DbResult<PaymentOutcome> {
        match self {
            AnyDriver::Statements(d) => d.payment(i).await,
            AnyDriver::Calls(d) => d.payment(i).await,
        }
    }
    async fn order_status(&mut self, i: &OrderStatusInput) -> DbResult<OrderStatusOutcome> {
        match self {
            AnyDriver::Statements(d) => d.order_status(i).await,
            AnyDriver::Calls(d) => d.order_status(i).await,
        }
    }
    async fn delivery(&mut self, i: &DeliveryInput) -> DbResult<DeliveryOutcome> {
        match self {
            AnyDriver::Statements(d) => d.delivery(i).await,
            AnyDriver::Calls(d) => d.delivery(i).await,
        }
    }
    async fn stock_level(&mut self, i: &StockLevelInput) -> DbResult<i64> {
        match self {
            AnyDriver::Statements(d) => d.stock_level(i).await,
            AnyDriver::Calls(d) => d.stock_level(i).await,
        }
    }
}

fn driver(db: &Database, drive: Drive) -> AnyDriver {
    match drive {
        Drive::Statements => AnyDriver::Statements(block(StatementDriver::new(Embedded::new(db))).unwrap()),
        Drive::PlPgSql => {
            Target::embedded(db.clone()).run(InstallPlPgSql).unwrap();
            AnyDriver::Calls(block(CallDriver::new(Embedded::new(db), ProcedureKind::PlPgSql)).unwrap())
        }
        Drive::Native => {
            register_native(db).unwrap();
            AnyDriver::Calls(block(CallDriver::new(Embedded::new(db), ProcedureKind::Native)).unwrap())
        }
    }
}

/// The single value of a query.
fn value(db: &Database, sql: &str) -> Cell {
    let mut c = Embedded::new(db);
    let rows = block(c.simple(sql)).unwrap();
    assert_eq!(rows.len(), 1, "{sql}");
    rows[0][0].clone()
}

fn int(db: &Database, sql: &str) -> i64 {
    value(db, sql).as_i64()
}

fn cents(db: &Database, sql: &str) -> i64 {
    value(db, sql).as_scaled(2)
}

fn assert_consistent(target: &Target, warehouses: i64) {
    let results = target.run(ch::Consistency { warehouses }).unwrap();
    assert_eq!(results.len(), 4);
    for r in results {
        assert!(r.holds, "condition {} ({}): {} of {} groups violate it", r.number, r.description, r.violations, r.groups);
    }
}

#[test]
fn loaded_database_has_the_specified_cardinalities_and_is_consistent() {
    let db = loaded(2);
    let s = Scale::TINY;
    let per_w = |t: &str| int(&db, &format!("SELECT count(*) FROM {t}"));
    assert_eq!(per_w("warehouse"), 2);
    assert_eq!(per_w("district"), 20);
    assert_eq!(per_w("customer"), 2 * 10 * s.customers_per_district);
    assert_eq!(per_w("history"), 2 * 10 * s.customers_per_district);
    assert_eq!(per_w("oorder"), 2 * 10 * s.orders_per_district);
    assert_eq!(per_w("new_order"), 2 * 10 * (s.orders_per_district - s.first_new_order() + 1));
    assert_eq!(per_w("item"), s.items);
    assert_eq!(per_w("stock"), 2 * s.items);
    assert_eq!(per_w("region"), 5);
    assert_eq!(per_w("nation"), 62);
    assert_eq!(per_w("supplier"), 10_000);
    // Customers' first last names come from the syllable table; ~10% have bad credit.
    assert_eq!(value(&db, "SELECT c_last FROM customer WHERE c_w_id = 1 AND c_d_id = 1 AND c_id = 1"), Cell::Text("BARBARBAR".into()));
    let bc = int(&db, "SELECT count(*) FROM customer WHERE c_credit = 'BC'");
    assert!((20..=100).contains(&bc), "{bc} customers with bad credit of 600");
    // Undelivered orders have no carrier and undelivered lines no delivery date.
    assert_eq!(int(&db, "SELECT count(*) FROM oorder WHERE o_carrier_id IS NULL"), per_w("new_order"));
    assert_consistent(&Target::embedded(db), 2);
}

#[test]
fn new_order_commits_its_effects_and_rolls_back_on_an_unused_item() {
    for drive in DRIVES {
        new_order_commits_its_effects_and_rolls_back_on_an_unused_item_with(drive);
    }
}

fn new_order_commits_its_effects_and_rolls_back_on_an_unused_item_with(drive: Drive) {
    let db = loaded(1);
    let mut d = driver(&db, drive);
    let next = int(&db, "SELECT d_next_o_id FROM district WHERE d_w_id = 1 AND d_id = 3");
    let stock_before = int(&db, "SELECT s_quantity FROM stock WHERE s_w_id = 1 AND s_i_id = 7");
    let lines = vec![
        OrderLineInput { item: 7, supply_w_id: 1, quantity: 4 },
        OrderLineInput { item: 8, supply_w_id: 1, quantity: 2 },
        OrderLineInput { item: 9, supply_w_id: 1, quantity: 1 },
    ];
    let input = NewOrderInput { w_id: 1, d_id: 3, c_id: 5, lines: lines.clone(), entry_d: 1_800_000_000_000_000 };
    let NewOrderOutcome::Committed { o_id, total } = block(d.new_order(&input)).unwrap() else { panic!("rolled back") };
    assert_eq!(o_id, next);
    let price = |i| cents(&db, &format!("SELECT i_price FROM item WHERE i_id = {i}"));
    assert_eq!(total, 4 * price(7) + 2 * price(8) + price(9));
    assert_eq!(int(&db, "SELECT d_next_o_id FROM district WHERE d_w_id = 1 AND d_id = 3"), next + 1);
    assert_eq!(int(&db, &format!("SELECT o_c_id FROM oorder WHERE o_w_id = 1 AND o_d_id = 3 AND o_id = {o_id}")), 5);
    assert_eq!(int(&db, &format!("SELECT count(*) FROM new_order WHERE no_w_id = 1 AND no_d_id = 3 AND no_o_id = {o_id}")), 1);
    assert_eq!(int(&db, &format!("SELECT count(*) FROM order_line WHERE ol_w_id = 1 AND ol_d_id = 3 AND ol_o_id = {o_id}")), 3);
    let expected = if stock_before >= 14 { stock_before - 4 } else { stock_before - 4 + 91 };
    assert_eq!(int(&db, "SELECT s_quantity FROM stock WHERE s_w_id = 1 AND s_i_id = 7"), expected);
    assert_eq!(int(&db, "SELECT s_order_cnt FROM stock WHERE s_w_id = 1 AND s_i_id = 7"), 1);

    // The 1% case: the last item id is unused; nothing of the transaction stays.
    let mut bad = lines;
    bad.push(OrderLineInput { item: Scale::TINY.items + 1, supply_w_id: 1, quantity: 1 });
    let input = NewOrderInput { w_id: 1, d_id: 3, c_id: 5, lines: bad, entry_d: 1_800_000_000_000_000 };
    assert_eq!(block(d.new_order(&input)).unwrap(), NewOrderOutcome::UnusedItem);
    assert_eq!(int(&db, "SELECT d_next_o_id FROM district WHERE d_w_id = 1 AND d_id = 3"), next + 1);
    assert_eq!(int(&db, &format!("SELECT count(*) FROM oorder WHERE o_w_id = 1 AND o_d_id = 3 AND o_id = {}", next + 1)), 0);
    assert_eq!(int(&db, "SELECT s_order_cnt FROM stock WHERE s_w_id = 1 AND s_i_id = 7"), 1);
    assert_consistent(&Target::embedded(db), 1);
}

#[test]
fn payment_updates_balances_year_to_date_and_history() {
    for drive in DRIVES {
        payment_updates_balances_year_to_date_and_history_with(drive);
    }
}

fn payment_updates_balances_year_to_date_and_history_with(drive: Drive) {
    let db = loaded(1);
    let mut d = driver(&db, drive);
    let w_ytd = cents(&db, "SELECT w_ytd FROM warehouse WHERE w_id = 1");
    let balance = cents(&db, "SELECT c_balance FROM customer WHERE c_w_id = 1 AND c_d_id = 2 AND c_id = 4");
    let input =
        PaymentInput { w_id: 1, d_id: 2, c_w_id: 1, c_d_id: 2, customer: CustomerKey::Id(4), amount: 12_345, date: 1_800_000_000_000_000 };
    let out = block(d.payment(&input)).unwrap();
    assert_eq!(out, PaymentOutcome { c_id: 4, balance: balance - 12_345 });
    assert_eq!(cents(&db, "SELECT w_ytd FROM warehouse WHERE w_id = 1"), w_ytd + 12_345);
    assert_eq!(cents(&db, "SELECT d_ytd FROM district WHERE d_w_id = 1 AND d_id = 2"), 3_000_000 + 12_345);
    assert_eq!(cents(&db, "SELECT c_balance FROM customer WHERE c_w_id = 1 AND c_d_id = 2 AND c_id = 4"), balance - 12_345);
    assert_eq!(int(&db, "SELECT c_payment_cnt FROM customer WHERE c_w_id = 1 AND c_d_id = 2 AND c_id = 4"), 2);
    assert_eq!(int(&db, "SELECT count(*) FROM history WHERE h_c_id = 4 AND h_c_d_id = 2 AND h_amount = 123.45"), 1);

    // By last name: customer 4 is the only "BARBARPRI" (name number 3) in the district.
    let input = PaymentInput { customer: CustomerKey::LastName("BARBARPRI".into()), amount: 100, ..input };
    assert_eq!(block(d.payment(&input)).unwrap().c_id, 4);

    // A customer with bad credit: the payment's details go in front of C_DATA, which keeps
    // its first 500 characters (clause 2.5.2.2).
    let bc = "FROM customer WHERE c_w_id = 1 AND c_credit = 'BC' ORDER BY c_d_id, c_id LIMIT 1";
    let (c_d_id, c_id) = (int(&db, &format!("SELECT c_d_id {bc}")), int(&db, &format!("SELECT c_id {bc}")));
    let data_sql = format!("SELECT c_data FROM customer WHERE c_w_id = 1 AND c_d_id = {c_d_id} AND c_id = {c_id}");
    let old = value(&db, &data_sql).as_str().to_string();
    let input = PaymentInput { c_d_id, customer: CustomerKey::Id(c_id), ..input };
    assert_eq!(block(d.payment(&input)).unwrap().c_id, c_id);
    let new = value(&db, &data_sql).as_str().to_string();
    let prefix = &new[..new.find(" | ").expect("the payment's details") + 3];
    assert!(prefix.starts_with(&format!("{c_id} {c_d_id} 1 2 1 ")), "{prefix}");
    assert_eq!(new, format!("{prefix}{old}").chars().take(500).collect::<String>());
    assert_consistent(&Target::embedded(db), 1);
}

#[test]
fn order_status_delivery_and_stock_level_read_and_write_what_they_should() {
    for drive in DRIVES {
        order_status_delivery_and_stock_level_read_and_write_what_they_should_with(drive);
    }
}

fn order_status_delivery_and_stock_level_read_and_write_what_they_should_with(drive: Drive) {
    let db = loaded(1);
    let mut d = driver(&db, drive);
    // Order-Status: the customer's newest order and its lines.
    let o_id = int(&db, "SELECT max(o_id) FROM oorder WHERE o_w_id = 1 AND o_d_id = 6 AND o_c_id = 11");
    let lines = int(&db, &format!("SELECT o_ol_cnt FROM oorder WHERE o_w_id = 1 AND o_d_id = 6 AND o_id = {o_id}"));
    let out = block(d.order_status(&OrderStatusInput { w_id: 1, d_id: 6, customer: CustomerKey::Id(11) })).unwrap();
    assert_eq!(out, OrderStatusOutcome { c_id: 11, o_id: Some(o_id), lines: lines as usize });

    // Stock-Level against the same count computed by one analytical query.
    let threshold = 50;
    let expected = int(
        &db,
        &format!(
            "SELECT count(DISTINCT s_i_id) FROM order_line, stock, district \
             WHERE d_w_id = 1 AND d_id = 4 AND ol_w_id = 1 AND ol_d_id = 4 AND ol_o_id < d_next_o_id \
             AND ol_o_id >= d_next_o_id - 20 AND s_w_id = 1 AND s_i_id = ol_i_id AND s_quantity < {threshold}"
        ),
    );
    assert!(expected > 0);
    assert_eq!(block(d.stock_level(&StockLevelInput { w_id: 1, d_id: 4, threshold })).unwrap(), expected);

    // Delivery: each district's oldest new order is delivered to its customer.
    let first = Scale::TINY.first_new_order();
    let customer = int(&db, &format!("SELECT o_c_id FROM oorder WHERE o_w_id = 1 AND o_d_id = 1 AND o_id = {first}"));
    let amount = cents(&db, &format!("SELECT sum(ol_amount) FROM order_line WHERE ol_w_id = 1 AND ol_d_id = 1 AND ol_o_id = {first}"));
    let balance = cents(&db, &format!("SELECT c_balance FROM customer WHERE c_w_id = 1 AND c_d_id = 1 AND c_id = {customer}"));
    let out = block(d.delivery(&DeliveryInput { w_id: 1, carrier_id: 7, date: 1_800_000_000_000_000 })).unwrap();
    assert_eq!(out.delivered, vec![Some(first); 10]);
    assert_eq!(int(&db, &format!("SELECT count(*) FROM new_order WHERE no_w_id = 1 AND no_o_id = {first}")), 0);
    assert_eq!(int(&db, &format!("SELECT o_carrier_id FROM oorder WHERE o_w_id = 1 AND o_d_id = 1 AND o_id = {first}")), 7);
    assert_eq!(
        int(&db, &format!("SELECT count(*) FROM order_line WHERE ol_w_id = 1 AND ol_o_id = {first} AND ol_delivery_d IS NULL")),
        0
    );
    assert_eq!(cents(&db, &format!("SELECT c_balance FROM customer WHERE c_w_id = 1 AND c_d_id = 1 AND c_id = {customer}")), balance + amount);
    assert_consistent(&Target::embedded(db), 1);
}

/// A three-second run of three terminals on `terminal_threads` threads (0: one each).
fn short_run(target: &Target, streams: usize, driver: DriverKind, terminal_threads: usize) -> freshet_bench::tpcc::run::RunStats {
    let workload = Workload { warehouses: 2, scale: Scale::TINY, constants: NurandConstants::for_load(SEED) };
    let spec = RunSpec {
        workload,
        terminals: 3,
        duration: std::time::Duration::from_secs(3),
        seed: 7,
        streams,
        queries: ch::queries::all().into_iter().take(3).collect(),
        progress: false,
        driver,
        terminal_threads,
        stream_setup: Vec::new(),
    };
    run(target, &spec)
}

fn check_run(stats: &freshet_bench::tpcc::run::RunStats) {
    assert!(stats.fatal.is_empty(), "{:?}", stats.fatal);
    assert!(stats.error_samples.is_empty(), "{:?}", stats.error_samples);
    for kind in [TxnKind::NewOrder, TxnKind::Payment] {
        assert!(stats.get(kind).committed > 0, "no {} committed", kind.name());
    }
    // Every terminal had its turns, also where terminals share a thread and in-process calls
    // complete without waiting (before, the first terminal of a thread ran alone).
    let per = &stats.terminal_committed;
    assert_eq!(per.len(), 3, "{per:?}");
    assert_eq!(per.iter().sum::<u64>(), stats.committed(), "{per:?}");
    assert!(per.iter().all(|&n| n * 4 > stats.committed() / 3), "a terminal had few turns: {per:?}");
    // About one throughput sample a second of the three-second run, in time order, adding up
    // to roughly the transactions committed.
    let t = &stats.throughput;
    assert!((2..=4).contains(&t.len()), "{t:?}");
    assert!(t.windows(2).all(|w| w[0].0 < w[1].0) && t.iter().all(|(_, tps)| *tps >= 0.0), "{t:?}");
    let sampled: f64 = t.iter().scan(0.0, |prev, &(at, tps)| Some(tps * (at - std::mem::replace(prev, at)))).sum();
    let committed = stats.committed() as f64;
    assert!(sampled > committed * 0.5 && sampled <= committed * 1.01 + 1.0, "{sampled} sampled, {committed} committed");
}

#[test]
fn a_mixed_run_with_an_analytical_stream_stays_consistent() {
    let db = loaded(2);
    let target = Target::embedded(db).with_isolation(Some("read committed".into()));
    let stats = short_run(&target, 1, DriverKind::Statements, 1);
    check_run(&stats);
    assert!(stats.queries.iter().all(|(_, q)| q.errors == 0), "{:?}", stats.queries);
    assert!(stats.queries.iter().any(|(_, q)| !q.times_ms.is_empty()));
    assert_consistent(&target, 2);
}

#[test]
fn a_run_of_native_procedures_stays_consistent() {
    let db = loaded(2);
    register_native(&db).unwrap();
    let target = Target::embedded(db.clone());
    let stats = short_run(&target, 0, DriverKind::Calls(ProcedureKind::Native), 1);
    check_run(&stats);
    assert_consistent(&target, 2);
    let one_job = int(&db, "SELECT calls_in_one_job FROM freshet_procedures WHERE name = 'tpcc_native_new_order'");
    let calls = int(&db, "SELECT calls FROM freshet_procedures WHERE name = 'tpcc_native_new_order'");
    assert!(calls > 10 && one_job * 2 > calls, "{one_job} of {calls} New-Order calls ran as one job");
}

#[test]
fn a_serializable_run_of_procedures_over_the_wire_stays_consistent() {
    let db = loaded(2);
    // The server's own runtime, whose idle network threads wait for awaited replies.
    let rt = freshet_server::network_runtime(2, std::time::Duration::from_micros(200)).unwrap();
    let (server, stop) = rt.block_on(async {
        let server = freshet_server::Server::bind(db.clone(), &freshet_server::ServerConfig { host: "127.0.0.1".into(), port: 0, unix_socket_dir: None })
            .await
            .unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let addr = server.local_addr();
        tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        (addr, stop)
    });
    let target = Target::wire(format!("host=127.0.0.1 port={} user=tpcc dbname=tpcc", server.port()));
    // One PL/pgSQL call per transaction, as `freshet bench tpcc --mode procedures` runs.
    target.run(InstallPlPgSql).unwrap();
    let stats = short_run(&target, 0, DriverKind::Calls(ProcedureKind::PlPgSql), 2);
    check_run(&stats);
    assert_consistent(&target, 2);
    // Most calls ran as one executor job: the first call of each function in a session
    // prepares its statements the ordinary way, and a call that would wait for a lock gives
    // its job up.
    let one_job = |name: &str| int(&db, &format!("SELECT calls_in_one_job FROM freshet_procedures WHERE name = '{name}'"));
    let calls = |name: &str| int(&db, &format!("SELECT calls FROM freshet_procedures WHERE name = '{name}'"));
    for f in ["tpcc_new_order", "tpcc_payment"] {
        assert!(calls(f) > 10 && one_job(f) * 2 > calls(f), "{f}: {} of {} calls ran as one job", one_job(f), calls(f));
    }
    drop(stop);
}

/// The CH queries and the top-10 query on the TINY database, against answers DuckDB gave on
/// the same generated data (`freshet bench ch --tiny --answers-out`), on both of Freshet's
/// paths where they differ (each of these queries is analytical, so one path).
#[test]
fn ch_queries_answer_as_duckdb_did() {
    let db = loaded(1);
    let reference = include_str!("../data/ch_tiny_w1_seed42.txt");
    let expected = parse_reference(reference);
    let answers = Target::embedded(db).run(ch::RunOnce { queries: ch::queries::all() }).unwrap();
    assert_eq!(answers.len(), 23);
    let mut wrong = Vec::new();
    for a in answers {
        let want = expected.iter().find(|(n, _)| *n == a.name).map(|(_, r)| r).unwrap_or_else(|| panic!("no reference for {}", a.name));
        match &a.result {
            Ok(got) if answers::agree(got, want) => {}
            Ok(got) => wrong.push(format!("{}: got {} rows, first {:?}; want {} rows, first {:?}", a.name, got.len(), got.first(), want.len(), want.first())),
            Err(e) => wrong.push(format!("{}: {e}", a.name)),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The reference file: `== name` lines, each followed by the answer's rows.
fn parse_reference(text: &str) -> Vec<(String, answers::Answer)> {
    let mut out = Vec::new();
    for block in text.split("== ").filter(|b| !b.trim().is_empty()) {
        let (name, rows) = block.split_once('\n').unwrap_or((block, ""));
        out.push((name.trim().to_string(), answers::from_text(rows)));
    }
    out
}

/// A table's row count, as a job on any connection.
struct Count(&'static str);

impl ConnJob for Count {
    type Output = i64;
    async fn run<C: Conn>(self, mut conn: C) -> DbResult<i64> {
        Ok(conn.simple(&format!("SELECT count(*) FROM {}", self.0)).await?[0][0].as_i64())
    }
}

#[test]
fn loading_twice_gives_the_same_database() {
    let a = loaded(1);
    let b = loaded(1);
    for t in ["customer", "order_line", "stock"] {
        let sum = |db: &Database| {
            value(db, &format!("SELECT sum(length({})) FROM {t}", match t {
                "customer" => "c_data",
                "order_line" => "ol_dist_info",
                _ => "s_data",
            }))
        };
        assert_eq!(sum(&a), sum(&b), "{t}");
        assert_eq!(Target::embedded(a.clone()).run(Count(t)).unwrap(), Target::embedded(b.clone()).run(Count(t)).unwrap());
    }
}
