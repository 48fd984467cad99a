//! Snapshots for analytical queries: freshness bounds, query sessions, and the list of live
//! snapshots (`freshet_snapshots`).
//!
//! An analytical query outside a transaction block reads a *shared* snapshot of committed
//! state. Its session's `freshet.max_staleness` bounds how old that snapshot may be when the
//! query starts: a snapshot taken no longer ago than the bound (or, with a bound of 0, one
//! after which nothing committed) is reused — queries that accept the same staleness share
//! one snapshot, HyPer's query session (§3.3). The registry keeps the newest shared snapshot
//! alive for the longest bound that asked for it, so queries arriving one after another
//! within the bound share it too; after that only running queries hold it, and it is freed
//! when the last one ends. Several snapshots from different moments may live at once.
//!
//! A transaction block (other than READ COMMITTED) pins one snapshot of every table, as its
//! transaction sees them, for all its analytical queries until it writes.
//!
//! INVARIANTS
//! - A query with bound `b` starting at `t` reads a snapshot taken at or after `t - b`, or
//!   one that holds every commit acknowledged before `t` (the commit clock has not moved
//!   since it was taken).
//! - The registry's strong reference to a shared snapshot ends at most `b` after it was taken
//!   (a timer on the analytical runtime drops it); every other reference is a running query,
//!   a pinned transaction block, or a fork-mode child's handle.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use freshet_core::catalog::TableDef;
use freshet_core::engine::Engine;
pub use freshet_core::storage::{LiveSnapshot, SnapshotInfo, SnapshotMode};
use freshet_core::storage::{DbSnapshot, RangeTest, SnapshotScope, TxnView};
use freshet_core::{Error, Result, SqlState};
use freshet_olap::datafusion;
use freshet_olap::datafusion::arrow::array::{ArrayRef, Float64Array, Int32Array, Int64Array, StringArray, TimestampMicrosecondArray};
use freshet_olap::datafusion::arrow::datatypes::{DataType as ArrowType, Field, Schema, SchemaRef, TimeUnit};
use freshet_olap::datafusion::arrow::record_batch::RecordBatch;
use freshet_olap::provider::SystemTable;
use parking_lot::Mutex;

/// The newest shared snapshot: reachable for reuse while anything holds it, and held by the
/// registry itself until `keep_until` (only with a bound above zero).
struct Current {
    snapshot: Weak<DbSnapshot>,
    id: u64,
    kept: Option<Arc<DbSnapshot>>,
    keep_until: Instant,
}

/// Every live snapshot of a database, and the newest shared one.
#[derive(Default)]
pub struct Snapshots {
    next_id: AtomicU64,
    live: Mutex<Vec<Weak<dyn LiveSnapshot>>>,
    current: Mutex<Option<Current>>,
}

impl std::fmt::Debug for Snapshots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshots").field("live", &self.live.lock().len()).finish()
    }
}

impl Snapshots {
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Lists `snapshot` in `freshet_snapshots` for as long as it lives.
    pub fn register(&self, snapshot: Weak<dyn LiveSnapshot>) {
        let mut live = self.live.lock();
        live.retain(|w| w.strong_count() > 0);
        live.push(snapshot);
    }

    /// The live snapshots, oldest first.
    pub fn list(&self) -> Vec<SnapshotInfo> {
        let live: Vec<Arc<dyn LiveSnapshot>> = {
            let mut live = self.live.lock();
            live.retain(|w| w.strong_count() > 0);
            live.iter().filter_map(Weak::upgrade).collect()
        };
        let mut out: Vec<SnapshotInfo> = live.iter().map(|s| s.info()).collect();
        out.sort_by_key(|i| i.id);
        out
    }

    /// Takes a snapshot of `tables` as `view` sees them (everything committed without one)
    /// and lists it.
    pub async fn take(&self, engine: &Engine, tables: &[Arc<TableDef>], view: Option<TxnView>, scope: SnapshotScope) -> Result<Arc<DbSnapshot>> {
        self.take_pruned(engine, tables, view, scope, Vec::new()).await
    }

    /// [`Self::take`], leaving out the chunks each table's zone-map tests rule out (`tests`:
    /// none, or one list per table).
    async fn take_pruned(&self, engine: &Engine, tables: &[Arc<TableDef>], view: Option<TxnView>, scope: SnapshotScope, tests: Vec<Vec<RangeTest>>) -> Result<Arc<DbSnapshot>> {
        let catalog_version = engine.catalog().version;
        // Read before the snapshot: it then holds every commit stamped at or below `clock`.
        let clock = engine.registry().now();
        let taken = Instant::now();
        let taken_at = crate::session::now_micros();
        let snaps = engine.snapshot(tables, view, tests).await?;
        let snapshot = Arc::new(DbSnapshot {
            id: self.next_id(),
            scope,
            taken_at,
            taken,
            clock,
            catalog_version,
            tables: snaps.into_iter().map(|s| (s.def.id, s)).collect(),
        });
        let weak: Weak<DbSnapshot> = Arc::downgrade(&snapshot);
        self.register(weak);
        Ok(snapshot)
    }

    /// A snapshot of committed state holding `tables`, no older than `max_staleness`: the
    /// current shared one if it qualifies, else a new one (of every table when a bound above
    /// zero lets later queries share it). `keep` runs a timer that releases the registry's
    /// reference after the bound.
    pub async fn shared(
        &self,
        engine: &Engine,
        tables: &[Arc<TableDef>],
        max_staleness: Duration,
        keep: impl FnOnce(u64, Duration),
    ) -> Result<Arc<DbSnapshot>> {
        let started = Instant::now();
        if let Some(s) = self.reusable(engine, tables, max_staleness, started) {
            return Ok(s);
        }
        let all: Vec<Arc<TableDef>>;
        let wanted = if max_staleness.is_zero() {
            tables
        } else {
            all = engine.catalog().tables().cloned().collect();
            &all
        };
        let snapshot = self.take(engine, wanted, None, SnapshotScope::Shared).await?;
        let mut current = self.current.lock();
        let newer = current.as_ref().is_none_or(|c| c.id < snapshot.id);
        if newer {
            let kept = (!max_staleness.is_zero()).then(|| snapshot.clone());
            *current = Some(Current { snapshot: Arc::downgrade(&snapshot), id: snapshot.id, kept, keep_until: snapshot.taken + max_staleness });
            drop(current);
            if !max_staleness.is_zero() {
                keep(snapshot.id, max_staleness);
            }
        }
        Ok(snapshot)
    }

    /// The snapshot of one query outside a transaction block with bound 0 whose filters give
    /// zone-map tests (`tests`, one list per table): the current shared snapshot if the commit
    /// clock has not moved since it was taken, else a new one of only the chunks the tests
    /// leave in. The live table copies a chunk's segments before writing only while a
    /// snapshot holds them, so chunks a query cannot need are not held for it; the price is
    /// that no other query shares this snapshot.
    pub async fn for_query(&self, engine: &Engine, tables: &[Arc<TableDef>], tests: Vec<Vec<RangeTest>>) -> Result<Arc<DbSnapshot>> {
        if let Some(s) = self.reusable(engine, tables, Duration::ZERO, Instant::now()) {
            return Ok(s);
        }
        self.take_pruned(engine, tables, None, SnapshotScope::Query, tests).await
    }

    fn reusable(&self, engine: &Engine, tables: &[Arc<TableDef>], max_staleness: Duration, started: Instant) -> Option<Arc<DbSnapshot>> {
        let mut current = self.current.lock();
        let c = current.as_mut()?;
        let s = c.snapshot.upgrade()?;
        let fresh = started.saturating_duration_since(s.taken) <= max_staleness || engine.registry().now() == s.clock;
        if !fresh || s.catalog_version != engine.catalog().version || !s.covers(tables) {
            return None;
        }
        // A later query with a longer bound may keep it longer (its timer runs already, or
        // the registry holds it until the first timer looks again).
        if c.kept.is_some() {
            c.keep_until = c.keep_until.max(s.taken + max_staleness);
        }
        Some(s)
    }

    /// Drops the registry's reference to shared snapshot `id` if its time is up; returns how
    /// long to wait before looking again otherwise.
    pub fn expire(&self, id: u64) -> Option<Duration> {
        let mut current = self.current.lock();
        let c = current.as_mut()?;
        if c.id != id {
            return None;
        }
        let now = Instant::now();
        if now >= c.keep_until {
            c.kept = None;
            None
        } else {
            Some(c.keep_until - now)
        }
    }
}

/// `freshet_snapshots`: one row per live snapshot.
#[derive(Debug)]
pub struct SnapshotsView(pub Arc<Snapshots>);

impl SystemTable for SnapshotsView {
    fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", ArrowType::Int64, false),
            Field::new("mode", ArrowType::Utf8, false),
            Field::new("scope", ArrowType::Utf8, false),
            Field::new("created_at", ArrowType::Timestamp(TimeUnit::Microsecond, None), false),
            Field::new("age_ms", ArrowType::Float64, false),
            Field::new("tables", ArrowType::Int32, false),
            Field::new("shared_bytes", ArrowType::Int64, false),
            Field::new("copied_bytes", ArrowType::Int64, false),
            Field::new("pid", ArrowType::Int32, true),
        ]))
    }

    fn batch(&self) -> datafusion::error::Result<RecordBatch> {
        let list = self.0.list();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(list.iter().map(|i| i.id as i64))),
            Arc::new(StringArray::from_iter_values(list.iter().map(|i| i.mode.name()))),
            Arc::new(StringArray::from_iter_values(list.iter().map(|i| i.scope))),
            Arc::new(TimestampMicrosecondArray::from_iter_values(list.iter().map(|i| i.created_at))),
            Arc::new(Float64Array::from_iter_values(list.iter().map(|i| i.age.as_secs_f64() * 1000.0))),
            Arc::new(Int32Array::from_iter_values(list.iter().map(|i| i.tables as i32))),
            Arc::new(Int64Array::from_iter_values(list.iter().map(|i| i.shared_bytes as i64))),
            Arc::new(Int64Array::from_iter_values(list.iter().map(|i| i.copied_bytes as i64))),
            Arc::new(Int32Array::from(list.iter().map(|i| i.pid).collect::<Vec<_>>())),
        ];
        Ok(RecordBatch::try_new(self.schema(), columns)?)
    }
}

/// How long a bare fork() of this process takes (the child exits at once), from a thread of
/// its own: the baseline fork mode is compared with.
pub fn bare_fork_time() -> Result<Duration> {
    let thread = std::thread::spawn(|| {
        let started = Instant::now();
        // SAFETY: the child calls nothing but _exit.
        let pid = unsafe { libc::fork() };
        match pid {
            -1 => Err(Error::internal(format!("fork failed: {}", std::io::Error::last_os_error()))),
            0 => unsafe { libc::_exit(0) },
            pid => {
                let took = started.elapsed();
                let mut status = 0;
                // SAFETY: reaps our own child.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                Ok(took)
            }
        }
    });
    thread.join().map_err(|_| Error::internal("the fork thread panicked"))?
}

/// Parses a duration setting the way PostgreSQL parses time parameters: a number (in
/// milliseconds unless a unit follows) with an optional unit `us`, `ms`, `s`, `min`, `h`, `d`.
pub fn parse_duration(value: &str) -> Option<Duration> {
    let v = value.trim().trim_matches('\'').trim();
    let split = v.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(v.len());
    let (number, unit) = v.split_at(split);
    let number: f64 = number.parse().ok()?;
    let ms = match unit.trim().to_lowercase().as_str() {
        "us" => number / 1000.0,
        "" | "ms" => number,
        "s" => number * 1000.0,
        "min" => number * 60_000.0,
        "h" => number * 3_600_000.0,
        "d" => number * 86_400_000.0,
        _ => return None,
    };
    (ms.is_finite() && (0.0..1e15).contains(&ms)).then(|| Duration::from_secs_f64(ms / 1000.0))
}

/// A duration as PostgreSQL shows time settings (`0`, `250ms`, `1s`, `2min`).
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms == 0.0 {
        "0".into()
    } else if ms.fract() != 0.0 {
        format!("{}us", (ms * 1000.0).round() as u64)
    } else if (ms as u64).is_multiple_of(60_000) {
        format!("{}min", ms as u64 / 60_000)
    } else if (ms as u64).is_multiple_of(1000) {
        format!("{}s", ms as u64 / 1000)
    } else {
        format!("{}ms", ms as u64)
    }
}

pub fn invalid_duration(name: &str, value: &str) -> Error {
    Error::new(SqlState::InvalidParameterValue, format!("invalid value for parameter \"{name}\": \"{value}\""))
        .with_hint("Use a duration such as 0, 250ms, 1s or 2min (a bare number is milliseconds).".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_print_as_postgresql_does() {
        assert_eq!(parse_duration("0"), Some(Duration::ZERO));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("250"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration(" 1s"), Some(Duration::from_secs(1)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2min"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("-1s"), None);
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(parse_duration("5 parsecs"), None);
        assert_eq!(format_duration(Duration::ZERO), "0");
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_duration(Duration::from_secs(1)), "1s");
        assert_eq!(format_duration(Duration::from_secs(120)), "2min");
        assert_eq!(format_duration(Duration::from_micros(1500)), "1500us");
    }
}
