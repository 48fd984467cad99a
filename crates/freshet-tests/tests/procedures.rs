//! Stored procedures beyond the SQL corpus (`slt/procedures.slt`): native Rust procedures,
//! procedures surviving restarts (from the log and from checkpoints), CALL and SELECT f(…)
//! with parameters over the extended protocol, and partition classification.

use freshet::{ColumnInfo, Config, DataType, Database, Error, RecordRead, SqlState, Value};
use freshet_server::{Server, ServerConfig};
use tokio::sync::oneshot;

use crate::durability::{durable_config, TempDir};

fn int(rows: &[Vec<Value>]) -> i64 {
    rows[0][0].as_i64().expect("an integer")
}

fn accounts(db: &Database) {
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE account (id INT PRIMARY KEY, balance INT NOT NULL)").unwrap();
    s.execute_blocking("INSERT INTO account VALUES (1, 100), (2, 0)").unwrap();
}

/// A native transfer: two updates in the call's transaction, and an error after the first
/// one when the balance would go negative. The error must undo the first update.
fn register_transfer(db: &Database) {
    db.register_procedure("transfer", |cx, args| {
        let (from, to, amount) = (args[0].clone(), args[1].clone(), args[2].clone());
        cx.execute("UPDATE account SET balance = balance + $2 WHERE id = $1", &[to, amount.clone()])?;
        cx.execute("UPDATE account SET balance = balance - $2 WHERE id = $1", &[from.clone(), amount])?;
        let rows = cx.query("SELECT balance FROM account WHERE id = $1", &[from])?;
        if rows[0][0].as_i64().unwrap_or(0) < 0 {
            return Err(Error::new(SqlState::custom("P0001").unwrap(), "insufficient funds"));
        }
        Ok(vec![])
    });
}

/// (calls, calls that ran as one executor job) of a native procedure.
fn native_counts(db: &Database, name: &str) -> (i64, i64) {
    let sql = format!("SELECT calls, calls_in_one_job FROM freshet_procedures WHERE name = '{name}'");
    let rows = db.session().execute_blocking(&sql).unwrap().remove(0).rows();
    (rows[0][0].as_i64().unwrap(), rows[0][1].as_i64().unwrap())
}

#[test]
fn native_procedure_runs_atomically_and_from_rust() {
    let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
    accounts(&db);
    register_transfer(&db);
    let mut s = db.session();
    s.execute_blocking("CALL transfer(1, 2, 30)").unwrap();
    let err = s.execute_blocking("CALL transfer(1, 2, 500)").unwrap_err();
    assert_eq!(err.state.code(), "P0001");
    assert_eq!(err.message, "insufficient funds");
    s.call_blocking("transfer", vec![Value::Int32(2), Value::Int32(1), Value::Int32(10)]).unwrap();
    let rows = s.execute_blocking("SELECT balance FROM account ORDER BY id").unwrap().remove(0).rows();
    assert_eq!(rows, vec![vec![Value::Int32(80)], vec![Value::Int32(20)]]);

    // Inside a block the call belongs to the block: ROLLBACK undoes it.
    s.execute_blocking("BEGIN").unwrap();
    s.execute_blocking("CALL transfer(1, 2, 5)").unwrap();
    s.execute_blocking("ROLLBACK").unwrap();
    let rows = s.execute_blocking("SELECT sum(balance) FILTER (WHERE id = 1) FROM account").unwrap().remove(0).rows();
    assert_eq!(int(&rows), 80);
    // The first call prepared the statements and ran them one by one; the failing second one
    // ran (and was undone) inside one job, the third ran as one job, the one inside a block
    // statement by statement.
    assert_eq!(native_counts(&db, "transfer"), (4, 2));
}

/// A call that runs as one job cannot wait for a lock inside its job: it gives up, is undone,
/// waits for the lock's holder to end, and runs as one job again.
#[test]
fn a_call_blocked_by_a_lock_gives_up_its_job_waits_and_runs_as_a_job_again() {
    let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
    accounts(&db);
    register_transfer(&db);
    let mut s = db.session();
    // READ COMMITTED: once the lock is free the call proceeds (at the default SERIALIZABLE it
    // would fail with 40001, as PostgreSQL's does after a concurrent update).
    s.execute_blocking("SET default_transaction_isolation = 'read committed'").unwrap();
    s.execute_blocking("CALL transfer(1, 2, 10)").unwrap();
    s.execute_blocking("CALL transfer(1, 2, 10)").unwrap();
    assert_eq!(native_counts(&db, "transfer"), (2, 1));
    let mut holder = db.session();
    holder.execute_blocking("BEGIN").unwrap();
    holder.execute_blocking("UPDATE account SET balance = balance + 1000 WHERE id = 1").unwrap();
    let caller = std::thread::spawn(move || s.execute_blocking("CALL transfer(1, 2, 50)").map(|_| s));
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!caller.is_finished(), "the call did not wait for the lock");
    holder.execute_blocking("COMMIT").unwrap();
    let mut s = caller.join().unwrap().unwrap();
    let rows = s.execute_blocking("SELECT balance FROM account ORDER BY id").unwrap().remove(0).rows();
    assert_eq!(rows, vec![vec![Value::Int32(1030)], vec![Value::Int32(70)]]);
    // The blocked call gave its first job up and ran as a job once the holder had ended.
    assert_eq!(native_counts(&db, "transfer"), (3, 2));

    // A PL/pgSQL routine's call the same way.
    s.execute_blocking(
        "CREATE FUNCTION deposit(p_id INT, p_amount INT) RETURNS INT LANGUAGE plpgsql AS $$
         DECLARE b INT;
         BEGIN
           UPDATE account SET balance = balance + p_amount WHERE id = p_id RETURNING balance INTO b;
           RETURN b;
         END $$",
    )
    .unwrap();
    assert_eq!(int(&s.execute_blocking("SELECT deposit(2, 1)").unwrap().remove(0).rows()), 71);
    holder.execute_blocking("BEGIN").unwrap();
    holder.execute_blocking("UPDATE account SET balance = balance + 100 WHERE id = 2").unwrap();
    let caller = std::thread::spawn(move || s.execute_blocking("SELECT deposit(2, 5)").map(|r| (s, r)));
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!caller.is_finished(), "the call did not wait for the lock");
    holder.execute_blocking("COMMIT").unwrap();
    let (mut s, result) = caller.join().unwrap().unwrap();
    assert_eq!(int(&result[0].rows()), 176, "the call ran after the holder's change");
    assert_eq!(native_counts(&db, "deposit"), (2, 2));

    // With a lock_timeout the call runs the ordinary way, whose statements keep it.
    s.execute_blocking("SET lock_timeout = '10s'").unwrap();
    holder.execute_blocking("BEGIN").unwrap();
    holder.execute_blocking("UPDATE account SET balance = balance + 100 WHERE id = 2").unwrap();
    let caller = std::thread::spawn(move || s.execute_blocking("SELECT deposit(2, 5)"));
    std::thread::sleep(std::time::Duration::from_millis(300));
    holder.execute_blocking("COMMIT").unwrap();
    let result = caller.join().unwrap().unwrap();
    assert_eq!(int(&result[0].rows()), 281);
    assert_eq!(native_counts(&db, "deposit"), (3, 2));
}

#[test]
fn native_procedure_returns_rows_to_call() {
    let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
    accounts(&db);
    let columns = vec![ColumnInfo { name: "id".into(), ty: DataType::Int32 }, ColumnInfo { name: "balance".into(), ty: DataType::Int32 }];
    db.register_procedure_returning("rich", columns, |cx, args| cx.query("SELECT id, balance FROM account WHERE balance >= $1 ORDER BY id", &[args[0].clone()]));
    let mut s = db.session();
    let result = s.execute_blocking("CALL rich(50)").unwrap().remove(0);
    assert_eq!(result.rows(), vec![vec![Value::Int32(1), Value::Int32(100)]]);
    assert_eq!(s.call_blocking("rich", vec![Value::Int32(0)]).unwrap().len(), 2);
    // A stored function is called from Rust the same way; its value is one row.
    s.execute_blocking("CREATE FUNCTION twice(x INT) RETURNS INT LANGUAGE plpgsql AS $$ BEGIN RETURN 2 * x; END $$").unwrap();
    assert_eq!(s.call_blocking("twice", vec![Value::Int32(21)]).unwrap(), vec![vec![Value::Int32(42)]]);
    let kinds = s.execute_blocking("SELECT name, kind FROM freshet_procedures ORDER BY name").unwrap().remove(0).rows();
    assert_eq!(kinds, vec![vec![Value::Text("rich".into()), Value::Text("native".into())], vec![Value::Text("twice".into()), Value::Text("function".into())]]);
    // From Rust, among routines of one name: chosen by the values' types.
    s.execute_blocking("CREATE FUNCTION twice(t TEXT) RETURNS TEXT LANGUAGE plpgsql AS $$ BEGIN RETURN t || t; END $$").unwrap();
    assert_eq!(s.call_blocking("twice", vec![Value::Text("ab".into())]).unwrap(), vec![vec![Value::Text("abab".into())]]);
    assert_eq!(s.call_blocking("twice", vec![Value::Int32(4)]).unwrap(), vec![vec![Value::Int32(8)]]);
    let err = s.call_blocking("twice", vec![Value::Bool(true)]).unwrap_err();
    assert_eq!(err.state, SqlState::UndefinedFunction, "{err}");
    let err = s.call_blocking("nothing_here", vec![]).unwrap_err();
    assert_eq!(err.state, SqlState::UndefinedFunction);
}

/// A native procedure that declares its parameters' types gets its arguments converted to
/// them (from literals, from Rust values, from `$n` parameters, which a prepared CALL
/// describes with those types), and refuses a call with another number of arguments or an
/// argument that does not convert.
#[test]
fn native_procedure_with_declared_parameter_types() {
    let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
    let amount = DataType::Decimal { precision: 6, scale: 2 };
    let params = vec![DataType::Timestamp, amount, DataType::Int32];
    let columns = ["at", "amount", "n"].iter().zip(&params).map(|(n, ty)| ColumnInfo { name: n.to_string(), ty: *ty }).collect();
    db.register_typed_procedure("echo", params.clone(), columns, |_, args| Ok(vec![args.to_vec()]));
    let at = match Value::parse("2024-01-02 03:04:05", DataType::Timestamp).unwrap() {
        Value::Timestamp(t) => t,
        other => panic!("{other:?}"),
    };
    let expected = vec![vec![Value::Timestamp(at), Value::Decimal(freshet::Decimal::new(1250, 2)), Value::Int32(7)]];
    let mut s = db.session();
    assert_eq!(s.execute_blocking("CALL echo('2024-01-02 03:04:05', 12.5, '7')").unwrap().remove(0).rows(), expected);
    assert_eq!(s.call_blocking("echo", vec![Value::Text("2024-01-02 03:04:05".into()), Value::Text("12.50".into()), Value::Int64(7)]).unwrap(), expected);
    let prepared = futures::executor::block_on(s.prepare("CALL echo($1, $2, $3)", &[])).unwrap();
    assert_eq!(prepared.param_types, params);
    let result = futures::executor::block_on(s.execute(&prepared, vec![Value::Timestamp(at), Value::Decimal(freshet::Decimal::new(1250, 2)), Value::Int32(7)])).unwrap();
    let freshet::Output::Rows { columns, rows, .. } = result.output else { panic!("CALL echo returns rows") };
    assert_eq!(futures::executor::block_on(rows.collect_values(&columns)).unwrap(), expected);

    let err = s.execute_blocking("CALL echo('2024-01-02', 1)").unwrap_err();
    assert_eq!(err.state, SqlState::UndefinedFunction, "{err:?}");
    let err = s.execute_blocking("CALL echo('2024-01-02', 1, 'seven')").unwrap_err();
    assert_eq!(err.state.code(), "22P02", "{err:?}");
    let err = s.execute_blocking("CALL echo('2024-01-02', 12345.67, 1)").unwrap_err();
    assert_eq!(err.state.code(), "22003", "{err:?}");
    // Undeclared, an argument comes as written: a number as a number, a literal as text.
    let columns = vec![ColumnInfo { name: "x".into(), ty: DataType::Int64 }, ColumnInfo { name: "y".into(), ty: DataType::Text }];
    db.register_procedure_returning("raw", columns, |_, args| Ok(vec![args.to_vec()]));
    assert_eq!(s.execute_blocking("CALL raw(7, '7')").unwrap().remove(0).rows(), vec![vec![Value::Int64(7), Value::Text("7".into())]]);
    // A row of another width than the procedure's columns is an error, not a row.
    let err = s.execute_blocking("CALL raw(7)").unwrap_err();
    assert_eq!(err.state.code(), "42804", "{err:?}");
}

/// A native procedure over record-level access: the newest entry of a key (reverse order,
/// limit), an insert, a read-modify-write of a range, a locked read and update of the first entry, a delete of a range, and a
/// read of a range, returned with the number deleted.
fn register_ledger_step(db: &Database) {
    let columns = vec![
        ColumnInfo { name: "seq".into(), ty: DataType::Int32 },
        ColumnInfo { name: "qty".into(), ty: DataType::Int32 },
        ColumnInfo { name: "note".into(), ty: DataType::Text },
    ];
    db.register_procedure_returning("ledger_step", columns, |cx, args| {
        let t = cx.table("ledger")?;
        let (k, n) = (args[0].clone(), args[1].as_i64().unwrap_or(0));
        // A prefetch is a hint and changes nothing: a whole key, a prefix, a NULL key and a
        // value that does not convert to the key column's type.
        let hinted = [
            t.key(vec![k.clone(), Value::Int32(1)], t.columns(&["qty", "note"])?)?,
            RecordRead { eq: vec![k.clone()], columns: t.columns(&["note"])?, ..RecordRead::default() },
            t.key(vec![Value::Null, Value::Int32(1)], Vec::new())?,
            t.key(vec![k.clone(), Value::Text("one".into())], Vec::new())?,
        ];
        cx.prefetch(&t, &hinted);
        let newest = RecordRead { eq: vec![k.clone()], reverse: true, limit: Some(1), columns: t.columns(&["seq", "qty"])?, ..RecordRead::default() };
        let last = cx.read(&t, &newest)?;
        let (seq, qty) = last.first().map_or((0, 0), |r| (r[0].as_i64().unwrap_or(0), r[1].as_i64().unwrap_or(0)));
        let row = t.row(vec![("k", k.clone()), ("seq", Value::Int64(seq + 1)), ("qty", Value::Int64(qty + n)), ("note", Value::Text(format!("step {}", seq + 1)))])?;
        cx.insert(&t, row)?;
        // Read-modify-write of the entry just inserted (a range from it on): its quantity
        // doubled, the value seen before returned.
        let qty_column = t.column("qty")?;
        let fresh = RecordRead { eq: vec![k.clone()], lower: Some((Value::Int64(seq + 1), true)), columns: vec![qty_column], ..RecordRead::default() };
        let seen = cx.modify(&t, &fresh, &mut |r| Ok(vec![(qty_column, Value::Int64(2 * r[0].as_i64().unwrap_or(0)))]))?;
        assert_eq!(seen, vec![vec![Value::Int32((qty + n) as i32)]], "modify returns the values it was given");
        // The same rows read in place: the doubled quantity, the note borrowed; a change to
        // the value already there is still a change.
        let in_place = RecordRead { columns: t.columns(&["qty", "note"])?, ..fresh.clone() };
        let mut visited = Vec::new();
        let changed = cx.modify_each(&t, &in_place, &mut |r| {
            visited.push((r.value(0), r.str(1).map(str::to_string), r.len()));
            Ok(vec![(qty_column, r.value(0))])
        })?;
        assert_eq!(changed, 1);
        assert_eq!(visited, vec![(Value::Int32(2 * (qty + n) as i32), Some(format!("step {}", seq + 1)), 2)], "modify_each sees the row in place");
        // Entries by a list of sequence numbers: each distinct one once, in key order (or
        // reversed); NULL and a missing one find nothing.
        for reverse in [false, true] {
            let listed = RecordRead {
                eq: vec![k.clone()],
                any: vec![Value::Int64(seq + 1), Value::Int32(1), Value::Null, Value::Int32(1), Value::Int32(999)],
                reverse,
                columns: t.columns(&["seq"])?,
                ..RecordRead::default()
            };
            let mut expected = vec![vec![Value::Int32(1)], vec![Value::Int32(seq as i32 + 1)]];
            if reverse {
                expected.reverse();
            }
            assert_eq!(cx.read(&t, &listed)?, expected, "a read of listed keys");
            let mut each = Vec::new();
            let seen = cx.read_each(&t, &listed, &mut |r| {
                each.push(vec![r.value(0)]);
                Ok(true)
            })?;
            assert_eq!((seen, each), (expected.len(), expected.clone()), "read_each visits what read returns");
            let first_only = cx.read_each(&t, &listed, &mut |r| Ok(r.int(0).is_none()))?;
            assert_eq!(first_only, 1, "a visitor that returns false stops the read");
        }
        let first = t.key(vec![k.clone(), Value::Int32(1)], t.columns(&["qty"])?)?;
        let locked = cx.read_for_update(&t, &first)?;
        let bumped = locked[0][0].as_i64().unwrap_or(0) + 1;
        let changed = cx.update(&t, &first, &[(t.column("qty")?, Value::Int64(bumped))])?;
        assert_eq!(changed, vec![vec![Value::Int32(bumped as i32)]], "UPDATE returns the new version");
        let old = RecordRead { eq: vec![k.clone()], lower: Some((Value::Int32(2), true)), upper: Some((Value::Int64(seq - 1), false)), ..RecordRead::default() };
        let deleted = cx.delete(&t, &old)?;
        let mut rows = cx.read(&t, &RecordRead { eq: vec![k], lower: Some((Value::Int32(2), true)), columns: t.columns(&["seq", "qty", "note"])?, ..RecordRead::default() })?;
        rows.push(vec![Value::Int64(deleted as i64), Value::Null, Value::Null]);
        Ok(rows)
    });
}

/// Record-level access means the same inside one executor job (straight to storage) and in
/// a transaction block (as the SQL statements it stands for): the same rows come back and the
/// same rows are left.
#[test]
fn native_record_access_means_the_same_in_a_job_and_in_a_block() {
    let mut results = Vec::new();
    for in_block in [false, true] {
        let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
        let mut s = db.session();
        s.execute_blocking("CREATE TABLE ledger (k INT, seq INT, qty INT NOT NULL, note TEXT, PRIMARY KEY (k, seq))").unwrap();
        s.execute_blocking("INSERT INTO ledger VALUES (7, 1, 10, 'opening'), (8, 1, 0, 'other')").unwrap();
        register_ledger_step(&db);
        let mut returned = Vec::new();
        for n in 1..=5 {
            if in_block {
                s.execute_blocking("BEGIN").unwrap();
            }
            returned.push(s.call_blocking("ledger_step", vec![Value::Int32(7), Value::Int32(n)]).unwrap());
            if in_block {
                s.execute_blocking("COMMIT").unwrap();
            }
        }
        let left = s.execute_blocking("SELECT * FROM ledger ORDER BY k, seq").unwrap().remove(0).rows();
        let expected_jobs = if in_block { 0 } else { 5 };
        assert_eq!(native_counts(&db, "ledger_step"), (5, expected_jobs));
        results.push((returned, left));
    }
    assert_eq!(results[0], results[1]);
    let (returned, left) = &results[0];
    // After five steps: the opening entry bumped five times; entries 2 and 3 deleted by the
    // last two steps (each deletes from 2 up to two below the newest entry it saw).
    assert_eq!(
        left,
        &vec![
            vec![Value::Int32(7), Value::Int32(1), Value::Int32(15), Value::Text("opening".into())],
            vec![Value::Int32(7), Value::Int32(4), Value::Int32(102), Value::Text("step 4".into())],
            vec![Value::Int32(7), Value::Int32(5), Value::Int32(212), Value::Text("step 5".into())],
            vec![Value::Int32(7), Value::Int32(6), Value::Int32(434), Value::Text("step 6".into())],
            vec![Value::Int32(8), Value::Int32(1), Value::Int32(0), Value::Text("other".into())],
        ]
    );
    // The count, returned as an int8, comes back as its column's type.
    let deleted: Vec<Value> = returned.iter().map(|r| r.last().unwrap()[0].clone()).collect();
    assert_eq!(deleted, [0, 0, 0, 1, 1].map(Value::Int32).to_vec());
    // The last call returned entries 4, 5 and 6 (and its count).
    let seqs: Vec<Value> = returned[4].iter().take(3).map(|r| r[0].clone()).collect();
    assert_eq!(seqs, [4, 5, 6].map(Value::Int32).to_vec());
}

/// Record-level access refuses what it cannot mean, with the SQLSTATE the statement would
/// have, and a duplicate key fails as an INSERT's does.
#[test]
fn native_record_access_errors() {
    let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
    accounts(&db);
    db.register_procedure("record_error", |cx, args| {
        let t = cx.table("account")?;
        match args[0].as_i64().unwrap_or(0) {
            1 => cx.table("no_such_table").map(|_| ()),
            2 => t.column("no_such_column").map(|_| ()),
            3 => cx.read(&t, &RecordRead { lower: Some((Value::Int32(1), true)), ..RecordRead::default() }).map(|_| ()),
            4 => cx.update(&t, &RecordRead { eq: vec![Value::Int32(1)], limit: Some(1), ..RecordRead::default() }, &[]).map(|_| ()),
            5 => cx.insert(&t, vec![Value::Int32(3)]),
            6 => cx.insert(&t, vec![Value::Int32(1), Value::Int32(5)]),
            7 => cx.update(&t, &t.key(vec![Value::Int32(1)], vec![])?, &[(1, Value::Null)]).map(|_| ()),
            9 => cx.read(&t, &RecordRead { any: vec![Value::Int32(1)], lower: Some((Value::Int32(1), true)), ..RecordRead::default() }).map(|_| ()),
            _ => t.index(&["balance"]).map(|_| ()),
        }?;
        Ok(vec![])
    });
    let mut s = db.session();
    for (case, code) in [(1, "42P01"), (2, "42703"), (3, "0A000"), (4, "0A000"), (5, "42601"), (6, "23505"), (7, "23502"), (8, "42704"), (9, "22023")] {
        for in_block in [false, true] {
            if in_block {
                s.execute_blocking("BEGIN").unwrap();
            }
            let err = s.call_blocking("record_error", vec![Value::Int32(case)]).unwrap_err();
            assert_eq!(err.state.code(), code, "case {case} (in a block: {in_block}): {}", err.message);
            if in_block {
                s.execute_blocking("ROLLBACK").unwrap();
            }
        }
    }
    let rows = s.execute_blocking("SELECT * FROM account ORDER BY id").unwrap().remove(0).rows();
    assert_eq!(rows, vec![vec![Value::Int32(1), Value::Int32(100)], vec![Value::Int32(2), Value::Int32(0)]]);
}

/// `Resolved` resolves once per catalog version: calls in a job and in a block reuse what the
/// first call resolved, and after DDL that moves the column the next call resolves again and
/// writes the column of that name in the new definition.
#[test]
fn resolved_positions_are_kept_until_ddl() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
    accounts(&db);
    let resolutions = Arc::new(AtomicUsize::new(0));
    let resolved = Arc::new(freshet::Resolved::new());
    let counted = resolutions.clone();
    db.register_procedure("deposit", move |cx, args| {
        let r = resolved.get(cx, |cx| {
            counted.fetch_add(1, Ordering::SeqCst);
            let t = cx.table("account")?;
            Ok((t.column("balance")?, t))
        })?;
        let (balance, t) = (r.0, &r.1);
        let read = t.key(vec![args[0].clone()], vec![balance])?;
        cx.modify(t, &read, &mut |row| Ok(vec![(balance, Value::Int64(row[0].as_i64().unwrap_or(0) + 1))]))?;
        Ok(vec![])
    });
    let mut s = db.session();
    for in_block in [false, true, false] {
        if in_block {
            s.execute_blocking("BEGIN").unwrap();
        }
        s.call_blocking("deposit", vec![Value::Int32(1)]).unwrap();
        if in_block {
            s.execute_blocking("COMMIT").unwrap();
        }
    }
    assert_eq!(resolutions.load(Ordering::SeqCst), 1);
    // Re-created with `balance` second to last: a kept position would now name `note`.
    s.execute_blocking("CREATE TABLE account_new (id INT PRIMARY KEY, balance INT NOT NULL, note TEXT)").unwrap();
    s.execute_blocking("INSERT INTO account_new SELECT id, balance, 'moved' FROM account").unwrap();
    s.execute_blocking("DROP TABLE account").unwrap();
    s.execute_blocking("CREATE TABLE account (id INT PRIMARY KEY, note TEXT, balance INT NOT NULL)").unwrap();
    s.execute_blocking("INSERT INTO account SELECT id, note, balance FROM account_new").unwrap();
    s.call_blocking("deposit", vec![Value::Int32(1)]).unwrap();
    assert_eq!(resolutions.load(Ordering::SeqCst), 2);
    let rows = s.execute_blocking("SELECT * FROM account ORDER BY id").unwrap().remove(0).rows();
    assert_eq!(
        rows,
        vec![
            vec![Value::Int32(1), Value::Text("moved".into()), Value::Int32(104)],
            vec![Value::Int32(2), Value::Text("moved".into()), Value::Int32(0)],
        ]
    );
}

/// A body may keep a `TableRef` across calls. After DDL changes or replaces the table, the
/// one-job run gives up rather than write rows of the old shape, and the statement run works
/// on the table of that name: a new last column gets NULL, as in `INSERT … VALUES` with fewer
/// values than columns.
#[test]
fn a_table_ref_kept_across_ddl_gives_the_job_up() {
    let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
    accounts(&db);
    let kept = std::sync::Mutex::new(None::<freshet::TableRef>);
    db.register_procedure("open_account", move |cx, args| {
        let t = { kept.lock().unwrap().clone() };
        let t = match t {
            Some(t) => t,
            None => {
                let t = cx.table("account")?;
                *kept.lock().unwrap() = Some(t.clone());
                t
            }
        };
        cx.insert(&t, vec![args[0].clone(), Value::Int32(0)])?;
        Ok(vec![])
    });
    let mut s = db.session();
    s.execute_blocking("CALL open_account(3)").unwrap();
    s.execute_blocking("CREATE INDEX account_by_balance ON account (balance)").unwrap();
    s.execute_blocking("CALL open_account(4)").unwrap();
    assert_eq!(native_counts(&db, "open_account"), (2, 1));
    let rows = s.execute_blocking("SELECT id FROM account WHERE balance = 0 ORDER BY id").unwrap().remove(0).rows();
    assert_eq!(rows, [2, 3, 4].map(|i| vec![Value::Int32(i)]).to_vec());
    s.execute_blocking("DROP TABLE account").unwrap();
    s.execute_blocking("CREATE TABLE account (id INT PRIMARY KEY, balance INT NOT NULL, owner TEXT)").unwrap();
    s.execute_blocking("CALL open_account(5)").unwrap();
    assert_eq!(native_counts(&db, "open_account"), (3, 1));
    let rows = s.execute_blocking("SELECT * FROM account").unwrap().remove(0).rows();
    assert_eq!(rows, vec![vec![Value::Int32(5), Value::Int32(0), Value::Null]]);
}

const BUMP: &str = "CREATE PROCEDURE bump(key INT, by INT) LANGUAGE plpgsql AS $$
BEGIN
  UPDATE account SET balance = balance + by WHERE id = key;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'no account %', key USING ERRCODE = 'P0002';
  END IF;
END $$";

/// Procedures come back after a restart: from the log alone, from a checkpoint, and with a
/// replacement and a drop logged after the checkpoint.
#[test]
fn procedures_survive_restarts() {
    let dir = TempDir::new("procedures");
    {
        let db = Database::open(durable_config(&dir.0, 1)).unwrap();
        accounts(&db);
        let mut s = db.session();
        s.execute_blocking(BUMP).unwrap();
        s.execute_blocking("CREATE FUNCTION balance_of(key INT) RETURNS INT LANGUAGE plpgsql AS $$ DECLARE b INT; BEGIN SELECT balance INTO b FROM account WHERE id = key; RETURN b; END $$").unwrap();
        s.execute_blocking("CALL bump(1, 5)").unwrap();
    }
    {
        let db = Database::open(durable_config(&dir.0, 1)).unwrap();
        let mut s = db.session();
        s.execute_blocking("CALL bump(1, 5)").unwrap();
        assert_eq!(int(&s.execute_blocking("SELECT balance_of(1)").unwrap().remove(0).rows()), 110);
        s.execute_blocking("CHECKPOINT").unwrap();
        // After the checkpoint: a replacement and a drop, in the log only.
        s.execute_blocking(&BUMP.replace("CREATE PROCEDURE", "CREATE OR REPLACE PROCEDURE").replace("balance + by", "balance + 2 * by")).unwrap();
        s.execute_blocking("CREATE FUNCTION gone() RETURNS INT LANGUAGE plpgsql AS $$ BEGIN RETURN 1; END $$").unwrap();
        s.execute_blocking("DROP FUNCTION gone").unwrap();
    }
    let db = Database::open(durable_config(&dir.0, 1)).unwrap();
    let mut s = db.session();
    s.execute_blocking("CALL bump(1, 5)").unwrap();
    assert_eq!(int(&s.execute_blocking("SELECT balance_of(1)").unwrap().remove(0).rows()), 120);
    let err = s.execute_blocking("CALL bump(9, 1)").unwrap_err();
    assert_eq!(err.state.code(), "P0002");
    let err = s.execute_blocking("SELECT gone()").unwrap_err();
    assert_eq!(err.state, SqlState::UndefinedFunction);
    // A checkpoint holding procedures, then a restart from it alone.
    s.execute_blocking("CHECKPOINT").unwrap();
    drop(s);
    drop(db);
    let db = Database::open(durable_config(&dir.0, 1)).unwrap();
    let mut s = db.session();
    assert_eq!(int(&s.execute_blocking("SELECT balance_of(1)").unwrap().remove(0).rows()), 120);
    // Overloads: three routines of one name in a checkpoint, then one dropped by its
    // argument types in the log only; the other two come back, the dropped one does not.
    for (ty, value) in [("INT", "1"), ("TEXT", "2"), ("BIGINT", "3")] {
        s.execute_blocking(&format!("CREATE FUNCTION which(a {ty}) RETURNS INT LANGUAGE plpgsql AS $$ BEGIN RETURN {value}; END $$")).unwrap();
    }
    s.execute_blocking("CHECKPOINT").unwrap();
    s.execute_blocking("DROP FUNCTION which(text)").unwrap();
    drop(s);
    drop(db);
    let db = Database::open(durable_config(&dir.0, 1)).unwrap();
    let mut s = db.session();
    let which = |s: &mut freshet::Session, sql: &str| int(&s.execute_blocking(sql).unwrap().remove(0).rows());
    assert_eq!(which(&mut s, "SELECT which(1)"), 1);
    assert_eq!(which(&mut s, "SELECT which(1::bigint)"), 3);
    assert_eq!(which(&mut s, "SELECT count(*) FROM pg_proc WHERE proname = 'which'"), 2);
    let err = s.execute_blocking("SELECT which('x'::text)").unwrap_err();
    assert_eq!(err.state, SqlState::UndefinedFunction, "{err}");
}

/// The classification notice of CREATE (HyPer §4.3) with partitioned and replicated tables.
#[test]
fn procedures_are_classified_by_partition_key() {
    let db = Database::open(Config { olap_threads: 2, partitions: 3, ..Config::default() }).unwrap();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE stock (w_id INT NOT NULL, i_id INT NOT NULL, qty INT, PRIMARY KEY (w_id, i_id)) PARTITION BY HASH (w_id)").unwrap();
    s.execute_blocking("CREATE TABLE item (i_id INT PRIMARY KEY, price INT)").unwrap();
    s.execute_blocking("INSERT INTO item VALUES (1, 10), (2, 20)").unwrap();
    s.execute_blocking("INSERT INTO stock VALUES (1, 1, 5), (1, 2, 5), (2, 1, 5)").unwrap();
    let constrained = "CREATE PROCEDURE take(w INT, items INT[]) LANGUAGE plpgsql AS $$
        DECLARE i INT; p INT;
        BEGIN
          FOREACH i IN ARRAY items LOOP
            SELECT price INTO p FROM item WHERE i_id = i;
            UPDATE stock SET qty = qty - 1 WHERE w_id = w AND i_id = i;
          END LOOP;
        END $$";
    let result = s.execute_blocking(constrained).unwrap().remove(0);
    assert_eq!(result.notices, vec![freshet::Notice::from("procedure \"take\" is partition-constrained on parameter \"w\"")]);
    let crossing = "CREATE PROCEDURE restock(n INT) LANGUAGE plpgsql AS $$ BEGIN UPDATE stock SET qty = qty + n; END $$";
    let result = s.execute_blocking(crossing).unwrap().remove(0);
    assert!(result.notices[0].message.contains("partition-crossing"), "{:?}", result.notices);
    // A statement with a WITH clause runs on the analytical side, whatever its CTEs are named.
    let with_query = "CREATE PROCEDURE peek(w INT) LANGUAGE plpgsql AS $$ DECLARE q INT;
        BEGIN WITH s AS (SELECT qty FROM stock WHERE w_id = w) SELECT max(qty) INTO q FROM s; END $$";
    let result = s.execute_blocking(with_query).unwrap().remove(0);
    assert!(result.notices[0].message.ends_with("has a WITH clause (the query runs on the analytical side)"), "{:?}", result.notices);
    s.execute_blocking("CALL peek(1)").unwrap();
    s.execute_blocking("DROP PROCEDURE peek").unwrap();
    let listed = s.execute_blocking("SELECT name, kind, arguments, partitioning FROM freshet_procedures ORDER BY name").unwrap().remove(0).rows();
    let text = |v: &Value| v.as_str().unwrap_or("NULL").to_string();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0][0..3].iter().map(text).collect::<Vec<_>>(), vec!["restock", "procedure", "IN n integer"]);
    assert!(text(&listed[0][3]).starts_with("crossing: "), "{listed:?}");
    assert_eq!(listed[1].iter().map(text).collect::<Vec<_>>(), vec!["take", "procedure", "IN w integer, IN items integer[]", "constrained on w"]);
    s.execute_blocking("CALL take(1, ARRAY[1, 2])").unwrap();
    s.execute_blocking("CALL restock(10)").unwrap();
    let rows = s.execute_blocking("SELECT w_id, i_id, qty FROM stock ORDER BY w_id, i_id").unwrap().remove(0).rows();
    assert_eq!(rows.iter().map(|r| r[2].as_i64().unwrap()).collect::<Vec<_>>(), vec![14, 14, 15]);
}

/// On an engine with several partitions a call runs as one job on the partition its home
/// parameter names (the one that fixes the partition key of most of its statements, HyPer
/// §4.3); a call whose statements leave that partition — another warehouse's stock row, a
/// write of a replicated table — runs again the ordinary way, with the same effects.
#[test]
fn calls_run_as_one_job_on_the_partition_their_home_parameter_names() {
    let db = Database::open(Config { olap_threads: 2, partitions: 2, ..Config::default() }).unwrap();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE stock (w_id INT NOT NULL, i_id INT NOT NULL, qty INT, PRIMARY KEY (w_id, i_id)) PARTITION BY HASH (w_id)").unwrap();
    s.execute_blocking("CREATE TABLE line (w_id INT NOT NULL, n INT NOT NULL, i_id INT, supply INT, price INT, PRIMARY KEY (w_id, n)) PARTITION BY HASH (w_id)").unwrap();
    s.execute_blocking("CREATE TABLE log (w_id INT NOT NULL, what TEXT) PARTITION BY HASH (w_id)").unwrap();
    s.execute_blocking("CREATE TABLE item (i_id INT PRIMARY KEY, price INT, sold INT)").unwrap();
    s.execute_blocking("INSERT INTO item VALUES (1, 10, 0), (2, 20, 0)").unwrap();
    // Two warehouses on different partitions.
    let part = |w: i32| db.engine().partition_of_value(&Value::Int32(w));
    let here = 1;
    let there = (2..100).find(|&w| part(w) != part(here)).unwrap();
    s.execute_blocking(&format!("INSERT INTO stock VALUES ({here}, 1, 50), ({here}, 2, 50), ({there}, 1, 50), ({there}, 2, 50)")).unwrap();
    s.execute_blocking(
        "CREATE FUNCTION take(w INT, items INT[], supply INT[], n0 INT) RETURNS INT LANGUAGE plpgsql AS $$
        DECLARE k INT; p INT; q INT; total INT := 0;
        BEGIN
          FOR k IN 1..array_length(items, 1) LOOP
            SELECT price INTO p FROM item WHERE i_id = items[k];
            UPDATE stock SET qty = qty - 1 WHERE w_id = supply[k] AND i_id = items[k] RETURNING qty INTO q;
            IF NOT FOUND THEN RAISE EXCEPTION 'no stock'; END IF;
            INSERT INTO line VALUES (w, n0 + k, items[k], supply[k], p);
            total := total + p;
          END LOOP;
          INSERT INTO log VALUES (w, 'took');
          SELECT qty INTO q FROM stock WHERE w_id = w AND i_id = items[1];
          RETURN total;
        END $$",
    )
    .unwrap();
    s.execute_blocking("CREATE PROCEDURE sell(w INT, i INT) LANGUAGE plpgsql AS $$ BEGIN UPDATE stock SET qty = qty - 1 WHERE w_id = w AND i_id = i; UPDATE item SET sold = sold + 1 WHERE i_id = i; END $$").unwrap();
    let counts = |name: &str| {
        let rows = db.session().execute_blocking(&format!("SELECT calls, calls_in_one_job FROM freshet_procedures WHERE name = '{name}'")).unwrap().remove(0).rows();
        (rows[0][0].as_i64().unwrap(), rows[0][1].as_i64().unwrap())
    };
    let total = |rows: Vec<Vec<Value>>| rows[0][0].as_i64().unwrap();
    // Each stays on its partition and runs as one job, on either partition.
    for (n0, w) in [(0, here), (10, here), (20, there), (30, here)] {
        assert_eq!(total(s.execute_blocking(&format!("SELECT take({w}, ARRAY[1, 2], ARRAY[{w}, {w}], {n0})")).unwrap().remove(0).rows()), 30);
    }
    assert_eq!(counts("take"), (4, 4));
    // A remote supplier's stock row is on the other partition: the job gives up and the call
    // runs the ordinary way, with the same effects.
    assert_eq!(total(s.execute_blocking(&format!("SELECT take({here}, ARRAY[1, 2], ARRAY[{here}, {there}], 40)")).unwrap().remove(0).rows()), 30);
    assert_eq!(counts("take"), (5, 4));
    // A write of a replicated table reaches every partition.
    s.execute_blocking(&format!("CALL sell({here}, 1)")).unwrap();
    s.execute_blocking(&format!("CALL sell({there}, 1)")).unwrap();
    assert_eq!(counts("sell").1, 0);
    // An error inside a one-job call rolls all of it back.
    let err = s.execute_blocking(&format!("SELECT take({here}, ARRAY[1, 3], ARRAY[{here}, {here}], 50)")).unwrap_err();
    assert_eq!(err.message, "no stock");
    let stock = s.execute_blocking("SELECT w_id, i_id, qty FROM stock ORDER BY w_id, i_id").unwrap().remove(0).rows();
    let qty = |w: i32, i: i32| stock.iter().find(|r| r[0] == Value::Int32(w) && r[1] == Value::Int32(i)).unwrap()[2].as_i64().unwrap();
    assert_eq!((qty(here, 1), qty(here, 2), qty(there, 1), qty(there, 2)), (45, 47, 48, 48));
    let lines = s.execute_blocking("SELECT w_id, n, supply FROM line ORDER BY n").unwrap().remove(0).rows();
    let ns: Vec<i64> = lines.iter().map(|r| r[1].as_i64().unwrap()).collect();
    assert_eq!(ns, vec![1, 2, 11, 12, 21, 22, 31, 32, 41, 42]);
    assert!(lines.iter().all(|r| r[0] == Value::Int32(if r[1].as_i64().unwrap() / 10 == 2 { there } else { here })));
    assert_eq!(total(s.execute_blocking("SELECT count(*) FROM log").unwrap().remove(0).rows()), 5);
    // A function reading replicated tables only runs as one job on any partition.
    s.execute_blocking("CREATE FUNCTION price_of(i INT) RETURNS INT LANGUAGE plpgsql AS $$ DECLARE p INT; BEGIN SELECT price INTO p FROM item WHERE i_id = i; RETURN p; END $$").unwrap();
    assert_eq!(total(s.execute_blocking("SELECT price_of(2)").unwrap().remove(0).rows()), 20);
    assert_eq!(total(db.session().execute_blocking("SELECT price_of(1)").unwrap().remove(0).rows()), 10);
    assert_eq!(counts("price_of"), (2, 2));
    // A row for another partition is inserted there, the ordinary way.
    s.execute_blocking("CREATE PROCEDURE note(w INT, other INT) LANGUAGE plpgsql AS $$ BEGIN INSERT INTO log VALUES (w, 'mine'); INSERT INTO log VALUES (other, 'yours'); END $$").unwrap();
    s.execute_blocking(&format!("CALL note({here}, {here})")).unwrap();
    s.execute_blocking(&format!("CALL note({here}, {there})")).unwrap();
    assert_eq!(counts("note"), (2, 1));
    let mut yours = |w: i32| total(s.execute_blocking(&format!("SELECT count(*) FROM log WHERE w_id = {w} AND what = 'yours'")).unwrap().remove(0).rows());
    assert_eq!((yours(here), yours(there)), (1, 1));
    let rows = db.session().execute_blocking(&format!("SELECT what FROM log WHERE w_id = {there}")).unwrap().remove(0).rows();
    assert_eq!(rows, vec![vec![Value::Text("took".into())], vec![Value::Text("yours".into())]]);
    assert_eq!(total(s.execute_blocking("SELECT sold FROM item WHERE i_id = 1").unwrap().remove(0).rows()), 2);
}

/// A native procedure registered with its partition argument (HyPer §4.3) runs as one job on
/// the partition that argument names; one that reaches another partition's rows runs again
/// the ordinary way, with the same effects. Without the argument, calls on a partitioned
/// database run the ordinary way.
#[test]
fn native_calls_run_as_one_job_on_the_partition_their_home_argument_names() {
    let db = Database::open(Config { olap_threads: 2, partitions: 2, ..Config::default() }).unwrap();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE stock (w_id INT NOT NULL, i_id INT NOT NULL, qty INT, PRIMARY KEY (w_id, i_id)) PARTITION BY HASH (w_id)").unwrap();
    s.execute_blocking("CREATE TABLE log (w_id INT NOT NULL, i_id INT, supply INT) PARTITION BY HASH (w_id)").unwrap();
    let part = |w: i32| db.engine().partition_of_value(&Value::Int32(w));
    let here = 1;
    let there = (2..100).find(|&w| part(w) != part(here)).unwrap();
    s.execute_blocking(&format!("INSERT INTO stock VALUES ({here}, 1, 50), ({there}, 1, 50)")).unwrap();
    // take(w, i, supply): one stock row of the supplying warehouse less, logged at w.
    let body = |cx: &mut freshet::ProcedureContext<'_>, args: &[Value]| -> freshet::Result<Vec<Vec<Value>>> {
        let (stock, log) = (cx.table("stock")?, cx.table("log")?);
        let qty = stock.column("qty")?;
        let read = stock.key(vec![args[2].clone(), args[1].clone()], vec![qty])?;
        let changed = cx.modify_each(&stock, &read, &mut |r| Ok(vec![(qty, Value::Int32(r.int(0).unwrap_or(0) as i32 - 1))]))?;
        if changed == 0 {
            return Err(Error::new(SqlState::custom("P0002").unwrap(), "no stock"));
        }
        cx.insert(&log, vec![args[0].clone(), args[1].clone(), args[2].clone()])?;
        Ok(vec![])
    };
    let params = vec![DataType::Int32, DataType::Int32, DataType::Int32];
    db.register_partitioned_procedure("take", params.clone(), vec![], 0, body).unwrap();
    db.register_typed_procedure("take_anywhere", params.clone(), vec![], body);
    let err = db.register_partitioned_procedure("take_nowhere", params, vec![], 3, body).unwrap_err();
    assert_eq!(err.state, SqlState::InvalidParameterValue);
    for w in [here, there, here] {
        s.execute_blocking(&format!("CALL take({w}, 1, {w})")).unwrap();
    }
    assert_eq!(native_counts(&db, "take"), (3, 3));
    // Supplied by the other partition's warehouse: the job gives up, the call runs as SQL.
    s.execute_blocking(&format!("CALL take({here}, 1, {there})")).unwrap();
    assert_eq!(native_counts(&db, "take"), (4, 3));
    s.execute_blocking(&format!("CALL take_anywhere({there}, 1, {there})")).unwrap();
    assert_eq!(native_counts(&db, "take_anywhere"), (1, 0));
    let listed = s.execute_blocking("SELECT name, arguments, partitioning FROM freshet_procedures ORDER BY name").unwrap().remove(0).rows();
    let text = |v: &Value| v.as_str().unwrap_or("NULL").to_string();
    let listed: Vec<Vec<String>> = listed.iter().map(|r| r.iter().map(text).collect()).collect();
    assert_eq!(listed, vec![vec!["take", "integer, integer, integer", "on argument $1"], vec!["take_anywhere", "integer, integer, integer", "NULL"]]);
    // An error in a one-job call rolls it back.
    let err = s.execute_blocking(&format!("CALL take({here}, 2, {here})")).unwrap_err();
    assert_eq!(err.message, "no stock");
    let rows = s.execute_blocking("SELECT w_id, qty FROM stock ORDER BY w_id").unwrap().remove(0).rows();
    assert_eq!(rows, vec![vec![Value::Int32(here), Value::Int32(48)], vec![Value::Int32(there), Value::Int32(47)]]);
    let logged = s.execute_blocking(&format!("SELECT count(*) FROM log WHERE w_id = {here}")).unwrap().remove(0).rows();
    assert_eq!(int(&logged), 3);
    assert_eq!(int(&s.execute_blocking("SELECT count(*) FROM log").unwrap().remove(0).rows()), 5);
}

/// `CALL p($1, $2)` and `SELECT f($1)` prepared by a driver (extended protocol): parameter
/// types come from the routine's parameters.
#[test]
fn call_with_parameters_over_the_wire() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
        accounts(&db);
        let server = Server::bind(db, &ServerConfig { host: "127.0.0.1".into(), port: 0, unix_socket_dir: None }).await.unwrap();
        let port = server.local_addr().port();
        let (_stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        let conninfo = format!("host=127.0.0.1 port={port} user=tester dbname=testdb");
        let (client, connection) = tokio_postgres::connect(&conninfo, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client.batch_execute(BUMP).await.unwrap();
        client
            .batch_execute("CREATE FUNCTION balance_of(key INT) RETURNS INT LANGUAGE plpgsql AS $$ DECLARE b INT; BEGIN SELECT balance INTO b FROM account WHERE id = key; RETURN b; END $$")
            .await
            .unwrap();
        let call = client.prepare("CALL bump($1, $2)").await.unwrap();
        for _ in 0..3 {
            client.execute(&call, &[&2i32, &7i32]).await.unwrap();
        }
        let err = client.execute(&call, &[&99i32, &1i32]).await.unwrap_err();
        assert_eq!(err.code().unwrap().code(), "P0002");
        let row = client.query_one("SELECT balance_of($1)", &[&2i32]).await.unwrap();
        assert_eq!(row.get::<_, i32>(0), 21);
        let missing = client.query_one("SELECT balance_of($1)", &[&5i32]).await.unwrap();
        assert_eq!(missing.get::<_, Option<i32>>(0), None);

        // Parameters inside an argument count and take their types from the parameter's
        // (as pgbench's `f(ARRAY[:a, :a + 1])` becomes `f(ARRAY[$1, $2 + 1])`).
        client
            .batch_execute("CREATE FUNCTION sum_of(xs INT[], k INT) RETURNS INT LANGUAGE plpgsql AS $$ DECLARE s INT := 0; x INT; BEGIN FOREACH x IN ARRAY xs LOOP s := s + x; END LOOP; RETURN s * k; END $$")
            .await
            .unwrap();
        let nested = client.prepare("SELECT sum_of(ARRAY[$1, $2 + 1], $3 * 2)").await.unwrap();
        assert_eq!(nested.params(), &[tokio_postgres::types::Type::INT4; 3]);
        let row = client.query_one(&nested, &[&1i32, &2i32, &3i32]).await.unwrap();
        assert_eq!(row.get::<_, i32>(0), (1 + 3) * 6);

        // A set-returning function, prepared: its result columns describe the statement.
        client
            .batch_execute(
                "CREATE FUNCTION richer_than(floor INT) RETURNS TABLE (account_id INT, doubled BIGINT) LANGUAGE plpgsql AS $$ \
                 BEGIN RETURN QUERY SELECT id, balance * 2 FROM account WHERE balance > floor ORDER BY id; END $$",
            )
            .await
            .unwrap();
        let rich = client.prepare("SELECT * FROM richer_than($1)").await.unwrap();
        let described: Vec<(&str, &tokio_postgres::types::Type)> = rich.columns().iter().map(|c| (c.name(), c.type_())).collect();
        assert_eq!(described, [("account_id", &tokio_postgres::types::Type::INT4), ("doubled", &tokio_postgres::types::Type::INT8)]);
        let rows = client.query(&rich, &[&0i32]).await.unwrap();
        let got: Vec<(i32, i64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        assert_eq!(got, [(1, 200), (2, 42)]);
        assert!(client.query(&rich, &[&1000i32]).await.unwrap().is_empty());
        let renamed = client.prepare("SELECT * FROM richer_than(0) AS r(a, b)").await.unwrap();
        assert_eq!(renamed.columns().iter().map(|c| c.name()).collect::<Vec<_>>(), ["a", "b"]);
        let composite = client.query("SELECT richer_than(50)", &[]).await.unwrap();
        assert_eq!(composite.iter().map(|r| r.get::<_, String>(0)).collect::<Vec<_>>(), ["(1,200)"]);

        // Overloads, prepared: a `$n` of a declared type chooses by it; one of no declared
        // type is unknown (the text one, as in PostgreSQL) and is typed by the routine chosen.
        client
            .batch_execute(
                "CREATE FUNCTION which(a INT) RETURNS TEXT LANGUAGE plpgsql AS $$ BEGIN RETURN 'integer'; END $$; \
                 CREATE FUNCTION which(a TEXT) RETURNS TEXT LANGUAGE plpgsql AS $$ BEGIN RETURN 'text'; END $$; \
                 CREATE FUNCTION which(a NUMERIC) RETURNS TEXT LANGUAGE plpgsql AS $$ BEGIN RETURN 'numeric'; END $$",
            )
            .await
            .unwrap();
        use tokio_postgres::types::Type;
        let cases: [(Type, &(dyn tokio_postgres::types::ToSql + Sync), &str); 3] = [(Type::INT4, &1i32, "integer"), (Type::INT8, &1i64, "numeric"), (Type::TEXT, &"x", "text")];
        for (ty, value, expected) in cases {
            let stmt = client.prepare_typed("SELECT which($1)", std::slice::from_ref(&ty)).await.unwrap();
            assert_eq!(client.query_one(&stmt, &[value]).await.unwrap().get::<_, String>(0), expected, "{ty}");
        }
        let untyped = client.prepare("SELECT which($1)").await.unwrap();
        assert_eq!(untyped.params(), &[Type::TEXT]);
        let err = client.prepare_typed("SELECT which($1)", &[Type::INT2]).await.unwrap_err();
        assert_eq!(err.code().unwrap().code(), "42725", "{err}");
        // A prepared call keeps meaning its routine when another of the name is created.
        let by_int = client.prepare_typed("SELECT which($1)", &[Type::INT4]).await.unwrap();
        client.batch_execute("CREATE FUNCTION which(a BIGINT) RETURNS TEXT LANGUAGE plpgsql AS $$ BEGIN RETURN 'bigint'; END $$").await.unwrap();
        assert_eq!(client.query_one(&by_int, &[&3i32]).await.unwrap().get::<_, String>(0), "integer");
        client.batch_execute("DROP FUNCTION which(integer)").await.unwrap();
        let err = client.query_one(&by_int, &[&3i32]).await.unwrap_err();
        assert_eq!(err.code().unwrap().code(), "42883", "{err}");
    });
}

/// A routine that would hold its partition too long inside one job (here an endless-looking
/// loop of three million steps) gives the job up and finishes statement by statement, where
/// it holds only its own session; a short one runs as one job; one that runs no SQL needs
/// no job at all.
#[test]
fn a_long_running_routine_leaves_its_job() {
    let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
    let mut s = db.session();
    // It reads a table, so it is a job's to run (one that only computes is not: below).
    s.execute_blocking("CREATE TABLE start_at (k INT PRIMARY KEY, v INT); INSERT INTO start_at VALUES (1, 0)").unwrap();
    s.execute_blocking(
        "CREATE FUNCTION spin(n INT) RETURNS INT LANGUAGE plpgsql AS $$
         DECLARE i INT;
         BEGIN
           SELECT v INTO i FROM start_at WHERE k = 1;
           WHILE i < n LOOP i := i + 1; END LOOP;
           RETURN i;
         END $$",
    )
    .unwrap();
    let counts = |db: &Database, name: &str| {
        let sql = format!("SELECT calls, calls_in_one_job FROM freshet_procedures WHERE name = '{name}'");
        let rows = db.session().execute_blocking(&sql).unwrap().remove(0).rows();
        (int(&rows), rows[0][1].as_i64().unwrap())
    };
    assert_eq!(int(&s.execute_blocking("SELECT spin(10)").unwrap()[0].rows()), 10);
    assert_eq!(counts(&db, "spin"), (1, 1));
    assert_eq!(int(&s.execute_blocking("SELECT spin(3000000)").unwrap()[0].rows()), 3_000_000);
    assert_eq!(counts(&db, "spin"), (2, 1));
    // A function that runs no SQL needs no job: the session interprets it, also when it loops
    // long, and also inside a transaction block.
    s.execute_blocking(
        "CREATE FUNCTION count_to(n INT) RETURNS INT LANGUAGE plpgsql AS $$
         DECLARE i INT := 0;
         BEGIN
           WHILE i < n LOOP i := i + 1; END LOOP;
           RETURN i;
         END $$",
    )
    .unwrap();
    assert_eq!(int(&s.execute_blocking("SELECT count_to(10)").unwrap()[0].rows()), 10);
    assert_eq!(int(&s.execute_blocking("SELECT count_to(3000000)").unwrap()[0].rows()), 3_000_000);
    s.execute_blocking("BEGIN").unwrap();
    assert_eq!(int(&s.execute_blocking("SELECT count_to(7)").unwrap()[0].rows()), 7);
    s.execute_blocking("COMMIT").unwrap();
    assert_eq!(counts(&db, "count_to"), (3, 0));
}

#[test]
fn an_upsert_in_a_plpgsql_function_runs_inside_the_one_job_call() {
    let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE kv (k INT PRIMARY KEY, v INT)").unwrap();
    s.execute_blocking(
        "CREATE FUNCTION bump(p_k INT) RETURNS INT LANGUAGE plpgsql AS $$ DECLARE r INT; BEGIN \
         INSERT INTO kv VALUES (p_k, 1) ON CONFLICT (k) DO UPDATE SET v = kv.v + 1 RETURNING v INTO r; RETURN r; END $$",
    )
    .unwrap();
    let bump = |s: &mut freshet::Session, k: i32| s.execute_blocking(&format!("SELECT bump({k})")).unwrap().remove(0).rows()[0][0].clone();
    assert_eq!(bump(&mut s, 1), Value::Int32(1));
    assert_eq!(bump(&mut s, 1), Value::Int32(2));
    assert_eq!(bump(&mut s, 2), Value::Int32(1));
    assert_eq!(bump(&mut s, 1), Value::Int32(3));
    let rows = s.execute_blocking("SELECT k, v FROM kv ORDER BY k").unwrap().remove(0).rows();
    assert_eq!(rows, vec![vec![Value::Int32(1), Value::Int32(3)], vec![Value::Int32(2), Value::Int32(1)]]);
    let (calls, in_one_job) = native_counts(&db, "bump");
    assert_eq!(calls, 4);
    // The first call prepares the statement the ordinary way; the others run as one job.
    assert!(in_one_job >= 3, "{in_one_job} of {calls} calls ran as one job");
}

/// `x = ANY(ids)` over an array variable runs in a form planned for the array's length: a
/// call needing a form not yet planned runs the ordinary way and plans it, later calls whose
/// lengths round to it run as one job.
#[test]
fn a_comparison_with_an_array_runs_inside_the_one_job_call_once_its_form_is_planned() {
    let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
    let mut s = db.session();
    s.execute_blocking("CREATE TABLE stock (id INT PRIMARY KEY, qty INT)").unwrap();
    s.execute_blocking("INSERT INTO stock SELECT g, 10 FROM generate_series(1, 20) g").unwrap();
    s.execute_blocking(
        "CREATE FUNCTION take(ids INT[]) RETURNS INT LANGUAGE plpgsql AS $$ DECLARE n INT; BEGIN \
         UPDATE stock SET qty = qty - 1 WHERE id = ANY(ids); SELECT sum(qty) INTO n FROM stock WHERE id = ANY(ids); RETURN n; END $$",
    )
    .unwrap();
    let take = |s: &mut freshet::Session, ids: &str| s.execute_blocking(&format!("SELECT take('{{{ids}}}')")).unwrap().remove(0).rows()[0][0].clone();
    assert_eq!(take(&mut s, "1,2,3"), Value::Int32(27));
    assert_eq!(take(&mut s, "3,4,5,3"), Value::Int32(26), "3 taken once more, as the row is updated once");
    assert_eq!(take(&mut s, "6,7"), Value::Int32(18));
    assert_eq!(native_counts(&db, "take"), (3, 1), "lengths 3 and 4 share a form; 2 needs its own");
    assert_eq!(take(&mut s, "8,9"), Value::Int32(18));
    assert_eq!(take(&mut s, "1,2,3,4,5,6,7,8,9"), Value::Int32(71));
    assert_eq!(native_counts(&db, "take"), (5, 2));
    let rows = s.execute_blocking("SELECT sum(qty) FROM stock").unwrap().remove(0).rows();
    assert_eq!(rows, vec![vec![Value::Int64(200 - 3 - 3 - 2 - 2 - 9)]]);
}

/// A database with a table `name (k INT PRIMARY KEY)` holding the row k = 1, for routines
/// that fail on a duplicate key.
fn database_with_key_one(name: &str) -> Database {
    let db = Database::open(Config { olap_threads: 1, ..Config::default() }).unwrap();
    let mut s = db.session();
    s.execute_blocking(&format!("CREATE TABLE {name} (k INT PRIMARY KEY)")).unwrap();
    s.execute_blocking(&format!("INSERT INTO {name} VALUES (1)")).unwrap();
    db
}

/// Notices raised before an error reach the client before it (PostgreSQL sends each as it is
/// raised), whether the call ran statement by statement (in a block) or as one job; a
/// handler's `RAISE;` raises the caught error again with its detail.
#[test]
fn notices_before_an_error_are_kept_for_the_client() {
    use freshet::Notice;
    let db = database_with_key_one("u");
    let mut s = db.session();
    s.execute_blocking(
        "CREATE FUNCTION again(k INT) RETURNS INT LANGUAGE plpgsql AS $$
         BEGIN
           RAISE NOTICE 'inserting %', k;
           BEGIN
             INSERT INTO u VALUES (k);
           EXCEPTION WHEN unique_violation THEN
             RAISE WARNING 'caught %', SQLSTATE;
             RAISE;
           END;
           RETURN k;
         END $$",
    )
    .unwrap();
    for block in [false, true, false] {
        if block {
            s.execute_blocking("BEGIN").unwrap();
        }
        let err = s.execute_blocking("SELECT again(1)").unwrap_err();
        assert_eq!((err.state.code(), err.detail.as_deref()), ("23505", Some("Key (k)=(1) already exists.")), "{err:?}");
        assert_eq!(s.take_failed_notices(), vec![Notice::from("inserting 1"), Notice::warning("caught 23505")], "in a block: {block}");
        assert!(s.take_failed_notices().is_empty(), "taken once");
        if block {
            s.execute_blocking("ROLLBACK").unwrap();
        }
    }
    assert_eq!(s.execute_blocking("SELECT again(2)").unwrap().remove(0).notices, vec![Notice::from("inserting 2")]);
}

/// An error leaving a routine says where it came from, innermost first, as PostgreSQL's
/// CONTEXT does: the SQL statement that failed, then the function and line of each routine it
/// passed through. `RAISE;` keeps the context of the error it raises again, which GET STACKED
/// DIAGNOSTICS … = PG_EXCEPTION_CONTEXT reads too.
#[test]
fn errors_carry_the_context_of_the_routines_they_leave() {
    let db = database_with_key_one("c");
    let mut s = db.session();
    s.execute_blocking(
        "CREATE FUNCTION inner_f(x INT) RETURNS INT LANGUAGE plpgsql AS $$
BEGIN
  IF x > 5 THEN
    RAISE EXCEPTION 'too big: %', x;
  END IF;
  INSERT INTO c VALUES (x);
  RETURN x;
END $$",
    )
    .unwrap();
    s.execute_blocking(
        "CREATE FUNCTION outer_f(x INT, y TEXT) RETURNS TEXT LANGUAGE plpgsql AS $$
DECLARE n INT; ctx TEXT;
BEGIN
  IF y = 'catch' THEN
    BEGIN
      n := inner_f(x);
    EXCEPTION WHEN OTHERS THEN
      GET STACKED DIAGNOSTICS ctx = PG_EXCEPTION_CONTEXT;
      IF x = 1 THEN RAISE; END IF;
      RETURN ctx;
    END;
  END IF;
  n := inner_f(x);
  RETURN n::text;
END $$",
    )
    .unwrap();
    let context = |sql: &str, s: &mut freshet::Session| s.execute_blocking(sql).unwrap_err().into_fields().context.unwrap_or_default();
    assert_eq!(context("SELECT inner_f(9)", &mut s), "PL/pgSQL function inner_f(integer) line 4 at RAISE");
    assert_eq!(
        context("SELECT inner_f(1)", &mut s),
        "SQL statement \"INSERT INTO c VALUES (x)\"\nPL/pgSQL function inner_f(integer) line 6 at SQL statement"
    );
    assert_eq!(
        context("SELECT outer_f(9, 'no')", &mut s),
        "PL/pgSQL function inner_f(integer) line 4 at RAISE\nPL/pgSQL function outer_f(integer,text) line 13 at assignment"
    );
    let caught = s.execute_blocking("SELECT outer_f(9, 'catch')").unwrap().remove(0);
    assert_eq!(
        caught.rows(),
        vec![vec![Value::Text("PL/pgSQL function inner_f(integer) line 4 at RAISE\nPL/pgSQL function outer_f(integer,text) line 6 at assignment".into())]]
    );
    assert_eq!(
        context("SELECT outer_f(1, 'catch')", &mut s),
        "SQL statement \"INSERT INTO c VALUES (x)\"\nPL/pgSQL function inner_f(integer) line 6 at SQL statement\nPL/pgSQL function outer_f(integer,text) line 6 at assignment",
        "RAISE; keeps the caught error's context"
    );
}

#[test]
fn raise_levels_reach_the_client_with_their_severity() {
    use freshet::{Notice, NoticeSeverity};
    let db = Database::open(Config { olap_threads: 1, ..Config::default() }).unwrap();
    let mut s = db.session();
    s.execute_blocking(
        "CREATE FUNCTION levels(n INT) RETURNS INT LANGUAGE plpgsql AS $$
         BEGIN
           RAISE WARNING 'w %', n;
           RAISE NOTICE 'n %', n;
           RAISE INFO 'i %', n;
           RAISE LOG 'l %', n;
           RAISE DEBUG 'd %', n;
           RETURN n;
         END $$",
    )
    .unwrap();
    // Twice: the first call runs statement by statement, the second as one executor job.
    for _ in 0..2 {
        let notices = s.execute_blocking("SELECT levels(7)").unwrap().remove(0).notices;
        assert_eq!(notices, vec![Notice::warning("w 7"), Notice::from("n 7"), Notice::info("i 7")], "LOG and DEBUG stay below client_min_messages");
    }
    let unlock = s.execute_blocking("SELECT pg_advisory_unlock(5)").unwrap().remove(0);
    assert_eq!(unlock.notices.iter().map(|n| n.severity).collect::<Vec<_>>(), vec![NoticeSeverity::Warning]);
}

/// A prepared UPDATE, DELETE or INSERT that calls stored functions is planned again after
/// DDL changes its table or a view it reads.
#[test]
fn prepared_statements_calling_functions_are_planned_again_after_ddl() {
    let db = Database::open(Config::default()).unwrap();
    accounts(&db);
    let mut s = db.session();
    s.execute_blocking("CREATE FUNCTION doubled(b INT) RETURNS INT LANGUAGE sql AS 'SELECT b * 2'").unwrap();
    s.execute_blocking("PREPARE per_row(int) AS UPDATE account SET balance = doubled(balance) WHERE id = $1").unwrap();
    s.execute_blocking("PREPARE first(int) AS INSERT INTO account (id, balance) VALUES ($1, doubled(21))").unwrap();
    s.execute_blocking("EXECUTE per_row(1)").unwrap();
    // A column before the ones the statements name moves them; a new column follows them.
    s.execute_blocking("ALTER TABLE account DROP COLUMN balance").unwrap();
    s.execute_blocking("ALTER TABLE account ADD COLUMN note TEXT").unwrap();
    s.execute_blocking("ALTER TABLE account ADD COLUMN balance INT").unwrap();
    s.execute_blocking("UPDATE account SET balance = 7").unwrap();
    s.execute_blocking("EXECUTE per_row(1)").unwrap();
    s.execute_blocking("EXECUTE first(3)").unwrap();
    let rows = s.execute_blocking("SELECT id, note, balance FROM account ORDER BY id").unwrap().remove(0).rows();
    assert_eq!(
        rows,
        vec![
            vec![Value::Int32(1), Value::Null, Value::Int32(14)],
            vec![Value::Int32(2), Value::Null, Value::Int32(7)],
            vec![Value::Int32(3), Value::Null, Value::Int32(42)],
        ]
    );
    // A view its subquery reads, replaced: the statement reads the new definition.
    s.execute_blocking("CREATE VIEW top AS SELECT max(id) AS id FROM account").unwrap();
    s.execute_blocking("PREPARE after_top(int) AS INSERT INTO account (id, balance) VALUES ((SELECT id FROM top) + $1, doubled($1))").unwrap();
    s.execute_blocking("EXECUTE after_top(1)").unwrap();
    s.execute_blocking("CREATE OR REPLACE VIEW top AS SELECT max(id) + 100 AS id FROM account").unwrap();
    s.execute_blocking("EXECUTE after_top(1)").unwrap();
    let ids = s.execute_blocking("SELECT id, balance FROM account WHERE id > 3 ORDER BY id").unwrap().remove(0).rows();
    assert_eq!(ids, vec![vec![Value::Int32(4), Value::Int32(2)], vec![Value::Int32(105), Value::Int32(2)]]);
    // So does a prepared query (PREPARE keeps the statement as written, views unexpanded).
    s.execute_blocking("PREPARE read_top AS SELECT id FROM top").unwrap();
    assert_eq!(int(&s.execute_blocking("EXECUTE read_top").unwrap().remove(0).rows()), 205);
    s.execute_blocking("CREATE OR REPLACE VIEW top AS SELECT max(id) + 1000 AS id FROM account").unwrap();
    assert_eq!(int(&s.execute_blocking("EXECUTE read_top").unwrap().remove(0).rows()), 1105);
}
