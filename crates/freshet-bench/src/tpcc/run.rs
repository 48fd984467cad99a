//! A timed run: OLTP terminals (each on a connection of its own, on a thread of its own or as
//! tasks sharing driver threads (`RunSpec::terminal_threads`), running the
//! standard mix through a [`StatementDriver`] or a [`CallDriver`]) and, optionally, analytical streams that run
//! queries in a loop at the same time; a progress line on stderr every second; per-type
//! counts and latency histograms at the end.
//!
//! Aborts are told apart by cause: New-Orders rolled back on purpose (the 1% with an unused
//! item), serialization failures and deadlocks (40001, 40P01: the transaction is retried with
//! the same input, and its latency runs from the first try to the commit), and any other error
//! (counted, not retried).

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::terminal::{now_micros, Terminal, Workload};
use super::procedures::{CallDriver, ProcedureKind};
use super::txn::{NewOrderOutcome, StatementDriver, TpccDriver, TxnKind};
use crate::conn::{Conn, DbError, DbResult};
use crate::target::{ConnJob, Target};

/// Tries per transaction before a serialization failure counts as an error.
const MAX_TRIES: u32 = 100;

/// Counts and latencies of one transaction type.
#[derive(Clone)]
pub struct TxnStats {
    pub committed: u64,
    /// New-Orders rolled back on purpose (unused item id).
    pub rolled_back: u64,
    /// Serialization failures and deadlocks that were retried.
    pub retried: u64,
    /// Other errors.
    pub errors: u64,
    /// Latency of committed transactions, in microseconds.
    pub latency_us: Histogram<u64>,
}

impl Default for TxnStats {
    fn default() -> Self {
        TxnStats { committed: 0, rolled_back: 0, retried: 0, errors: 0, latency_us: Histogram::new(3).expect("histogram") }
    }
}

impl TxnStats {
    pub fn percentile_ms(&self, q: f64) -> f64 {
        if self.latency_us.is_empty() {
            return 0.0;
        }
        self.latency_us.value_at_quantile(q) as f64 / 1000.0
    }

    fn merge(&mut self, o: &TxnStats) {
        self.committed += o.committed;
        self.rolled_back += o.rolled_back;
        self.retried += o.retried;
        self.errors += o.errors;
        let _ = self.latency_us.add(&o.latency_us);
    }
}

/// Times of one analytical query.
#[derive(Clone, Default, Debug)]
pub struct QueryStats {
    pub times_ms: Vec<f64>,
    pub errors: u64,
    pub last_error: Option<String>,
}

impl QueryStats {
    pub fn mean_ms(&self) -> f64 {
        if self.times_ms.is_empty() { 0.0 } else { self.times_ms.iter().sum::<f64>() / self.times_ms.len() as f64 }
    }

    pub fn percentile_ms(&self, q: f64) -> f64 {
        let mut t = self.times_ms.clone();
        if t.is_empty() {
            return 0.0;
        }
        t.sort_by(|a, b| a.total_cmp(b));
        t[((t.len() as f64 * q).ceil() as usize).clamp(1, t.len()) - 1]
    }
}

/// The outcome of a run.
pub struct RunStats {
    pub txns: Vec<TxnStats>,
    /// Per analytical query, in the order of the query list.
    pub queries: Vec<(String, QueryStats)>,
    pub seconds: f64,
    /// Errors that stopped a terminal or stream (its connection failed).
    pub fatal: Vec<String>,
    /// A sample of the other errors, one per distinct message.
    pub error_samples: Vec<String>,
    /// Throughput over time: (seconds since the start, committed transactions per second over
    /// the interval ending then), about one sample a second.
    pub throughput: Vec<(f64, f64)>,
    /// Transactions each terminal committed, in terminal order (terminals that failed are
    /// left out). Terminals sharing a thread take turns after every transaction, so in a run
    /// of more than a moment none should be near zero.
    pub terminal_committed: Vec<u64>,
}

impl RunStats {
    pub fn get(&self, kind: TxnKind) -> &TxnStats {
        &self.txns[kind.index()]
    }

    pub fn committed(&self) -> u64 {
        self.txns.iter().map(|t| t.committed).sum()
    }

    pub fn tps(&self) -> f64 {
        self.committed() as f64 / self.seconds
    }

    pub fn new_orders_per_minute(&self) -> f64 {
        self.get(TxnKind::NewOrder).committed as f64 * 60.0 / self.seconds
    }
}

#[derive(Default)]
struct Live {
    committed: AtomicU64,
    new_orders: AtomicU64,
    aborts: AtomicU64,
    queries: AtomicU64,
    stop: AtomicBool,
}

/// What a run does.
#[derive(Clone)]
pub struct RunSpec {
    pub workload: Workload,
    pub terminals: usize,
    pub duration: Duration,
    pub seed: u64,
    /// Analytical streams and the queries they cycle through: (name, SQL).
    pub streams: usize,
    pub queries: Vec<(String, String)>,
    pub progress: bool,
    /// How terminals run their transactions.
    pub driver: DriverKind,
    /// Threads that drive the terminals: terminal n runs on thread n mod this, each terminal
    /// a task of its thread with a connection of its own (see [`Target::run_all`]). 0 gives
    /// every terminal a thread of its own.
    pub terminal_threads: usize,
    /// Statements each analytical stream runs on its connection before its queries (e.g.
    /// Freshet's freshness bound).
    pub stream_setup: Vec<String>,
}

/// Statement by statement, or one procedure call per transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverKind {
    Statements,
    Calls(ProcedureKind),
}

struct TerminalJob<'a> {
    n: usize,
    spec: &'a RunSpec,
    deadline: Instant,
    live: &'a Live,
    errors: &'a Mutex<Vec<String>>,
}

fn record_error(errors: &Mutex<Vec<String>>, e: &DbError) {
    let mut errors = errors.lock().unwrap_or_else(|p| p.into_inner());
    let text = e.to_string();
    if errors.len() < 20 && !errors.contains(&text) {
        errors.push(text);
    }
}

/// Runs one transaction with retries; returns whether it committed.
async fn one<D: TpccDriver>(driver: &mut D, term: &mut Terminal, kind: TxnKind, stats: &mut TxnStats, job: &TerminalJob<'_>) -> bool {
    let now = now_micros();
    let start = Instant::now();
    // Inputs are drawn once, so a retry repeats the same transaction.
    enum Input {
        N(super::txn::NewOrderInput),
        P(super::txn::PaymentInput),
        O(super::txn::OrderStatusInput),
        D(super::txn::DeliveryInput),
        S(super::txn::StockLevelInput),
    }
    let input = match kind {
        TxnKind::NewOrder => Input::N(term.new_order(now)),
        TxnKind::Payment => Input::P(term.payment(now)),
        TxnKind::OrderStatus => Input::O(term.order_status()),
        TxnKind::Delivery => Input::D(term.delivery(now)),
        TxnKind::StockLevel => Input::S(term.stock_level()),
    };
    for _ in 0..MAX_TRIES {
        let result = match &input {
            Input::N(i) => driver.new_order(i).await.map(|o| o != NewOrderOutcome::UnusedItem),
            Input::P(i) => driver.payment(i).await.map(|_| true),
            Input::O(i) => driver.order_status(i).await.map(|_| true),
            Input::D(i) => driver.delivery(i).await.map(|_| true),
            Input::S(i) => driver.stock_level(i).await.map(|_| true),
        };
        match result {
            Ok(true) => {
                let _ = stats.latency_us.record(start.elapsed().as_micros() as u64);
                stats.committed += 1;
                return true;
            }
            Ok(false) => {
                stats.rolled_back += 1;
                return false;
            }
            Err(e) if e.is_retryable() => {
                stats.retried += 1;
                job.live.aborts.fetch_add(1, Ordering::Relaxed);
                if Instant::now() >= job.deadline {
                    return false;
                }
            }
            Err(e) => {
                stats.errors += 1;
                job.live.aborts.fetch_add(1, Ordering::Relaxed);
                record_error(job.errors, &e);
                return false;
            }
        }
    }
    stats.errors += 1;
    false
}

impl ConnJob for TerminalJob<'_> {
    type Output = Vec<TxnStats>;
    async fn run<C: Conn>(self, conn: C) -> DbResult<Vec<TxnStats>> {
        match self.spec.driver {
            DriverKind::Statements => self.drive(StatementDriver::new(conn).await?).await,
            DriverKind::Calls(kind) => self.drive(CallDriver::new(conn, kind).await?).await,
        }
    }
}

impl TerminalJob<'_> {
    async fn drive<D: TpccDriver>(&self, mut driver: D) -> DbResult<Vec<TxnStats>> {
        let mut term = Terminal::new(self.n, self.spec.workload, self.spec.seed);
        let mut stats: Vec<TxnStats> = TxnKind::ALL.iter().map(|_| TxnStats::default()).collect();
        while Instant::now() < self.deadline && !self.live.stop.load(Ordering::Relaxed) {
            let kind = term.next_kind();
            if one(&mut driver, &mut term, kind, &mut stats[kind.index()], self).await {
                self.live.committed.fetch_add(1, Ordering::Relaxed);
                if kind == TxnKind::NewOrder {
                    self.live.new_orders.fetch_add(1, Ordering::Relaxed);
                }
            }
            // The other terminals of this thread take their turn (in-process a transaction
            // may complete without ever waiting).
            crate::target::yield_now().await;
        }
        Ok(stats)
    }
}

struct StreamJob<'a> {
    n: usize,
    spec: &'a RunSpec,
    deadline: Instant,
    live: &'a Live,
}

impl ConnJob for StreamJob<'_> {
    type Output = Vec<QueryStats>;
    async fn run<C: Conn>(self, mut conn: C) -> DbResult<Vec<QueryStats>> {
        let queries = &self.spec.queries;
        let mut stats = vec![QueryStats::default(); queries.len()];
        for statement in &self.spec.stream_setup {
            conn.simple(statement).await?;
        }
        // Streams start at different queries, so that they do not run in lockstep.
        let mut i = self.n * queries.len() / self.spec.streams.max(1);
        while Instant::now() < self.deadline && !self.live.stop.load(Ordering::Relaxed) && !queries.is_empty() {
            let q = i % queries.len();
            let start = Instant::now();
            match conn.simple(&queries[q].1).await {
                Ok(_) => stats[q].times_ms.push(start.elapsed().as_secs_f64() * 1e3),
                Err(e) => {
                    stats[q].errors += 1;
                    stats[q].last_error = Some(e.to_string());
                }
            }
            self.live.queries.fetch_add(1, Ordering::Relaxed);
            i += 1;
        }
        Ok(stats)
    }
}

/// Takes a throughput sample (the interval since `last`), prints the progress line if asked,
/// and returns the sample.
fn sample(live: &Live, start: Instant, last: &mut (u64, u64, Instant), streams: bool, progress: bool) -> (f64, f64) {
    let (committed, new_orders) = (live.committed.load(Ordering::Relaxed), live.new_orders.load(Ordering::Relaxed));
    let dt = last.2.elapsed().as_secs_f64().max(1e-3);
    let tps = (committed - last.0) as f64 / dt;
    let nopm = (new_orders - last.1) as f64 * 60.0 / dt;
    *last = (committed, new_orders, Instant::now());
    if progress {
        progress_line(live, start, tps, nopm, committed, streams);
    }
    (start.elapsed().as_secs_f64(), tps)
}

fn progress_line(live: &Live, start: Instant, tps: f64, nopm: f64, committed: u64, streams: bool) {
    let queries = if streams { format!(", {} queries", live.queries.load(Ordering::Relaxed)) } else { String::new() };
    eprint!(
        "\r[{:>4.0} s] {tps:>8.0} tps, {nopm:>9.0} NOPM, {} committed, {} aborts{queries}   ",
        start.elapsed().as_secs_f64(),
        committed,
        live.aborts.load(Ordering::Relaxed)
    );
    let _ = std::io::stderr().flush();
}

fn join<T>(h: std::thread::ScopedJoinHandle<'_, DbResult<T>>, live: &Live) -> DbResult<T> {
    let r = h.join().unwrap_or_else(|_| Err(DbError::new("", "thread panicked")));
    if r.is_err() {
        // A terminal that cannot run stops the others: the numbers would mislead.
        live.stop.store(true, Ordering::Relaxed);
    }
    r
}

/// [`join`] for a thread that ran several jobs.
fn join_all<T>(h: std::thread::ScopedJoinHandle<'_, Vec<DbResult<T>>>, live: &Live) -> Vec<DbResult<T>> {
    let results = h.join().unwrap_or_else(|_| vec![Err(DbError::new("", "thread panicked"))]);
    if results.iter().any(|r| r.is_err()) {
        live.stop.store(true, Ordering::Relaxed);
    }
    results
}

/// Runs terminals (and streams) against `target` for the spec's duration.
pub fn run(target: &Target, spec: &RunSpec) -> RunStats {
    let live = Live::default();
    let errors = Mutex::new(Vec::new());
    let start = Instant::now();
    let deadline = start + spec.duration;
    let (terminal_results, stream_results, throughput) = std::thread::scope(|scope| {
        let threads = if spec.terminal_threads == 0 { spec.terminals } else { spec.terminal_threads.min(spec.terminals) };
        let terminals: Vec<_> = (0..threads)
            .map(|t| {
                let jobs: Vec<_> =
                    (t..spec.terminals).step_by(threads).map(|n| TerminalJob { n, spec, deadline, live: &live, errors: &errors }).collect();
                crate::target::spawn_client(scope, move || target.run_all(jobs))
            })
            .collect();
        let streams: Vec<_> = (0..spec.streams)
            .map(|n| {
                let job = StreamJob { n, spec, deadline, live: &live };
                crate::target::spawn_client(scope, move || target.run(job))
            })
            .collect();
        let sampler = scope.spawn(|| {
            let mut last = (0, 0, start);
            let mut samples = Vec::new();
            while Instant::now() < deadline && !live.stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_secs(1).min(deadline.saturating_duration_since(Instant::now())));
                samples.push(sample(&live, start, &mut last, spec.streams > 0, spec.progress));
            }
            if spec.progress {
                eprintln!();
            }
            samples
        });
        // Thread `t` ran terminals t, t + threads, …: put the results in terminal order.
        let mut t: Vec<(usize, DbResult<Vec<TxnStats>>)> = terminals
            .into_iter()
            .enumerate()
            .flat_map(|(first, h)| join_all(h, &live).into_iter().enumerate().map(move |(i, r)| (first + i * threads, r)))
            .collect();
        t.sort_by_key(|(n, _)| *n);
        let t: Vec<DbResult<Vec<TxnStats>>> = t.into_iter().map(|(_, r)| r).collect();
        let s: Vec<DbResult<Vec<QueryStats>>> = streams.into_iter().map(|h| join(h, &live)).collect();
        live.stop.store(true, Ordering::Relaxed);
        (t, s, sampler.join().unwrap_or_default())
    });
    let seconds = start.elapsed().as_secs_f64();
    let mut txns: Vec<TxnStats> = TxnKind::ALL.iter().map(|_| TxnStats::default()).collect();
    let mut queries: Vec<(String, QueryStats)> = spec.queries.iter().map(|(n, _)| (n.clone(), QueryStats::default())).collect();
    let mut fatal = Vec::new();
    let mut terminal_committed = Vec::new();
    for r in terminal_results {
        match r {
            Ok(stats) => {
                txns.iter_mut().zip(&stats).for_each(|(a, b)| a.merge(b));
                terminal_committed.push(stats.iter().map(|t| t.committed).sum());
            }
            Err(e) => fatal.push(format!("terminal: {e}")),
        }
    }
    for r in stream_results {
        match r {
            Ok(stats) => {
                for ((_, a), b) in queries.iter_mut().zip(stats) {
                    a.times_ms.extend(b.times_ms);
                    a.errors += b.errors;
                    if b.last_error.is_some() {
                        a.last_error = b.last_error;
                    }
                }
            }
            Err(e) => fatal.push(format!("analytical stream: {e}")),
        }
    }
    let error_samples = errors.into_inner().unwrap_or_else(|p| p.into_inner());
    RunStats { txns, queries, seconds, fatal, error_samples, throughput, terminal_committed }
}
