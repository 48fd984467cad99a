//! Stored procedures beyond the SQL corpus (`slt/procedures.slt`): native Rust procedures,
//! procedures surviving restarts (from the log and from checkpoints), CALL and SELECT f(…)
//! with parameters over the extended protocol, and partition classification.

use freshet::{ColumnInfo, Config, DataType, Database, Error, SqlState, Value};
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
/// and runs again statement by statement, waiting its turn.
#[test]
fn a_native_call_blocked_by_a_lock_gives_up_its_job_and_waits() {
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
    // The blocked call gave its job up and ran statement by statement.
    assert_eq!(native_counts(&db, "transfer"), (3, 1));
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
    let err = s.call_blocking("nothing_here", vec![]).unwrap_err();
    assert_eq!(err.state, SqlState::UndefinedFunction);
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
    assert_eq!(result.notices, vec!["procedure \"take\" is partition-constrained on parameter \"w\"".to_string()]);
    let crossing = "CREATE PROCEDURE restock(n INT) LANGUAGE plpgsql AS $$ BEGIN UPDATE stock SET qty = qty + n; END $$";
    let result = s.execute_blocking(crossing).unwrap().remove(0);
    assert!(result.notices[0].contains("partition-crossing"), "{:?}", result.notices);
    let listed = s.execute_blocking("SELECT name, kind, arguments, partitioning FROM freshet_procedures ORDER BY name").unwrap().remove(0).rows();
    let text = |v: &Value| v.as_str().unwrap_or("NULL").to_string();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0][0..3].iter().map(text).collect::<Vec<_>>(), vec!["restock", "procedure", "n integer"]);
    assert!(text(&listed[0][3]).starts_with("crossing: "), "{listed:?}");
    assert_eq!(listed[1].iter().map(text).collect::<Vec<_>>(), vec!["take", "procedure", "w integer, items integer[]", "constrained on w"]);
    s.execute_blocking("CALL take(1, ARRAY[1, 2])").unwrap();
    s.execute_blocking("CALL restock(10)").unwrap();
    let rows = s.execute_blocking("SELECT w_id, i_id, qty FROM stock ORDER BY w_id, i_id").unwrap().remove(0).rows();
    assert_eq!(rows.iter().map(|r| r[2].as_i64().unwrap()).collect::<Vec<_>>(), vec![14, 14, 15]);
}

/// `CALL p($1, $2)` and `SELECT f($1)` prepared by a driver (extended protocol): parameter
/// types come from the routine's parameters.
#[test]
fn call_with_parameters_over_the_wire() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
        accounts(&db);
        let server = Server::bind(db, &ServerConfig { host: "127.0.0.1".into(), port: 0 }).await.unwrap();
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
    });
}

/// A routine that would hold its partition too long inside one job (here an endless-looking
/// loop of three million steps) gives the job up and finishes statement by statement, where
/// it holds only its own session; a short one runs as one job.
#[test]
fn a_long_running_routine_leaves_its_job() {
    let db = Database::open(Config { olap_threads: 2, ..Config::default() }).unwrap();
    let mut s = db.session();
    s.execute_blocking(
        "CREATE FUNCTION spin(n INT) RETURNS INT LANGUAGE plpgsql AS $$
         DECLARE i INT := 0;
         BEGIN
           WHILE i < n LOOP i := i + 1; END LOOP;
           RETURN i;
         END $$",
    )
    .unwrap();
    let counts = |db: &Database| {
        let rows = db.session().execute_blocking("SELECT calls, calls_in_one_job FROM freshet_procedures WHERE name = 'spin'").unwrap().remove(0).rows();
        (int(&rows), rows[0][1].as_i64().unwrap())
    };
    assert_eq!(int(&s.execute_blocking("SELECT spin(10)").unwrap()[0].rows()), 10);
    assert_eq!(counts(&db), (1, 1));
    assert_eq!(int(&s.execute_blocking("SELECT spin(3000000)").unwrap()[0].rows()), 3_000_000);
    assert_eq!(counts(&db), (2, 1));
}
