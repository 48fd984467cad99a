//! Durability: restarts bring back every committed transaction; torn and corrupt logs and
//! damaged checkpoints are handled; log failures (full disk, I/O errors, failed syncs, a
//! machine that stops mid-write) leave exactly the acknowledged commits, in memory and after
//! recovery.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use freshet::{Config, Database, Session, SqlState, Value};
use freshet_core::wal::fs::{Fault, FaultyFs, FaultyHandle};
use freshet_core::wal::Fs;

/// A fresh directory under the system's temporary directory, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("freshet-test-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn durable_config(dir: &Path, partitions: usize) -> Config {
    Config { olap_threads: 2, partitions, data_dir: Some(dir.to_path_buf()), ..Config::default() }
}

fn open(dir: &Path, partitions: usize) -> Database {
    Database::open(durable_config(dir, partitions)).unwrap()
}

fn run(s: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    match s.execute_blocking(sql) {
        Ok(mut r) => r.pop().map(|r| r.rows()).unwrap_or_default(),
        Err(e) => panic!("{sql}: {e}"),
    }
}

/// Every table's rows, ordered by all columns: what a restart must bring back.
pub fn dump(db: &Database) -> BTreeMap<String, Vec<Vec<Value>>> {
    let mut s = db.session();
    let catalog = db.engine().catalog();
    let mut out = BTreeMap::new();
    for def in catalog.tables() {
        let order: Vec<String> = (1..=def.columns.len()).map(|i| i.to_string()).collect();
        let rows = run(&mut s, &format!("SELECT * FROM {} ORDER BY {}", def.name, order.join(", ")));
        let columns: Vec<String> = def.columns.iter().map(|c| format!("{} {:?} {}", c.name, c.ty, c.nullable)).collect();
        out.insert(format!("{} ({})", def.name, columns.join(", ")), rows);
    }
    out
}

/// Builds a database with every column type, indexes, updates, deletes, a dropped and
/// re-created table, a truncated one and one with a dropped column and retyped ones; `checkpoint_at` says after which step a CHECKPOINT
/// runs (none if past the end).
fn build(s: &mut Session, checkpoint_at: usize) {
    let steps = [
        "CREATE TABLE every_type (id INT PRIMARY KEY, s SMALLINT, i INTEGER, b BIGINT, r REAL, d DOUBLE PRECISION, \
         n NUMERIC(12,3), c CHAR(4), v VARCHAR(10), t TEXT, dt DATE, ts TIMESTAMP, ok BOOLEAN)",
        "INSERT INTO every_type VALUES \
         (1, -3, 2147483647, -9223372036854775808, 1.5, -2.25e300, 123456789.125, 'ab', 'varchar', 'a long text that does not fit inline in a view', '2024-02-29', '1999-12-31 23:59:59.999999', true), \
         (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), \
         (3, 0, 0, 0, 0, 0, 0, '', '', '', '1970-01-01', '1970-01-01 00:00:00', false)",
        "CREATE UNIQUE INDEX every_type_v ON every_type (v)",
        "CREATE INDEX every_type_dt_ok ON every_type (dt, ok)",
        "UPDATE every_type SET t = 'changed after the index', n = -0.5 WHERE id = 3",
        "DELETE FROM every_type WHERE id = 2",
        "INSERT INTO every_type (id, v, t) VALUES (4, 'four', 'reuses the deleted slot')",
        "CREATE TABLE gone (a INT PRIMARY KEY, b TEXT)",
        "INSERT INTO gone VALUES (1, 'x'), (2, 'y')",
        "DROP TABLE gone",
        "CREATE TABLE gone (a TEXT PRIMARY KEY, z BIGINT DEFAULT 7)",
        "INSERT INTO gone (a) VALUES ('re-created')",
        "CREATE TABLE emptied (k INT PRIMARY KEY)",
        "INSERT INTO emptied VALUES (1), (2), (3)",
        "TRUNCATE emptied",
        "INSERT INTO emptied VALUES (9)",
        "CREATE TABLE parted (k INT PRIMARY KEY, grp INT, note TEXT) PARTITION BY HASH (k)",
        "INSERT INTO parted SELECT x, x % 7, 'row ' || x FROM generate_series(1, 500) AS g(x)",
        "BEGIN",
        "UPDATE parted SET note = 'in a block' WHERE grp = 3",
        "DELETE FROM parted WHERE grp = 5",
        "UPDATE every_type SET b = b + 1 WHERE id = 1",
        "COMMIT",
        "BEGIN",
        "INSERT INTO parted VALUES (1000, 1, 'rolled back')",
        "ROLLBACK",
        "CREATE TABLE slim (k INT PRIMARY KEY, wide TEXT, n INT, tag TEXT) PARTITION BY HASH (k)",
        "CREATE INDEX slim_wide_n ON slim (wide, n)",
        "CREATE INDEX slim_n ON slim (n)",
        "INSERT INTO slim SELECT x, repeat('w', x % 40), x * 10, 'tag ' || x FROM generate_series(1, 300) AS g(x)",
        "ALTER TABLE slim DROP COLUMN wide",
        "UPDATE slim SET n = n + 1, tag = 'after the drop' WHERE k % 50 = 0",
        "ALTER TABLE slim ALTER COLUMN n TYPE BIGINT",
        "ALTER TABLE slim ALTER COLUMN tag TYPE VARCHAR(20)",
    ];
    for (i, sql) in steps.iter().enumerate() {
        run(s, sql);
        if i + 1 == checkpoint_at {
            run(s, "CHECKPOINT");
        }
    }
}

fn restart_brings_back_everything(partitions: usize, checkpoint_at: usize) {
    let dir = TempDir::new("restart");
    let before = {
        let db = open(&dir.0, partitions);
        let mut s = db.session();
        build(&mut s, checkpoint_at);
        dump(&db)
    };
    assert_eq!(before.len(), 5, "{before:?}");
    let db = open(&dir.0, partitions);
    let report = db.recovery().clone();
    assert_eq!(dump(&db), before, "partitions {partitions}, checkpoint after step {checkpoint_at}");
    assert_eq!(report.checkpoint_lsn.is_some(), checkpoint_at <= 34, "{report:?}");
    let mut s = db.session();
    // The indexes came back: lookups use them and uniqueness holds.
    assert_eq!(run(&mut s, "SELECT id FROM every_type WHERE v = 'four'"), vec![vec![Value::Int32(4)]]);
    assert_eq!(s.execute_blocking("INSERT INTO every_type (id, v) VALUES (5, 'varchar')").unwrap_err().state, SqlState::UniqueViolation);
    assert_eq!(s.execute_blocking("INSERT INTO gone VALUES ('re-created', 1)").unwrap_err().state, SqlState::UniqueViolation);
    assert_eq!(run(&mut s, "SELECT count(*) FROM parted WHERE grp = 3 AND note = 'in a block'"), vec![vec![Value::Int64(72)]]);
    // The dropped column stayed dropped, with the index that included it; the other index
    // answers from the columns after it.
    assert_eq!(run(&mut s, "SELECT k, tag, n FROM slim WHERE n = 501"), vec![vec![Value::Int32(50), Value::Text("after the drop".into()), Value::Int64(501)]]);
    let slim = db.engine().catalog().require_table("slim").unwrap().clone();
    let indexes: Vec<(&str, &[usize])> = slim.indexes.iter().map(|i| (i.name.as_str(), i.columns.as_slice())).collect();
    assert_eq!(indexes, [("slim_pkey", &[0][..]), ("slim_n", &[1][..])]);
    // New rows after recovery get slots of their own, and survive the next restart.
    run(&mut s, "INSERT INTO parted SELECT x, 0, 'after' FROM generate_series(2000, 2100) AS g(x)");
    run(&mut s, "INSERT INTO every_type (id, v) VALUES (6, 'six')");
    let again = dump(&db);
    drop(s);
    drop(db);
    let db = open(&dir.0, partitions);
    assert_eq!(dump(&db), again);
}

#[test]
fn restart_without_a_checkpoint() {
    restart_brings_back_everything(1, usize::MAX);
}

#[test]
fn restart_from_a_checkpoint_and_the_log_after_it() {
    restart_brings_back_everything(1, 12);
}

#[test]
fn restart_from_a_checkpoint_at_the_end() {
    restart_brings_back_everything(1, 34);
}

#[test]
fn restart_with_three_partitions() {
    restart_brings_back_everything(3, 18);
}

/// A DEFAULT computed from the time comes back from the log and from a checkpoint as the
/// same expression, and is still computed for each new row; a timestamp(p) column keeps its
/// precision and still rounds what is written.
#[test]
fn time_dependent_defaults_and_precisions_come_back_from_the_log_and_a_checkpoint() {
    let dir = TempDir::new("time-defaults");
    let columns = |db: &Database| db.engine().catalog().require_table("tokens").unwrap().columns.clone();
    let check = |db: &Database, id: i32| {
        let mut s = db.session();
        run(&mut s, &format!("INSERT INTO tokens (id, stamp) VALUES ({id}, '2024-01-01 10:00:00.6')"));
        let sql = format!(
            "SELECT expires > now() + INTERVAL '29 days', due = current_date + 1, \
             extract(microseconds FROM issued)::int % 1000000, stamp = '2024-01-01 10:00:01' FROM tokens WHERE id = {id}"
        );
        let expected = vec![vec![Value::Bool(true), Value::Bool(true), Value::Int32(0), Value::Bool(true)]];
        assert_eq!(run(&mut s, &sql), expected, "row {id}");
    };
    let before = {
        let db = open(&dir.0, 1);
        let mut s = db.session();
        run(
            &mut s,
            "CREATE TABLE tokens (id INT PRIMARY KEY, expires TIMESTAMPTZ DEFAULT now() + INTERVAL '30 days', \
             due DATE DEFAULT current_date + 1, issued TIMESTAMPTZ DEFAULT CURRENT_TIMESTAMP(0), stamp TIMESTAMP(0))",
        );
        check(&db, 1);
        columns(&db)
    };
    let time_dependent = |c: &freshet_core::catalog::ColumnDef| {
        matches!(&c.default, Some(freshet_core::catalog::ColumnDefault::TimeDependent { sql, .. }) if sql == "now() + INTERVAL '30 days'")
    };
    assert!(time_dependent(&before[1]), "{before:?}");
    assert_eq!(before[4].precision, Some(0));
    // From the log.
    {
        let db = open(&dir.0, 1);
        assert_eq!(columns(&db), before);
        check(&db, 2);
        run(&mut db.session(), "CHECKPOINT");
    }
    // From the checkpoint.
    let db = open(&dir.0, 1);
    assert_eq!(columns(&db), before);
    check(&db, 3);
}

/// `pg_stat_bgwriter` counts the checkpoints CHECKPOINT requests.
#[test]
fn checkpoints_are_counted_in_pg_stat_bgwriter() {
    let dir = TempDir::new("bgwriter");
    let db = open(&dir.0, 1);
    let mut s = db.session();
    let requested = |s: &mut Session| run(s, "SELECT checkpoints_req FROM pg_stat_bgwriter")[0][0].clone();
    assert_eq!(requested(&mut s), Value::Int64(0));
    run(&mut s, "CREATE TABLE c (id INT PRIMARY KEY)");
    run(&mut s, "CHECKPOINT");
    run(&mut s, "CHECKPOINT");
    assert_eq!(requested(&mut s), Value::Int64(2));
}

#[test]
fn a_second_database_on_the_same_directory_is_refused() {
    let dir = TempDir::new("lock");
    let _db = open(&dir.0, 1);
    let e = Database::open(durable_config(&dir.0, 1)).unwrap_err();
    assert_eq!(e.state, SqlState::ObjectInUse, "{e}");
}

#[test]
fn a_directory_keeps_its_partition_count() {
    let dir = TempDir::new("meta");
    drop(open(&dir.0, 2));
    let e = Database::open(durable_config(&dir.0, 3)).unwrap_err();
    assert!(e.message.contains("2 partitions"), "{e}");
}

fn wal_segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("wal")).unwrap().map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

/// A log whose last record is torn (or whose tail is garbage, or whose last record has a
/// flipped bit) recovers the records before it and says where it cut.
#[test]
fn a_torn_or_corrupt_tail_is_cut_at_the_last_valid_record() {
    type Damage = fn(&mut Vec<u8>);
    let cases: [(&str, Damage); 3] = [
        ("torn", |b| {
            let n = b.len();
            b.truncate(n - 5);
        }),
        ("garbage", |b| b.extend_from_slice(&[0xAB; 37])),
        ("flipped", |b| {
            let n = b.len();
            b[n - 3] ^= 0x10;
        }),
    ];
    for (name, damage) in cases {
        let dir = TempDir::new("torn");
        let (full, without_last) = {
            let db = open(&dir.0, 1);
            let mut s = db.session();
            run(&mut s, "CREATE TABLE t (k INT PRIMARY KEY, v TEXT)");
            run(&mut s, "INSERT INTO t VALUES (1, 'one'), (2, 'two')");
            let without_last = dump(&db);
            run(&mut s, "UPDATE t SET v = 'last' WHERE k = 2");
            (dump(&db), without_last)
        };
        let segment = wal_segments(&dir.0).pop().unwrap();
        let mut bytes = std::fs::read(&segment).unwrap();
        let valid_end = bytes.len() as u64;
        damage(&mut bytes);
        std::fs::write(&segment, &bytes).unwrap();
        let db = open(&dir.0, 1);
        let report = db.recovery().clone();
        if name == "garbage" {
            assert_eq!(dump(&db), full, "{name}");
            assert_eq!(report.cut_at, Some(valid_end), "{name}");
        } else {
            assert_eq!(dump(&db), without_last, "{name}");
            assert!(report.cut_at.is_some_and(|c| c < valid_end), "{name}: {report:?}");
        }
        // The log goes on after the cut.
        let mut s = db.session();
        run(&mut s, "INSERT INTO t VALUES (3, 'after the cut')");
        let expected = dump(&db);
        drop(s);
        drop(db);
        assert_eq!(dump(&open(&dir.0, 1)), expected, "{name}");
    }
}

/// The frames of a log segment: (start, length including the header).
fn frames(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 8 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        out.push((at, len + 8));
        at += len + 8;
    }
    out
}

/// A transaction too large for one record is logged as parts and a commit record: it comes
/// back whole, and if the log ends before its commit record, not at all.
#[test]
fn a_large_transaction_is_redone_whole_or_not_at_all() {
    let dir = TempDir::new("large");
    {
        let db = open(&dir.0, 1);
        let mut s = db.session();
        run(&mut s, "CREATE TABLE small (k INT PRIMARY KEY)");
        run(&mut s, "INSERT INTO small VALUES (1)");
        run(&mut s, "CREATE TABLE big (k INT PRIMARY KEY, v TEXT)");
        run(&mut s, "INSERT INTO big SELECT x, 'value ' || x FROM generate_series(1, 250000) AS g(x)");
    }
    {
        let db = open(&dir.0, 1);
        let mut s = db.session();
        assert_eq!(run(&mut s, "SELECT count(*), sum(k) FROM big"), vec![vec![Value::Int64(250_000), Value::Int64(31_250_125_000)]]);
    }
    // Cut the log just before the big transaction's commit record: its parts stay behind.
    let segment = wal_segments(&dir.0).pop().unwrap();
    let bytes = std::fs::read(&segment).unwrap();
    let all = frames(&bytes);
    let big: Vec<&(usize, usize)> = all.iter().filter(|(_, len)| *len > 1_000_000).collect();
    assert_eq!(big.len(), 3, "two parts and a commit of 100,000, 100,000 and 50,000 rows");
    let (commit_at, _) = *big[2];
    std::fs::write(&segment, &bytes[..commit_at]).unwrap();
    let db = open(&dir.0, 1);
    assert_eq!(db.recovery().cut_at, None, "the log is valid up to there");
    let mut s = db.session();
    assert_eq!(run(&mut s, "SELECT count(*) FROM big"), vec![vec![Value::Int64(0)]]);
    assert_eq!(run(&mut s, "SELECT count(*) FROM small"), vec![vec![Value::Int64(1)]]);
}

/// A checkpoint whose file fails its checksum is skipped for the one before it, and the log
/// since that one brings the database up to date.
#[test]
fn a_damaged_checkpoint_falls_back_to_the_previous_one() {
    let dir = TempDir::new("fallback");
    let expected = {
        let db = open(&dir.0, 1);
        let mut s = db.session();
        run(&mut s, "CREATE TABLE t (k INT PRIMARY KEY, v TEXT)");
        run(&mut s, "INSERT INTO t SELECT x, 'v' || x FROM generate_series(1, 100) AS g(x)");
        run(&mut s, "CHECKPOINT");
        run(&mut s, "UPDATE t SET v = 'second' WHERE k <= 10");
        run(&mut s, "CHECKPOINT");
        run(&mut s, "DELETE FROM t WHERE k > 90");
        dump(&db)
    };
    let mut checkpoints: Vec<PathBuf> =
        std::fs::read_dir(dir.0.join("checkpoints")).unwrap().map(|e| e.unwrap().path()).collect();
    checkpoints.sort();
    assert_eq!(checkpoints.len(), 2);
    let newest = checkpoints.pop().unwrap();
    let table_file = std::fs::read_dir(&newest)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "arrow"))
        .unwrap();
    let mut bytes = std::fs::read(&table_file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xFF;
    std::fs::write(&table_file, bytes).unwrap();
    let db = open(&dir.0, 1);
    let older_lsn = u64::from_str_radix(checkpoints[0].file_name().unwrap().to_str().unwrap(), 16).unwrap();
    assert_eq!(db.recovery().checkpoint_lsn, Some(older_lsn));
    assert_eq!(dump(&db), expected);
}

/// Checkpoints are Arrow IPC files any Arrow reader opens: the rows of a table, plus the
/// slot of each row.
#[test]
fn checkpoint_files_are_arrow_ipc() {
    use freshet::arrow::ipc::reader::FileReader;
    let dir = TempDir::new("ipc");
    let db = open(&dir.0, 1);
    let mut s = db.session();
    run(&mut s, "CREATE TABLE t (k INT PRIMARY KEY, v TEXT, n NUMERIC(10,2))");
    run(&mut s, "INSERT INTO t SELECT x, 'v' || x, x / 4.0 FROM generate_series(1, 1000) AS g(x)");
    run(&mut s, "DELETE FROM t WHERE k % 10 = 0");
    run(&mut s, "CHECKPOINT");
    let checkpoint = std::fs::read_dir(dir.0.join("checkpoints")).unwrap().next().unwrap().unwrap().path();
    let file = std::fs::File::open(checkpoint.join(format!("t{}-p0.arrow", db.engine().catalog().require_table("t").unwrap().id))).unwrap();
    let reader = FileReader::try_new(file, None).unwrap();
    let names: Vec<String> = reader.schema().fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(names, ["k", "v", "n", "freshet_row_id"]);
    let rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(rows, 900);
}

/// What the model expects: the committed value of every key.
type Model = BTreeMap<i32, i64>;

fn model_of(db: &Database) -> Model {
    let mut s = db.session();
    run(&mut s, "SELECT k, v FROM kv ORDER BY k")
        .into_iter()
        .map(|r| match (&r[0], &r[1]) {
            (Value::Int32(k), Value::Int64(v)) => (*k, *v),
            other => panic!("{other:?}"),
        })
        .collect()
}

/// Waits until the database accepts commits again (the log resumed), up to a few seconds.
fn wait_for_commits(s: &mut Session) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if s.execute_blocking("INSERT INTO probe VALUES (1)").is_ok() {
            run(s, "DELETE FROM probe");
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// One run of the fault-injection workload: a fault at the `at`-th write (or sync) of the log
/// and checkpoint writers. Returns how many commits failed.
fn fault_run(fault: Fault, at: u64, lasting: bool) -> usize {
    let dir = TempDir::new("fault");
    let faulty = FaultyFs::new();
    let fs: Arc<dyn Fs> = Arc::new(FaultyHandle(faulty.clone()));
    let db = Database::open_with(durable_config(&dir.0, 2), fs).unwrap();
    let mut s = db.session();
    let mut other = db.session();
    run(&mut s, "CREATE TABLE kv (k INT PRIMARY KEY, v BIGINT) PARTITION BY HASH (k)");
    run(&mut s, "CREATE TABLE probe (x INT)");
    let mut model = Model::new();
    let mut failed = 0;
    if lasting {
        faulty.arm_lasting(at, fault);
    } else {
        faulty.arm(at, fault);
    }
    // A second session keeps a transaction open across the fault: it commits only if the log
    // never failed while it ran.
    run(&mut other, "BEGIN");
    let mut other_writes: Vec<(i32, i64)> = Vec::new();
    for step in 0..40i64 {
        let k = (step % 13) as i32;
        let sql = match step % 5 {
            0 | 1 if model.contains_key(&k) => format!("UPDATE kv SET v = {step} WHERE k = {k}"),
            0 | 1 => format!("INSERT INTO kv VALUES ({k}, {step})"),
            2 => format!("UPDATE kv SET v = v + 1000 WHERE k = {k}"),
            3 => format!("DELETE FROM kv WHERE k = {k}"),
            _ => "UPDATE kv SET v = v + 1 WHERE k < 13".to_string(),
        };
        let applied = s.execute_blocking(&sql);
        match applied {
            Ok(_) => apply(&mut model, step, k),
            // While the log is failed, statements fail with its error; nothing else fails
            // (memory holds exactly the model whenever a commit can succeed).
            Err(e) => {
                assert!(matches!(e.state, SqlState::DiskFull | SqlState::IoError), "{sql}: {e}");
                failed += 1;
            }
        }
        if step == 7 {
            let _ = s.execute_blocking("CHECKPOINT");
        }
        if step % 9 == 4 && step < 30 {
            let key = 100 + step as i32;
            if other.execute_blocking(&format!("INSERT INTO kv VALUES ({key}, {step})")).is_ok() {
                other_writes.push((key, step));
            }
        }
        if step == 30 {
            // COMMIT of a failed block answers ROLLBACK; only a real commit counts.
            if let Ok(r) = other.execute_blocking("COMMIT")
                && r.last().is_some_and(|r| r.tag == "COMMIT")
            {
                model.extend(other_writes.iter().copied());
            }
            let _ = other.execute_blocking("ROLLBACK");
        }
        if step == 20 && !faulty.crashed() {
            // Space comes back.
            faulty.disarm();
            assert!(wait_for_commits(&mut s), "commits resume after the fault ({fault:?} at {at})");
        }
    }
    if !faulty.crashed() {
        faulty.disarm();
        assert!(wait_for_commits(&mut s), "commits resume at the end ({fault:?} at {at})");
        // In memory: exactly the acknowledged commits.
        assert_eq!(model_of(&db), model, "in memory after {fault:?} at write {at}");
    }
    drop(s);
    drop(other);
    drop(db);
    let db = open(&dir.0, 2);
    assert_eq!(model_of(&db), model, "recovered after {fault:?} at write {at}");
    failed
}

fn apply(model: &mut Model, step: i64, k: i32) {
    match step % 5 {
        0 | 1 => {
            model.insert(k, step);
        }
        2 => {
            if let Some(v) = model.get_mut(&k) {
                *v += 1000;
            }
        }
        3 => {
            model.remove(&k);
        }
        _ => {
            for (key, v) in model.iter_mut() {
                if (0..13).contains(key) {
                    *v += 1;
                }
            }
        }
    }
}

/// Faults at every write of the workload: a full disk, an I/O error, a failed fsync, and a
/// write that tears as the machine stops. Memory (while the server runs on) and recovery both
/// equal the model built from the acknowledged commits.
#[test]
fn log_faults_leave_exactly_the_acknowledged_commits() {
    let mut failed_somewhere = 0;
    for fault in [Fault::DiskFull, Fault::IoError, Fault::SyncFails, Fault::Torn(9)] {
        for at in (1..=50).step_by(4) {
            failed_somewhere += usize::from(fault_run(fault, at, false) > 0);
        }
    }
    assert!(failed_somewhere > 20, "the faults hit commits ({failed_somewhere} runs had failed commits)");
}

/// A disk that stays full: commits fail with 53100 while reads go on; once space returns,
/// commits succeed again and nothing is lost or half-applied.
#[test]
fn a_full_disk_fails_commits_keeps_reads_and_recovers() {
    for at in [1, 4, 9] {
        assert!(fault_run(Fault::DiskFull, at, true) > 0);
    }
    let dir = TempDir::new("full");
    let faulty = FaultyFs::new();
    let db = Database::open_with(durable_config(&dir.0, 1), Arc::new(FaultyHandle(faulty.clone()))).unwrap();
    let mut s = db.session();
    run(&mut s, "CREATE TABLE t (k INT PRIMARY KEY, v TEXT)");
    run(&mut s, "CREATE TABLE probe (x INT)");
    run(&mut s, "INSERT INTO t VALUES (1, 'kept')");
    faulty.arm_lasting(1, Fault::DiskFull);
    let e = s.execute_blocking("INSERT INTO t VALUES (2, 'lost')").unwrap_err();
    assert_eq!(e.state, SqlState::DiskFull);
    assert_eq!(run(&mut s, "SELECT v FROM t ORDER BY k"), vec![vec![Value::Text("kept".into())]]);
    let e = s.execute_blocking("CREATE TABLE u (x INT)").unwrap_err();
    assert_eq!(e.state, SqlState::DiskFull);
    faulty.disarm();
    assert!(wait_for_commits(&mut s));
    run(&mut s, "INSERT INTO t VALUES (3, 'after')");
    drop(s);
    drop(db);
    let db = open(&dir.0, 1);
    let mut s = db.session();
    assert_eq!(run(&mut s, "SELECT k FROM t ORDER BY k"), vec![vec![Value::Int32(1)], vec![Value::Int32(3)]]);
}

/// Asynchronous commit: a commit is acknowledged before it is durable, and a clean close
/// still makes it durable.
#[test]
fn asynchronous_commits_are_durable_after_a_clean_close() {
    let dir = TempDir::new("async");
    let expected = {
        let db = Database::open(Config { synchronous_commit: false, ..durable_config(&dir.0, 1) }).unwrap();
        let mut s = db.session();
        assert_eq!(run(&mut s, "SHOW synchronous_commit"), vec![vec![Value::Text("off".into())]]);
        run(&mut s, "CREATE TABLE t (k INT PRIMARY KEY)");
        for k in 0..200 {
            run(&mut s, &format!("INSERT INTO t VALUES ({k})"));
        }
        db.close().unwrap();
        dump(&db)
    };
    assert_eq!(dump(&open(&dir.0, 1)), expected);
}

fn int(rows: Vec<Vec<Value>>) -> i64 {
    rows[0][0].as_i64().unwrap()
}

/// Sequences come back from the log and from checkpoints, never handing out a value twice:
/// a standalone sequence, a SERIAL column's (also after a later definition of its table, an
/// index, was logged), setval, and DROP SEQUENCE.
#[test]
fn sequences_resume_past_every_value_handed_out() {
    for checkpoint in [false, true] {
        let dir = TempDir::new("sequences");
        let (mut last_s, mut last_id, mut last_o, mut last_e) = (0, 0, 0, 0);
        for round in 0..3 {
            let db = open(&dir.0, 1);
            let mut s = db.session();
            if round == 0 {
                run(&mut s, "CREATE SEQUENCE s INCREMENT BY 3");
                run(&mut s, "CREATE SEQUENCE gone");
                run(&mut s, "CREATE TABLE t (id serial PRIMARY KEY, v int)");
                run(&mut s, "CREATE SEQUENCE fixed");
                run(&mut s, "SELECT setval('fixed', 500)");
                // As pg_dump writes them: a default set afterwards, a sequence adopted by
                // OWNED BY (after values were handed out), an identity added with its name.
                run(&mut s, "CREATE TABLE o (id bigint NOT NULL PRIMARY KEY, v int)");
                run(&mut s, "CREATE SEQUENCE adopted");
                run(&mut s, "ALTER TABLE o ALTER COLUMN id SET DEFAULT nextval('adopted'::regclass)");
                run(&mut s, "CREATE TABLE e (id int NOT NULL, v int)");
                run(&mut s, "ALTER TABLE e ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (SEQUENCE NAME public.e_seq START WITH 7 INCREMENT BY 1)");
            }
            for _ in 0..40 {
                let v = int(run(&mut s, "SELECT nextval('s')"));
                assert!(v > last_s, "round {round}: {v} after {last_s}");
                last_s = v;
                let id = int(run(&mut s, "INSERT INTO t (v) VALUES (1) RETURNING id"));
                assert!(id > last_id, "round {round}: id {id} after {last_id}");
                last_id = id;
                let o = int(run(&mut s, "INSERT INTO o (v) VALUES (1) RETURNING id"));
                assert!(o > last_o, "round {round}: o.id {o} after {last_o}");
                last_o = o;
                let e = int(run(&mut s, "INSERT INTO e (v) VALUES (1) RETURNING id"));
                assert!(e > last_e && e >= 7, "round {round}: e.id {e} after {last_e}");
                last_e = e;
            }
            if round == 0 {
                run(&mut s, "ALTER SEQUENCE public.adopted OWNED BY public.o.id");
            }
            if round == 0 {
                // A new definition of the table keeps its sequence's counter.
                run(&mut s, "CREATE INDEX t_v ON t (v)");
                run(&mut s, "DROP SEQUENCE gone");
            }
            if checkpoint {
                db.checkpoint().unwrap();
            }
            assert_eq!(int(run(&mut s, "SELECT count(*) FROM t")), 40 * (round + 1));
            assert_eq!(s.execute_blocking("SELECT nextval('gone')").unwrap_err().state, SqlState::UndefinedTable);
            drop(s);
            drop(db);
        }
        let db = open(&dir.0, 1);
        let mut s = db.session();
        assert!(int(run(&mut s, "SELECT nextval('fixed')")) > 500, "setval survives");
        let owner = s.execute_blocking("SELECT pg_get_serial_sequence('o', 'id'), pg_get_serial_sequence('e', 'id')").unwrap()[0].rows();
        assert_eq!(owner[0], vec![freshet::Value::Text("public.adopted".into()), freshet::Value::Text("public.e_seq".into())]);
        run(&mut s, "DROP TABLE o");
        assert_eq!(s.execute_blocking("SELECT nextval('adopted')").unwrap_err().state, SqlState::UndefinedTable, "an adopted sequence goes with its table");
        assert_eq!(s.execute_blocking("SELECT currval('s')").unwrap_err().state, SqlState::ObjectNotInPrerequisiteState, "currval is per session");
    }
}
