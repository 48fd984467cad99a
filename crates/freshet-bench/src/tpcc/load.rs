//! Loading: creates the tables and fills them with `COPY … FROM STDIN (FORMAT csv)`, one
//! warehouse per job, several warehouses at a time on connections of their own, with a
//! progress line on stderr. The same generator also writes CSV files (for DuckDB).

use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::generate::{self, Scale, TableData};
use super::schema::{self, Flavor};
use crate::conn::{Conn, DbError, DbResult};
use crate::target::{ConnJob, Target};

#[derive(Clone, Copy, Debug)]
pub struct LoadSpec {
    pub warehouses: i64,
    pub scale: Scale,
    pub seed: u64,
    /// Warehouses loaded at the same time.
    pub threads: usize,
    /// Print a progress line on stderr.
    pub progress: bool,
    /// Partition Freshet's tables by warehouse (`schema::ddl`).
    pub partitioned: bool,
}

#[derive(Clone, Debug)]
pub struct LoadReport {
    pub rows: u64,
    pub seconds: f64,
}

struct Progress {
    rows: AtomicU64,
    done: AtomicI64,
    finished: AtomicBool,
}

async fn copy_tables<C: Conn>(conn: &mut C, tables: Vec<TableData>, progress: &Progress) -> DbResult<()> {
    for t in tables {
        let sql = format!("COPY {} FROM STDIN WITH (FORMAT csv)", t.table);
        conn.copy_in(&sql, t.csv.into_bytes()).await?;
        progress.rows.fetch_add(t.rows, Ordering::Relaxed);
    }
    Ok(())
}

struct Setup<'a> {
    flavor: Flavor,
    spec: LoadSpec,
    progress: &'a Progress,
}

impl ConnJob for Setup<'_> {
    type Output = ();
    async fn run<C: Conn>(self, mut conn: C) -> DbResult<()> {
        for sql in schema::ddl(self.flavor, self.spec.partitioned) {
            conn.simple(&sql).await?;
        }
        let mut shared = vec![generate::items(self.spec.seed, self.spec.scale)];
        shared.extend(generate::ch_tables(self.spec.seed));
        copy_tables(&mut conn, shared, self.progress).await
    }
}

/// PostgreSQL's `ANALYZE` once the data is in, as any tuned run does: without statistics its
/// generic plans guess, and Stock-Level's IN list became a scan of the warehouse's stock.
struct Analyze;

impl ConnJob for Analyze {
    type Output = ();
    async fn run<C: Conn>(self, mut conn: C) -> DbResult<()> {
        conn.simple("ANALYZE").await?;
        Ok(())
    }
}

struct Warehouses<'a> {
    spec: LoadSpec,
    next: &'a AtomicI64,
    progress: &'a Progress,
}

impl ConnJob for Warehouses<'_> {
    type Output = ();
    async fn run<C: Conn>(self, mut conn: C) -> DbResult<()> {
        loop {
            let w = self.next.fetch_add(1, Ordering::Relaxed);
            if w > self.spec.warehouses {
                return Ok(());
            }
            let tables = generate::warehouse(self.spec.seed, w, self.spec.scale);
            copy_tables(&mut conn, tables, self.progress).await?;
            self.progress.done.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn print_progress(p: &Progress, spec: &LoadSpec, start: Instant, end: &str) {
    eprint!(
        "\rloading: {}/{} warehouses, {} rows, {:.1} s{end}",
        p.done.load(Ordering::Relaxed),
        spec.warehouses,
        p.rows.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64()
    );
    let _ = std::io::stderr().flush();
}

/// Creates the schema (on a database without these tables) and loads the database.
pub fn load(target: &Target, flavor: Flavor, spec: LoadSpec) -> DbResult<LoadReport> {
    let start = Instant::now();
    let progress = Arc::new(Progress { rows: AtomicU64::new(0), done: AtomicI64::new(0), finished: AtomicBool::new(false) });
    target.run(Setup { flavor, spec, progress: &progress })?;
    let next = AtomicI64::new(1);
    let result: DbResult<()> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..spec.threads.clamp(1, spec.warehouses.max(1) as usize))
            .map(|_| crate::target::spawn_client(scope, || target.run(Warehouses { spec, next: &next, progress: &progress })))
            .collect();
        if spec.progress {
            let p = progress.clone();
            scope.spawn(move || {
                while !p.finished.load(Ordering::Relaxed) {
                    print_progress(&p, &spec, start, "");
                    std::thread::sleep(Duration::from_millis(500));
                }
            });
        }
        let mut result = Ok(());
        for w in workers {
            let r = w.join().unwrap_or_else(|_| Err(DbError::new("", "a loader thread panicked")));
            if result.is_ok() {
                result = r;
            }
        }
        progress.finished.store(true, Ordering::Relaxed);
        result
    });
    result?;
    if flavor == Flavor::Postgres {
        target.run(Analyze)?;
    }
    if spec.progress {
        print_progress(&progress, &spec, start, "\n");
    }
    Ok(LoadReport { rows: progress.rows.load(Ordering::Relaxed), seconds: start.elapsed().as_secs_f64() })
}

/// Writes the database as CSV files `<table>.<n>.csv` into `dir` (for systems that load
/// files), generating warehouses on `threads` threads.
pub fn write_csv(dir: &Path, spec: LoadSpec) -> std::io::Result<LoadReport> {
    let start = Instant::now();
    std::fs::create_dir_all(dir)?;
    let write = |n: i64, tables: Vec<TableData>| -> std::io::Result<u64> {
        let mut rows = 0;
        for t in tables {
            std::fs::write(dir.join(format!("{}.{n}.csv", t.table)), t.csv.as_bytes())?;
            rows += t.rows;
        }
        Ok(rows)
    };
    let mut shared = vec![generate::items(spec.seed, spec.scale)];
    shared.extend(generate::ch_tables(spec.seed));
    let mut rows = write(0, shared)?;
    let next = AtomicI64::new(1);
    let results: Vec<std::io::Result<u64>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..spec.threads.max(1))
            .map(|_| {
                scope.spawn(|| {
                    let mut rows = 0;
                    loop {
                        let w = next.fetch_add(1, Ordering::Relaxed);
                        if w > spec.warehouses {
                            return Ok(rows);
                        }
                        rows += write(w, generate::warehouse(spec.seed, w, spec.scale))?;
                    }
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or_else(|_| Err(std::io::Error::other("writer panicked")))).collect()
    });
    for r in results {
        rows += r?;
    }
    Ok(LoadReport { rows, seconds: start.elapsed().as_secs_f64() })
}
