//! `pg_catalog`: the system catalogs and functions PostgreSQL clients read to describe a
//! database (psql's `\dt`, `\d`, `\di`, `\dn`, `\l`; drivers' metadata calls).
//!
//! Each relation is computed from the current catalog version when a query scans it (like
//! `freshet_snapshots`), so it is always consistent with the tables a query can see. They are
//! reachable as `pg_catalog.x` and, where no user table has the name, as plain `x`.
//!
//! What they contain:
//! - One database (`freshet`), one role (`freshet`, OID 10, the default session user), the
//!   schemas `pg_catalog` (OID 11) and `public` (OID 2200).
//! - A `pg_class` row per user table (`relkind` 'r') and per index ('i'); a table's OID is
//!   `16384 + 256 × its id`, and its indexes' follow it in order (the primary key first).
//! - Columns of tables and index keys in `pg_attribute`, column defaults in `pg_attrdef`, the
//!   types Freshet stores in `pg_type`, indexes in `pg_index`, a `pg_constraint` row per
//!   primary key, and stored procedures and functions in `pg_proc` (OID `10⁹ + id`).
//! - The relations for features Freshet does not have (inheritance, triggers, row security,
//!   extended statistics, publications, comments) exist and are empty, so clients' queries
//!   that join them run and find nothing.
//!
//! A primary key of one column is a hash index (`pg_am` 'hash'); every other index, and a
//! primary key of several columns (which also keeps its entries in key order), is 'btree'.
//!
//! `pg_stat_user_tables`, `pg_stat_user_indexes` and `pg_stat_database` are computed when
//! scanned from the tables' counters on their partitions and the sessions' [`Activity`], never
//! cached; `pg_stat_bgwriter` counts the checkpoints of the data directory. The relations of
//! what Freshet does not have report nothing done: `pg_statio_user_tables` and
//! `pg_statio_user_indexes` no blocks read or found in a buffer cache (the tables are in
//! memory, there is no block I/O), `pg_stat_archiver` no log archived, and
//! `pg_stat_database_conflicts` no recovery conflicts (there are no standbys). Monitoring tools
//! read them all.
//!
//! Views are `pg_class` rows with `relkind` 'v' (OIDs from the table id space), their columns
//! are in `pg_attribute`, their queries in `pg_views` and `pg_get_viewdef`. A transaction
//! block's own uncommitted views are not listed.
//!
//! `pg_tables` and `pg_indexes` list the user's tables and indexes only (PostgreSQL's also list
//! its own catalog tables under `pg_catalog`); an index's definition is `pg_get_indexdef`'s.

use std::sync::Arc;

use freshet_core::catalog::{Catalog, ColumnDefault, TableDef, ViewDef};
use freshet_core::engine::Engine;
use freshet_core::types::DataType;
use freshet_olap::datafusion;
use freshet_olap::datafusion::arrow::datatypes::{DataType as ArrowType, Field, Schema, SchemaRef};
use freshet_olap::datafusion::arrow::record_batch::RecordBatch;
use freshet_olap::datafusion::common::ScalarValue;
use freshet_olap::datafusion::error::{DataFusionError, Result as DfResult};
use freshet_olap::datafusion::logical_expr::{ColumnarValue, ScalarUDF, Signature, SimpleScalarUDF, TypeSignature, Volatility};
use freshet_olap::provider::SystemTable;
use freshet_olap::OlapEngine;

/// The one role: the default session user.
const ROLE_OID: i64 = 10;
const ROLE: &str = "freshet";
const DATABASE: &str = "freshet";
const DATABASE_OID: i64 = 16383;
const PG_CATALOG_OID: i64 = 11;
const PUBLIC_OID: i64 = 2200;
const PLPGSQL_EXTENSION_OID: i64 = 13_576;
const PLPGSQL_LANGUAGE_OID: i64 = 13_575;
/// pg_language's OID of LANGUAGE sql, as in PostgreSQL.
const SQL_LANGUAGE_OID: i64 = 14;
const DEFAULT_COLLATION_OID: i64 = 100;
const HEAP_AM: i64 = 2;
const BTREE_AM: i64 = 403;
const HASH_AM: i64 = 405;
const PROCEDURE_OID_BASE: i64 = 1_000_000_000;
const VOID_OID: i64 = 2278;
const RECORD_OID: i64 = 2249;
/// The OID of UTF8 in `pg_database.encoding`.
const UTF8_ENCODING: i32 = 6;

/// The OID of a user table.
pub fn table_oid(table: &TableDef) -> i64 {
    16384 + 256 * table.id as i64
}

/// The OID of a view (views take their ids from the tables' id space).
fn view_oid(view: &ViewDef) -> i64 {
    16384 + 256 * view.id as i64
}

/// `pg_get_viewdef(oid)`: the view's query as PostgreSQL prints it.
fn view_definition(catalog: &Catalog, oid: i64) -> Option<String> {
    catalog.views().find(|v| view_oid(v) == oid).map(|v| format!(" {};", v.query))
}

/// The OID of a stored procedure or function.
fn procedure_oid(id: u64) -> i64 {
    PROCEDURE_OID_BASE + id as i64
}

/// The procedure an OID names.
fn procedure_of(catalog: &Catalog, oid: i64) -> Option<&Arc<freshet_core::catalog::ProcedureDef>> {
    catalog.procedures().find(|p| procedure_oid(p.id) == oid)
}

/// The OID of a table's index at `position`.
fn index_oid(table: &TableDef, position: usize) -> i64 {
    table_oid(table) + 1 + position as i64
}

/// The table with OID `oid`.
fn table_of(catalog: &Catalog, oid: i64) -> Option<&Arc<TableDef>> {
    catalog.tables().find(|t| table_oid(t) == oid)
}

/// pg_class's own OID: the `classoid` of a relation's comment.
const PG_CLASS_OID: i64 = 1259;

/// The OID of a table's CHECK constraint at `position` (after its indexes' OIDs).
fn check_oid(table: &TableDef, position: usize) -> i64 {
    table_oid(table) + CHECK_OID_OFFSET + position as i64
}

/// Where a table's CHECK constraints' OIDs start in its block of 256.
const CHECK_OID_OFFSET: i64 = 192;

/// The table and CHECK constraint position of a constraint OID.
fn check_of(catalog: &Catalog, oid: i64) -> Option<(&Arc<TableDef>, usize)> {
    catalog.tables().find_map(|t| {
        let position = oid.checked_sub(table_oid(t) + CHECK_OID_OFFSET)?;
        (0..t.checks.len() as i64).contains(&position).then_some((t, position as usize))
    })
}

/// The table and index position of an index OID.
fn index_of(catalog: &Catalog, oid: i64) -> Option<(&Arc<TableDef>, usize)> {
    catalog.tables().find_map(|t| {
        let position = oid.checked_sub(table_oid(t) + 1)?;
        (0..t.indexes.len() as i64).contains(&position).then_some((t, position as usize))
    })
}

/// Registers the catalog relations and functions with the analytical engine.
pub(crate) fn register(
    olap: &mut OlapEngine,
    engine: &Arc<Engine>,
    activity: &Arc<Activity>,
    advisory: &Arc<crate::advisory::AdvisoryLocks>,
    data: Option<&Arc<crate::durability::DataDir>>,
) {
    olap.register_catalog_table("pg_locks", Arc::new(LocksRelation(advisory.clone())));
    for &(name, _) in RELATIONS {
        olap.register_catalog_table(name, Arc::new(CatalogRelation { name, engine: engine.clone(), last: Default::default() }));
    }
    for &(name, _) in STATISTICS {
        let relation = StatisticsRelation { name, engine: engine.clone(), activity: activity.clone(), data: data.cloned() };
        olap.register_catalog_table(name, Arc::new(relation));
    }
    for f in functions(engine) {
        olap.register_function(f);
    }
}

use ArrowType::{Boolean as B, Float32 as F4, Int16 as I2, Int32 as I4, Int64 as I8, Utf8 as T};
/// Stand-ins in [`RELATIONS`] for array columns (a `const` cannot hold a list type): `text[]`
/// and `oid[]`. [`column_type`] turns them into lists.
use ArrowType::{LargeUtf8 as TA, UInt16 as I2A, UInt64 as OA};
/// Stand-in for `timestamptz` columns (always NULL here), which [`column_type`] turns into
/// the type the analytical side gives timestamptz.
use ArrowType::UInt32 as TSZ;
use ArrowType::Float64 as F8;

fn column_type(t: &ArrowType) -> ArrowType {
    match t {
        TA => ArrowType::new_list(T, true),
        OA => ArrowType::new_list(I8, true),
        I2A => ArrowType::new_list(I2, true),
        TSZ => ArrowType::Timestamp(datafusion::arrow::datatypes::TimeUnit::Microsecond, Some(freshet_olap::types::UTC.into())),
        other => other.clone(),
    }
}

/// The PostgreSQL type of a catalog column.
fn catalog_column_type(t: &ArrowType) -> AttType {
    let (oid, len) = match t {
        I8 => (20, 8),
        I4 => (23, 4),
        I2 => (21, 2),
        B => (16, 1),
        F4 => (700, 4),
        F8 => (701, 8),
        TSZ => (1184, 8),
        TA => (1009, -1),
        OA => (1016, -1),
        I2A => (1005, -1),
        _ => (25, -1),
    };
    let collation = if oid == 25 { DEFAULT_COLLATION_OID } else { 0 };
    AttType { oid, len, typmod: -1, collation }
}

/// The OID of a catalog relation: PostgreSQL's for the ones clients name, others after them.
fn catalog_relation_oid(name: &str) -> Option<i64> {
    WELL_KNOWN_RELATIONS.iter().find(|(n, _)| *n == name).map(|(_, oid)| *oid).or_else(|| {
        RELATIONS.iter().position(|(n, _)| *n == name).map(|p| CATALOG_RELATION_OIDS + p as i64)
    })
}

/// The name of the catalog relation with OID `oid` (the inverse of [`catalog_relation_oid`]).
fn catalog_relation_name(oid: i64) -> Option<&'static str> {
    WELL_KNOWN_RELATIONS.iter().find(|(_, o)| *o == oid).map(|(n, _)| *n).or_else(|| {
        let position = usize::try_from(oid.checked_sub(CATALOG_RELATION_OIDS)?).ok()?;
        RELATIONS.get(position).map(|(n, _)| *n)
    })
}

/// Catalog relations whose OIDs clients know by number (PostgreSQL's).
const WELL_KNOWN_RELATIONS: &[(&str, i64)] = &[
    ("pg_type", 1247), ("pg_attribute", 1249), ("pg_proc", 1255), ("pg_class", 1259), ("pg_database", 1262),
    ("pg_am", 2601), ("pg_attrdef", 2604), ("pg_constraint", 2606), ("pg_inherits", 2611), ("pg_index", 2610),
    ("pg_description", 2609), ("pg_namespace", 2615), ("pg_trigger", 2620), ("pg_tablespace", 1213),
    ("pg_collation", 3456), ("pg_policy", 3256), ("pg_statistic_ext", 3381), ("pg_publication", 6104),
    ("pg_publication_rel", 6106), ("pg_publication_namespace", 6237), ("pg_extension", 3079), ("pg_auth_members", 1261), ("pg_language", 2612),
];

/// The other catalog relations take OIDs from here up, in [`RELATIONS`] order.
const CATALOG_RELATION_OIDS: i64 = 12000;

/// Every relation with its columns (a subset of PostgreSQL's, in its order). OIDs are int8.
const RELATIONS: &[(&str, &[(&str, ArrowType)])] = &[
    ("pg_namespace", &[("oid", I8), ("nspname", T), ("nspowner", I8), ("nspacl", TA)]),
    (
        "pg_class",
        &[
            ("oid", I8), ("relname", T), ("relnamespace", I8), ("reltype", I8), ("reloftype", I8), ("relowner", I8),
            ("relam", I8), ("relfilenode", I8), ("reltablespace", I8), ("relpages", I4), ("reltuples", F4),
            ("relallvisible", I4), ("reltoastrelid", I8), ("relhasindex", B), ("relisshared", B),
            ("relpersistence", T), ("relkind", T), ("relnatts", I2), ("relchecks", I2), ("relhasrules", B),
            ("relhastriggers", B), ("relhassubclass", B), ("relrowsecurity", B), ("relforcerowsecurity", B),
            ("relispopulated", B), ("relreplident", T), ("relispartition", B), ("relrewrite", I8), ("relacl", TA),
            ("reloptions", TA), ("relpartbound", T),
        ],
    ),
    (
        "pg_attribute",
        &[
            ("attrelid", I8), ("attname", T), ("atttypid", I8), ("attstattarget", I4), ("attlen", I2), ("attnum", I2),
            ("attndims", I4), ("attcacheoff", I4), ("atttypmod", I4), ("attbyval", B), ("attalign", T),
            ("attstorage", T), ("attcompression", T), ("attnotnull", B), ("atthasdef", B), ("atthasmissing", B),
            ("attidentity", T), ("attgenerated", T), ("attisdropped", B), ("attislocal", B), ("attinhcount", I4),
            ("attcollation", I8), ("attacl", TA), ("attoptions", TA), ("attfdwoptions", TA),
        ],
    ),
    ("pg_attrdef", &[("oid", I8), ("adrelid", I8), ("adnum", I2), ("adbin", T)]),
    (
        "pg_type",
        &[
            ("oid", I8), ("typname", T), ("typnamespace", I8), ("typowner", I8), ("typlen", I2), ("typbyval", B),
            ("typtype", T), ("typcategory", T), ("typispreferred", B), ("typisdefined", B), ("typdelim", T),
            ("typrelid", I8), ("typelem", I8), ("typarray", I8), ("typnotnull", B), ("typbasetype", I8),
            ("typtypmod", I4), ("typndims", I4), ("typcollation", I8), ("typdefault", T),
        ],
    ),
    (
        "pg_index",
        &[
            ("indexrelid", I8), ("indrelid", I8), ("indnatts", I2), ("indnkeyatts", I2), ("indisunique", B),
            ("indnullsnotdistinct", B), ("indisprimary", B), ("indisexclusion", B), ("indimmediate", B),
            ("indisclustered", B), ("indisvalid", B), ("indcheckxmin", B), ("indisready", B), ("indislive", B),
            ("indisreplident", B), ("indkey", I2A), ("indoption", I2A), ("indexprs", T), ("indpred", T),
        ],
    ),
    (
        "pg_constraint",
        &[
            ("oid", I8), ("conname", T), ("connamespace", I8), ("contype", T), ("condeferrable", B),
            ("condeferred", B), ("convalidated", B), ("conrelid", I8), ("contypid", I8), ("conindid", I8),
            ("conparentid", I8), ("confrelid", I8), ("confupdtype", T), ("confdeltype", T), ("confmatchtype", T),
            ("conislocal", B), ("coninhcount", I4), ("connoinherit", B), ("conkey", I2A), ("confkey", I2A), ("conbin", T),
        ],
    ),
    ("pg_am", &[("oid", I8), ("amname", T), ("amhandler", T), ("amtype", T)]),
    (
        "pg_collation",
        &[("oid", I8), ("collname", T), ("collnamespace", I8), ("collowner", I8), ("collprovider", T), ("collencoding", I4), ("collcollate", T), ("collctype", T)],
    ),
    (
        "pg_database",
        &[
            ("oid", I8), ("datname", T), ("datdba", I8), ("encoding", I4), ("datlocprovider", T), ("datistemplate", B),
            ("datallowconn", B), ("datconnlimit", I4), ("dattablespace", I8), ("datcollate", T), ("datctype", T),
            ("daticulocale", T), ("datacl", TA),
        ],
    ),
    (
        "pg_roles",
        &[
            ("oid", I8), ("rolname", T), ("rolsuper", B), ("rolinherit", B), ("rolcreaterole", B), ("rolcreatedb", B),
            ("rolcanlogin", B), ("rolreplication", B), ("rolconnlimit", I4), ("rolpassword", T), ("rolvaliduntil", T),
            ("rolbypassrls", B), ("rolconfig", TA),
        ],
    ),
    ("pg_auth_members", &[("oid", I8), ("roleid", I8), ("member", I8), ("grantor", I8), ("admin_option", B)]),
    ("pg_language", &[("oid", I8), ("lanname", T), ("lanowner", I8), ("lanispl", B), ("lanpltrusted", B), ("lanacl", TA)]),
    (
        "pg_extension",
        &[("oid", I8), ("extname", T), ("extowner", I8), ("extnamespace", I8), ("extrelocatable", B), ("extversion", T), ("extconfig", OA), ("extcondition", TA)],
    ),
    (
        "pg_user",
        &[("usename", T), ("usesysid", I8), ("usecreatedb", B), ("usesuper", B), ("userepl", B), ("usebypassrls", B), ("passwd", T), ("useconfig", TA)],
    ),
    (
        "pg_proc",
        &[
            ("oid", I8), ("proname", T), ("pronamespace", I8), ("proowner", I8), ("prolang", I8), ("procost", F4),
            ("prorows", F4), ("provariadic", I8), ("prokind", T), ("prosecdef", B), ("proleakproof", B),
            ("proisstrict", B), ("proretset", B), ("provolatile", T), ("proparallel", T), ("pronargs", I2),
            ("pronargdefaults", I2), ("prorettype", I8), ("proargtypes", T), ("proargnames", TA), ("prosrc", T),
            ("proacl", TA),
        ],
    ),
    ("pg_tablespace", &[("oid", I8), ("spcname", T), ("spcowner", I8), ("spcacl", TA), ("spcoptions", TA)]),
    (
        "pg_settings",
        &[("name", T), ("setting", T), ("unit", T), ("category", T), ("short_desc", T), ("context", T), ("vartype", T), ("source", T), ("boot_val", T), ("reset_val", T)],
    ),
    ("pg_description", &[("objoid", I8), ("classoid", I8), ("objsubid", I4), ("description", T)]),
    ("pg_inherits", &[("inhrelid", I8), ("inhparent", I8), ("inhseqno", I4), ("inhdetachpending", B)]),
    (
        "pg_trigger",
        &[("oid", I8), ("tgrelid", I8), ("tgparentid", I8), ("tgname", T), ("tgfoid", I8), ("tgtype", I2), ("tgenabled", T), ("tgisinternal", B), ("tgconstraint", I8)],
    ),
    (
        "pg_policy",
        &[("oid", I8), ("polname", T), ("polrelid", I8), ("polcmd", T), ("polpermissive", B), ("polroles", OA), ("polqual", T), ("polwithcheck", T)],
    ),
    (
        "pg_statistic_ext",
        &[("oid", I8), ("stxrelid", I8), ("stxname", T), ("stxnamespace", I8), ("stxowner", I8), ("stxstattarget", I4), ("stxkeys", T), ("stxkind", TA)],
    ),
    ("pg_publication", &[("oid", I8), ("pubname", T), ("pubowner", I8), ("puballtables", B), ("pubinsert", B), ("pubupdate", B), ("pubdelete", B), ("pubtruncate", B), ("pubviaroot", B)]),
    ("pg_publication_rel", &[("oid", I8), ("prpubid", I8), ("prrelid", I8), ("prqual", T), ("prattrs", T)]),
    ("pg_publication_namespace", &[("oid", I8), ("pnpubid", I8), ("pnnspid", I8)]),
    ("pg_views", &[("schemaname", T), ("viewname", T), ("viewowner", T), ("definition", T)]),
    (
        "pg_tables",
        &[("schemaname", T), ("tablename", T), ("tableowner", T), ("tablespace", T), ("hasindexes", B), ("hasrules", B), ("hastriggers", B), ("rowsecurity", B)],
    ),
    ("pg_indexes", &[("schemaname", T), ("tablename", T), ("indexname", T), ("tablespace", T), ("indexdef", T)]),
];

/// The relations of features Freshet does not have: they never have rows.
const EMPTY: &[&str] = &[
    "pg_inherits", "pg_trigger", "pg_policy", "pg_statistic_ext", "pg_publication", "pg_publication_rel",
    "pg_publication_namespace", "pg_auth_members",
];

/// One catalog relation, computed from the current catalog when scanned. Its rows depend on
/// the catalog only, so the batch of the last catalog version scanned is kept.
#[derive(Debug)]
struct CatalogRelation {
    name: &'static str,
    engine: Arc<Engine>,
    last: parking_lot::Mutex<Option<(u64, RecordBatch)>>,
}

fn columns_of(name: &str) -> &'static [(&'static str, ArrowType)] {
    RELATIONS.iter().find(|(n, _)| *n == name).map(|(_, c)| *c).unwrap_or(&[])
}

impl SystemTable for CatalogRelation {
    fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(columns_of(self.name).iter().map(|(n, t)| Field::new(*n, column_type(t), true)).collect::<Vec<_>>()))
    }

    fn always_empty(&self) -> bool {
        EMPTY.contains(&self.name)
    }

    fn batch(&self) -> DfResult<RecordBatch> {
        let catalog = self.engine.catalog();
        if let Some((version, batch)) = self.last.lock().as_ref()
            && *version == catalog.version
        {
            return Ok(batch.clone());
        }
        let batch = batch_of(self.schema(), &rows(self.name, &catalog))?;
        *self.last.lock() = Some((catalog.version, batch.clone()));
        Ok(batch)
    }
}

/// Rows of cells as a batch of `schema` (cells past a row's end are NULL).
fn batch_of(schema: SchemaRef, rows: &[Vec<V>]) -> DfResult<RecordBatch> {
    let columns = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(c, field)| column_array(rows.iter().map(|r| r.get(c).unwrap_or(&V::Null)), field.data_type()))
        .collect::<DfResult<Vec<_>>>()?;
    Ok(RecordBatch::try_new(schema, columns)?)
}

/// `pg_locks`: the advisory locks sessions hold and wait for. Freshet has no table locks, and
/// its row locks live in the rows' versions on the executors, so those are not listed.
#[derive(Debug)]
struct LocksRelation(Arc<crate::advisory::AdvisoryLocks>);

const LOCKS_COLUMNS: &[(&str, ArrowType)] = &[
    ("locktype", T), ("database", I8), ("relation", I8), ("page", I4), ("tuple", I2), ("virtualxid", T), ("transactionid", I8),
    ("classid", I8), ("objid", I8), ("objsubid", I2), ("virtualtransaction", T), ("pid", I4), ("mode", T), ("granted", B),
    ("fastpath", B),
];

impl SystemTable for LocksRelation {
    fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(LOCKS_COLUMNS.iter().map(|(n, t)| Field::new(*n, t.clone(), true)).collect::<Vec<_>>()))
    }

    fn batch(&self) -> DfResult<RecordBatch> {
        let rows: Vec<Vec<V>> = self
            .0
            .rows()
            .into_iter()
            .map(|r| {
                let (classid, objid, objsubid) = r.key.pg_locks_ids();
                vec![
                    t("advisory"), V::Int(DATABASE_OID), V::Null, V::Null, V::Null, V::Null, V::Null, V::Int(classid), V::Int(objid),
                    V::Int(objsubid), t(format!("{}/1", r.session)), V::Int(r.session as i64),
                    t(if r.shared { "ShareLock" } else { "ExclusiveLock" }), V::Bool(r.granted), V::Bool(false),
                ]
            })
            .collect();
        batch_of(self.schema(), &rows)
    }
}

/// What the database has done since it opened, kept by its sessions (`pg_stat_database`).
#[derive(Debug, Default)]
pub(crate) struct Activity {
    /// Sessions open now.
    pub sessions: std::sync::atomic::AtomicI64,
    /// Transactions that committed and that rolled back: a statement outside a block is one.
    pub commits: std::sync::atomic::AtomicU64,
    pub rollbacks: std::sync::atomic::AtomicU64,
    /// Statements that failed with 40P01.
    pub deadlocks: std::sync::atomic::AtomicU64,
    /// Analytical queries that read each table (whole-table scans of its snapshot).
    pub analytical_scans: parking_lot::Mutex<std::collections::HashMap<freshet_core::catalog::TableId, u64>>,
}

impl Activity {
    pub fn tables_scanned(&self, tables: &[Arc<TableDef>]) {
        let mut scans = self.analytical_scans.lock();
        for t in tables {
            *scans.entry(t.id).or_default() += 1;
        }
    }

    pub fn transaction_ended(&self, committed: bool) {
        let counter = if committed { &self.commits } else { &self.rollbacks };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The statistics relations: counters of tables (from their partitions, when scanned) and of
/// the database. Counting starts when the database opens.
const STATISTICS: &[(&str, &[(&str, ArrowType)])] = &[
    (
        "pg_stat_user_tables",
        &[
            ("relid", I8), ("schemaname", T), ("relname", T), ("seq_scan", I8), ("idx_scan", I8), ("n_tup_ins", I8),
            ("n_tup_upd", I8), ("n_tup_del", I8), ("n_tup_hot_upd", I8), ("n_live_tup", I8), ("n_dead_tup", I8),
        ],
    ),
    (
        "pg_stat_database",
        &[
            ("datid", I8), ("datname", T), ("numbackends", I4), ("xact_commit", I8), ("xact_rollback", I8), ("tup_inserted", I8),
            ("tup_updated", I8), ("tup_deleted", I8), ("conflicts", I8), ("deadlocks", I8),
        ],
    ),
    (
        "pg_stat_user_indexes",
        &[
            ("relid", I8), ("indexrelid", I8), ("schemaname", T), ("relname", T), ("indexrelname", T), ("idx_scan", I8), ("idx_tup_read", I8),
            ("idx_tup_fetch", I8),
        ],
    ),
    (
        "pg_statio_user_tables",
        &[
            ("relid", I8), ("schemaname", T), ("relname", T), ("heap_blks_read", I8), ("heap_blks_hit", I8), ("idx_blks_read", I8),
            ("idx_blks_hit", I8), ("toast_blks_read", I8), ("toast_blks_hit", I8), ("tidx_blks_read", I8), ("tidx_blks_hit", I8),
        ],
    ),
    (
        "pg_statio_user_indexes",
        &[("relid", I8), ("indexrelid", I8), ("schemaname", T), ("relname", T), ("indexrelname", T), ("idx_blks_read", I8), ("idx_blks_hit", I8)],
    ),
    (
        "pg_stat_bgwriter",
        &[
            ("checkpoints_timed", I8), ("checkpoints_req", I8), ("checkpoint_write_time", F8), ("checkpoint_sync_time", F8),
            ("buffers_checkpoint", I8), ("buffers_clean", I8), ("maxwritten_clean", I8), ("buffers_backend", I8), ("buffers_backend_fsync", I8),
            ("buffers_alloc", I8), ("stats_reset", TSZ),
        ],
    ),
    (
        "pg_stat_archiver",
        &[
            ("archived_count", I8), ("last_archived_wal", T), ("last_archived_time", TSZ), ("failed_count", I8), ("last_failed_wal", T),
            ("last_failed_time", TSZ), ("stats_reset", TSZ),
        ],
    ),
    (
        "pg_stat_database_conflicts",
        &[
            ("datid", I8), ("datname", T), ("confl_tablespace", I8), ("confl_lock", I8), ("confl_snapshot", I8), ("confl_bufferpin", I8),
            ("confl_deadlock", I8),
        ],
    ),
];

#[derive(Debug)]
struct StatisticsRelation {
    name: &'static str,
    engine: Arc<Engine>,
    activity: Arc<Activity>,
    /// The data directory, whose checkpoints `pg_stat_bgwriter` counts (none in memory).
    data: Option<Arc<crate::durability::DataDir>>,
}

impl SystemTable for StatisticsRelation {
    fn schema(&self) -> SchemaRef {
        let columns = STATISTICS.iter().find(|(n, _)| *n == self.name).map(|(_, c)| *c).unwrap_or(&[]);
        Arc::new(Schema::new(columns.iter().map(|(n, t)| Field::new(*n, column_type(t), true)).collect::<Vec<_>>()))
    }

    fn batch(&self) -> DfResult<RecordBatch> {
        use std::sync::atomic::Ordering::Relaxed;
        use V::Int as i;
        // One job per partition collects the counters; executors never wait on a query.
        let stats = futures::executor::block_on(self.engine.all_table_stats()).map_err(|e| DataFusionError::External(Box::new(e)))?;
        let catalog = self.engine.catalog();
        let count = |n: u64| i(n as i64);
        let analytical = self.activity.analytical_scans.lock().clone();
        let indexes = |with_scans: bool| -> DfResult<Vec<Vec<V>>> {
            let scans = if with_scans {
                futures::executor::block_on(self.engine.all_index_scans()).map_err(|e| DataFusionError::External(Box::new(e)))?
            } else {
                Default::default()
            };
            let mut rows = Vec::new();
            for table in catalog.tables() {
                for (position, index) in table.indexes.iter().enumerate() {
                    let mut row = vec![i(table_oid(table)), i(index_oid(table, position)), t("public"), t(table.name.clone()), t(index.name.clone())];
                    if with_scans {
                        // Index entries read and rows fetched are not counted.
                        let n = scans.get(&table.id).and_then(|s| s.get(position)).copied().unwrap_or(0);
                        row.extend([count(n), V::Null, V::Null]);
                    } else {
                        row.extend([i(0), i(0)]);
                    }
                    rows.push(row);
                }
            }
            Ok(rows)
        };
        let rows: Vec<Vec<V>> = match self.name {
            "pg_stat_user_tables" => catalog
                .tables()
                .map(|table| {
                    let s = stats.get(&table.id).copied().unwrap_or_default();
                    let seq_scans = s.seq_scans + analytical.get(&table.id).copied().unwrap_or(0);
                    vec![
                        i(table_oid(table)), t("public"), t(table.name.clone()), count(seq_scans), count(s.index_scans), count(s.inserted),
                        count(s.updated), count(s.deleted), i(0), count(s.live_rows), count(s.versions),
                    ]
                })
                .collect(),
            "pg_stat_user_indexes" => indexes(true)?,
            "pg_statio_user_indexes" => indexes(false)?,
            "pg_statio_user_tables" => catalog
                .tables()
                .map(|table| {
                    let idx = if table.indexes.is_empty() { V::Null } else { i(0) };
                    vec![i(table_oid(table)), t("public"), t(table.name.clone()), i(0), i(0), idx.clone(), idx, V::Null, V::Null, V::Null, V::Null]
                })
                .collect(),
            "pg_stat_bgwriter" => {
                let c = self.data.as_ref().map(|d| &d.checkpoints);
                let get = |f: fn(&crate::durability::CheckpointCounts) -> &std::sync::atomic::AtomicU64| count(c.map_or(0, |c| f(c).load(Relaxed)));
                vec![vec![
                    get(|c| &c.timed), get(|c| &c.requested), get(|c| &c.write_ms), i(0), i(0), i(0), i(0), i(0), i(0), i(0), V::Null,
                ]]
            }
            "pg_stat_archiver" => vec![vec![i(0), V::Null, V::Null, i(0), V::Null, V::Null, V::Null]],
            "pg_stat_database_conflicts" => vec![vec![i(DATABASE_OID), t(DATABASE), i(0), i(0), i(0), i(0), i(0)]],
            _ => {
                let total = stats.values().fold(freshet_core::storage::TableStats::default(), |a, s| a + *s);
                let a = &self.activity;
                vec![vec![
                    i(DATABASE_OID), t(DATABASE), i(a.sessions.load(Relaxed)), count(a.commits.load(Relaxed)), count(a.rollbacks.load(Relaxed)),
                    count(total.inserted), count(total.updated), count(total.deleted), i(0), count(a.deadlocks.load(Relaxed)),
                ]]
            }
        };
        batch_of(self.schema(), &rows)
    }
}

/// A catalog cell, converted to its column's type when the batch is built.
#[derive(Clone, Debug)]
enum V {
    Null,
    Int(i64),
    Bool(bool),
    Text(String),
    /// An `int2[]` (or `int2vector`).
    Ints(Vec<i64>),
}

/// One column of catalog cells as an array of type `ty`.
fn column_array<'a>(cells: impl Iterator<Item = &'a V>, ty: &ArrowType) -> DfResult<datafusion::arrow::array::ArrayRef> {
    use datafusion::arrow::array::{self as a, ArrayRef};
    let cells: Vec<&V> = cells.collect();
    let int = |v: &V| if let V::Int(i) = v { Some(*i) } else { None };
    let mismatch = |v: &V| DataFusionError::Internal(format!("catalog value {v:?} in a column of type {ty}"));
    let fits = |v: &V| {
        matches!(
            (v, ty),
            (V::Null, _)
                | (V::Int(_), ArrowType::Int16 | ArrowType::Int32 | ArrowType::Int64 | ArrowType::Float32 | ArrowType::Float64)
                | (V::Bool(_), ArrowType::Boolean)
                | (V::Text(_), ArrowType::Utf8)
                | (V::Ints(_), ArrowType::List(_))
        )
    };
    if let Some(bad) = cells.iter().find(|v| !fits(v)) {
        return Err(mismatch(bad));
    }
    Ok(match ty {
        ArrowType::Int16 => Arc::new(a::Int16Array::from_iter(cells.iter().map(|v| int(v).map(|i| i as i16)))) as ArrayRef,
        ArrowType::Int32 => Arc::new(a::Int32Array::from_iter(cells.iter().map(|v| int(v).map(|i| i as i32)))),
        ArrowType::Int64 => Arc::new(a::Int64Array::from_iter(cells.iter().map(|v| int(v)))),
        ArrowType::Float32 => Arc::new(a::Float32Array::from_iter(cells.iter().map(|v| int(v).map(|i| i as f32)))),
        ArrowType::Float64 => Arc::new(a::Float64Array::from_iter(cells.iter().map(|v| int(v).map(|i| i as f64)))),
        ArrowType::Boolean => Arc::new(a::BooleanArray::from_iter(cells.iter().map(|v| if let V::Bool(b) = v { Some(*b) } else { None }))),
        ArrowType::Utf8 => Arc::new(a::StringArray::from_iter(cells.iter().map(|v| if let V::Text(s) = v { Some(s.as_str()) } else { None }))),
        ArrowType::List(field) if field.data_type() == &I2 => {
            let mut builder = a::ListBuilder::new(a::Int16Builder::new());
            for v in &cells {
                match v {
                    V::Ints(items) => {
                        builder.values().append_slice(&items.iter().map(|&i| i as i16).collect::<Vec<_>>());
                        builder.append(true);
                    }
                    _ => builder.append(false),
                }
            }
            Arc::new(builder.finish())
        }
        // Other array columns are always NULL.
        other => a::new_null_array(other, cells.len()),
    })
}

fn t(s: impl Into<String>) -> V {
    V::Text(s.into())
}

/// The rows of relation `name`, in its columns' order; `V::Null` fills the rest of a row.
fn rows(name: &str, catalog: &Catalog) -> Vec<Vec<V>> {
    use V::{Bool as b, Int as i, Null as null};
    let tables = || catalog.tables();
    match name {
        "pg_namespace" => vec![
            vec![i(PG_CATALOG_OID), t("pg_catalog"), i(ROLE_OID)],
            vec![i(PUBLIC_OID), t("public"), i(ROLE_OID)],
        ],
        "pg_class" => {
            let mut out: Vec<Vec<V>> = RELATIONS
                .iter()
                .filter_map(|(name, columns)| Some(class_row(catalog_relation_oid(name)?, name, PG_CATALOG_OID, HEAP_AM, "r", columns.len(), false)))
                .collect();
            for table in tables() {
                let oid = table_oid(table);
                let mut row = class_row(oid, &table.name, PUBLIC_OID, HEAP_AM, "r", table.columns.len(), !table.indexes.is_empty());
                // relchecks: psql's \d lists check constraints only when it is positive.
                row[RELCHECKS] = V::Int(table.checks.len() as i64);
                out.push(row);
                for (p, index) in table.indexes.iter().enumerate() {
                    let am = if index.is_ordered() { BTREE_AM } else { HASH_AM };
                    out.push(class_row(index_oid(table, p), &index.name, PUBLIC_OID, am, "i", index.columns.len(), false));
                }
            }
            for view in catalog.views() {
                out.push(class_row(view_oid(view), &view.name, PUBLIC_OID, 0, "v", view.columns.len(), false));
            }
            for seq in catalog.all_sequences() {
                out.push(class_row(16384 + 256 * seq.id as i64, &seq.name, PUBLIC_OID, 0, "S", 3, false));
            }
            out
        }
        "pg_attribute" => {
            let mut out = Vec::new();
            for (name, columns) in RELATIONS {
                let Some(oid) = catalog_relation_oid(name) else { continue };
                for (c, (column, ty)) in columns.iter().enumerate() {
                    out.push(attribute_row(oid, column, catalog_column_type(ty), c + 1, false, false));
                }
            }
            for table in tables() {
                for (c, column) in table.columns.iter().enumerate() {
                    let identity = match column.default {
                        Some(ColumnDefault::Identity { always, .. }) => Some(if always { "a" } else { "d" }),
                        _ => None,
                    };
                    let mut row = attribute_row(table_oid(table), &column.name, AttType::of_column(column), c + 1, !column.nullable, column.default.is_some() && identity.is_none());
                    if let Some(kind) = identity {
                        row[16] = t(kind);
                    }
                    out.push(row);
                }
                for (p, index) in table.indexes.iter().enumerate() {
                    for (k, &c) in index.columns.iter().enumerate() {
                        let column = &table.columns[c];
                        out.push(attribute_row(index_oid(table, p), &column.name, AttType::of_column(column), k + 1, !column.nullable, false));
                    }
                }
            }
            for view in catalog.views() {
                for (c, (name, ty)) in view.columns.iter().enumerate() {
                    out.push(attribute_row(view_oid(view), name, AttType::of(*ty), c + 1, false, false));
                }
            }
            out
        }
        "pg_attrdef" => tables()
            .flat_map(|table| {
                table.columns.iter().enumerate().filter_map(move |(c, column)| {
                    let text = match column.default.as_ref()? {
                        ColumnDefault::CurrentTimestamp => "CURRENT_TIMESTAMP".to_string(),
                        ColumnDefault::RandomUuid => "gen_random_uuid()".to_string(),
                        ColumnDefault::TimeDependent { sql, .. } => sql.clone(),
                        ColumnDefault::Value(v) => literal(v, column.ty),
                        ColumnDefault::Nextval(s) => format!("nextval('{}'::regclass)", freshet_core::sql::names::quote_ident(s).replace('\'', "''")),
                        // An identity column has no default expression in PostgreSQL's catalog.
                        ColumnDefault::Identity { .. } => return None,
                    };
                    Some(vec![i(table_oid(table) * 1000 + c as i64 + 1), i(table_oid(table)), i(c as i64 + 1), t(text)])
                })
            })
            .collect(),
        "pg_type" => TYPES
            .iter()
            .map(|&(oid, name, len, category)| {
                let collation = if category == "S" { DEFAULT_COLLATION_OID } else { 0 };
                let oid32 = u32::try_from(oid).unwrap_or(0);
                // An array type names its element type; a type Freshet has arrays of names its array type.
                let elem = DataType::from_array_oid(oid32).map_or(0, |e| e.oid() as i64);
                let array = DataType::from_oid(oid32).filter(|_| category != "A" && oid != 19).map_or(0, |t| t.array_oid() as i64);
                vec![
                    i(oid), t(name), i(PG_CATALOG_OID), i(ROLE_OID), i(len), b(len > 0), t("b"), t(category), b(false), b(true),
                    t(","), i(0), i(elem), i(array), b(false), i(0), i(-1), i(0), i(collation), null,
                ]
            })
            .collect(),
        "pg_index" => tables()
            .flat_map(|table| {
                table.indexes.iter().enumerate().map(move |(p, index)| {
                    let n = index.columns.len() as i64;
                    let key = index.columns.iter().map(|&c| c as i64 + 1).collect();
                    vec![
                        i(index_oid(table, p)), i(table_oid(table)), i(n), i(n), b(index.unique), b(false), b(index.primary),
                        b(false), b(true), b(false), b(true), b(false), b(true), b(true), b(false), V::Ints(key),
                        V::Ints(vec![0; n as usize]), null, null,
                    ]
                })
            })
            .collect(),
        // Comments of tables (objsubid 0) and their columns (the column's number).
        "pg_description" => tables()
            .flat_map(|table| {
                table.comments.iter().map(move |(column, text)| {
                    let sub = column.as_deref().and_then(|c| table.column_index(c)).map_or(0, |c| c as i64 + 1);
                    vec![i(table_oid(table)), i(PG_CLASS_OID), i(sub), t(text.clone())]
                })
            })
            .collect(),
        "pg_constraint" => tables()
            .flat_map(|table| {
                let primary = table.indexes.iter().enumerate().filter(|(_, index)| index.primary).map(move |(p, index)| {
                    let key = index.columns.iter().map(|&c| c as i64 + 1).collect();
                    vec![
                        i(index_oid(table, p)), t(index.name.clone()), i(PUBLIC_OID), t("p"), b(false), b(false), b(true),
                        i(table_oid(table)), i(0), i(index_oid(table, p)), i(0), i(0), t(" "), t(" "), t(" "), b(true), i(0),
                        b(true), V::Ints(key), null, null,
                    ]
                });
                let checks = table.checks.iter().enumerate().map(move |(k, check)| {
                    let key = (0..table.columns.len()).filter(|&c| check.reads(c)).map(|c| c as i64 + 1).collect();
                    vec![
                        i(check_oid(table, k)), t(check.name.clone()), i(PUBLIC_OID), t("c"), b(false), b(false), b(true),
                        i(table_oid(table)), i(0), i(0), i(0), i(0), t(" "), t(" "), t(" "), b(true), i(0),
                        b(false), V::Ints(key), null, null,
                    ]
                });
                primary.chain(checks)
            })
            .collect(),
        "pg_am" => vec![
            vec![i(HEAP_AM), t("heap"), t("heap_tableam_handler"), t("t")],
            vec![i(BTREE_AM), t("btree"), t("bthandler"), t("i")],
            vec![i(HASH_AM), t("hash"), t("hashhandler"), t("i")],
        ],
        "pg_collation" => [(DEFAULT_COLLATION_OID, "default", "d", ""), (950, "C", "c", "C"), (951, "POSIX", "c", "POSIX")]
            .into_iter()
            .map(|(oid, name, provider, locale)| vec![i(oid), t(name), i(PG_CATALOG_OID), i(ROLE_OID), t(provider), i(-1), t(locale), t(locale)])
            .collect(),
        "pg_database" => vec![vec![
            i(DATABASE_OID), t(DATABASE), i(ROLE_OID), i(UTF8_ENCODING as i64), t("c"), b(false), b(true), i(-1), i(1663), t("C"), t("C"), null, null,
        ]],
        "pg_roles" => vec![vec![
            i(ROLE_OID), t(ROLE), b(true), b(true), b(true), b(true), b(true), b(false), i(-1), t("********"), null, b(true), null,
        ]],
        // PostgreSQL's built-in languages, and PL/pgSQL, the language of every stored routine.
        "pg_language" => [(12, "internal", false, false), (13, "c", false, false), (SQL_LANGUAGE_OID, "sql", false, true), (PLPGSQL_LANGUAGE_OID, "plpgsql", true, true)]
            .into_iter()
            .map(|(oid, name, pl, trusted)| vec![i(oid), t(name), i(ROLE_OID), b(pl), b(trusted), null])
            .collect(),
        // PL/pgSQL, the one procedural language, which PostgreSQL always has installed.
        "pg_extension" => vec![vec![i(PLPGSQL_EXTENSION_OID), t("plpgsql"), i(ROLE_OID), i(PG_CATALOG_OID), b(false), t("1.0"), null, null]],
        "pg_user" => vec![vec![t(ROLE), i(ROLE_OID), b(true), b(true), b(false), b(true), t("********"), null]],
        "pg_proc" => catalog
            .procedures()
            .map(|def| {
                let r = &def.routine;
                let scalar_oid = |t: &freshet_core::sql::plpgsql::PlType| match t {
                    freshet_core::sql::plpgsql::PlType::Scalar(d) => d.oid() as i64,
                    freshet_core::sql::plpgsql::PlType::Array(_) => 0,
                };
                let returns = match (&r.set, r.returns) {
                    (Some(set), _) if set.columns.len() == 1 => set.columns[0].1.oid() as i64,
                    (Some(_), _) => RECORD_OID,
                    (None, Some(t)) => scalar_oid(&t),
                    (None, None) => VOID_OID,
                };
                let argument_types = r.params.iter().map(|(_, t)| scalar_oid(t).to_string()).collect::<Vec<_>>().join(" ");
                vec![
                    i(procedure_oid(def.id)), t(r.name.clone()), i(PUBLIC_OID), i(ROLE_OID), i(if crate::procedure::in_sql(r) { SQL_LANGUAGE_OID } else { PLPGSQL_LANGUAGE_OID }), i(100), i(if r.set.as_ref().is_some_and(|s| !s.single) { 1000 } else { 0 }), i(0),
                    t(if r.function { "f" } else { "p" }), b(false), b(false), b(false), b(r.set.as_ref().is_some_and(|s| !s.single)), t("v"), t("u"),
                    i(r.params.len() as i64), i(r.defaults.iter().flatten().count() as i64), i(returns), t(argument_types), null, t(crate::procedure::body(r)), null,
                ]
            })
            .collect(),
        "pg_settings" => crate::settings::documented()
            .map(|(name, default, description)| {
                vec![t(name), t(default), null, t("Freshet"), t(description), t("user"), t("string"), t("default"), t(default), t(default)]
            })
            .collect(),
        "pg_views" => catalog.views().map(|v| vec![t("public"), t(v.name.clone()), t(ROLE), t(format!(" {};", v.query))]).collect(),
        // The user's tables and their indexes (PostgreSQL's views also list its own catalog
        // tables, under pg_catalog).
        "pg_tables" => tables()
            .map(|table| vec![t("public"), t(table.name.clone()), t(ROLE), V::Null, b(!table.indexes.is_empty()), b(false), b(false), b(false)])
            .collect(),
        "pg_indexes" => tables()
            .flat_map(|table| {
                (0..table.indexes.len()).map(move |p| {
                    let definition = index_definition(catalog, index_oid(table, p), 0).unwrap_or_default();
                    vec![t("public"), t(table.name.clone()), t(table.indexes[p].name.clone()), V::Null, t(definition)]
                })
            })
            .collect(),
        "pg_tablespace" => vec![vec![i(1663), t("pg_default"), i(ROLE_OID)], vec![i(1664), t("pg_global"), i(ROLE_OID)]],
        _ => Vec::new(),
    }
}

/// The position of `relchecks` in a `pg_class` row.
const RELCHECKS: usize = 18;

fn class_row(oid: i64, name: &str, namespace: i64, am: i64, kind: &str, columns: usize, has_index: bool) -> Vec<V> {
    use V::{Bool as b, Int as i, Null as null};
    vec![
        i(oid), t(name), i(namespace), i(0), i(0), i(ROLE_OID), i(am), i(oid), i(0), i(0), i(-1), i(0), i(0), b(has_index),
        b(false), t("p"), t(kind), i(columns as i64), i(0), b(false), b(false), b(false), b(false), b(false), b(true), t("d"),
        b(false), i(0), null, null, null,
    ]
}

/// A column's type as `pg_attribute` records it.
struct AttType {
    oid: i64,
    len: i64,
    typmod: i64,
    collation: i64,
}

impl AttType {
    fn of(ty: DataType) -> AttType {
        let collation = if ty.is_string() { DEFAULT_COLLATION_OID } else { 0 };
        AttType { oid: ty.oid() as i64, len: ty.type_len() as i64, typmod: ty.typmod() as i64, collation }
    }

    /// A table column's type: a `timestamp(p)`'s typmod is p, as in PostgreSQL.
    fn of_column(column: &freshet_core::catalog::ColumnDef) -> AttType {
        let ty = AttType::of(column.ty);
        match column.precision {
            Some(p) => AttType { typmod: p as i64, ..ty },
            None => ty,
        }
    }
}

fn attribute_row(relation: i64, name: &str, ty: AttType, number: usize, not_null: bool, has_default: bool) -> Vec<V> {
    use V::{Bool as b, Int as i, Null as null};
    let AttType { oid, len, typmod, collation } = ty;
    vec![
        i(relation), t(name), i(oid), i(-1), i(len), i(number as i64), i(0), i(-1), i(typmod),
        b(len > 0), t(if len == 8 { "d" } else { "i" }), t(if len > 0 { "p" } else { "x" }), t(""), b(not_null), b(has_default),
        b(false), t(""), t(""), b(false), b(true), i(0), i(collation), null, null, null,
    ]
}

/// A default value as PostgreSQL prints it (`pg_get_expr`).
fn literal(v: &freshet_core::types::Value, ty: DataType) -> String {
    let Some(text) = v.to_text(ty) else { return "NULL".into() };
    match ty.family() {
        freshet_core::types::TypeFamily::Integer | freshet_core::types::TypeFamily::Float if !text.starts_with('-') => text,
        freshet_core::types::TypeFamily::Decimal if !text.starts_with('-') => text,
        freshet_core::types::TypeFamily::Bool => if text == "t" { "true".into() } else { "false".into() },
        _ => format!("'{}'::{}", text.replace('\'', "''"), ty.pg_name()),
    }
}

/// The types a column can have, and the catalog types: (OID, name, length, category).
const TYPES: &[(i64, &str, i64, &str)] = &[
    (16, "bool", 1, "B"),
    (18, "char", 1, "Z"),
    (19, "name", 64, "S"),
    (20, "int8", 8, "N"),
    (21, "int2", 2, "N"),
    (23, "int4", 4, "N"),
    (25, "text", -1, "S"),
    (26, "oid", 4, "N"),
    (700, "float4", 4, "N"),
    (701, "float8", 8, "N"),
    (1042, "bpchar", -1, "S"),
    (1043, "varchar", -1, "S"),
    (1082, "date", 4, "D"),
    (1114, "timestamp", 8, "D"),
    (1184, "timestamptz", 8, "D"),
    (1700, "numeric", -1, "N"),
    (2950, "uuid", 16, "U"),
    (1000, "_bool", -1, "A"),
    (1005, "_int2", -1, "A"),
    (1007, "_int4", -1, "A"),
    (1009, "_text", -1, "A"),
    (1014, "_bpchar", -1, "A"),
    (1015, "_varchar", -1, "A"),
    (1016, "_int8", -1, "A"),
    (1021, "_float4", -1, "A"),
    (1022, "_float8", -1, "A"),
    (1115, "_timestamp", -1, "A"),
    (1182, "_date", -1, "A"),
    (1185, "_timestamptz", -1, "A"),
    (1231, "_numeric", -1, "A"),
    (2951, "_uuid", -1, "A"),
];

/// `format_type(oid, typmod)`: the type's SQL name with its modifiers.
fn format_type(oid: i64, typmod: Option<i64>) -> String {
    let modifier = typmod.filter(|m| *m >= 4).map(|m| m - 4);
    match oid {
        1700 => match modifier {
            Some(m) => format!("numeric({},{})", (m >> 16) & 0xffff, m & 0xffff),
            None => "numeric".into(),
        },
        // As PostgreSQL: no modifier at all is `character`, an empty one (-1) `bpchar`.
        1042 => match (modifier, typmod) {
            (Some(n), _) => format!("character({n})"),
            (None, None) => "character".into(),
            (None, Some(_)) => "bpchar".into(),
        },
        1043 => match modifier {
            Some(n) => format!("character varying({n})"),
            None => "character varying".into(),
        },
        18 => "\"char\"".into(),
        1005 => "smallint[]".into(),
        1009 => "text[]".into(),
        1016 => "bigint[]".into(),
        19 => "name".into(),
        26 => "oid".into(),
        // A timestamp's typmod is its precision itself.
        1114 | 1184 => {
            let zone = if oid == 1184 { "with" } else { "without" };
            match typmod.filter(|m| (0..=6).contains(m)) {
                Some(p) => format!("timestamp({p}) {zone} time zone"),
                None => format!("timestamp {zone} time zone"),
            }
        }
        other => match u32::try_from(other).ok().and_then(DataType::from_oid) {
            Some(ty) => ty.pg_name().to_string(),
            None => "???".into(),
        },
    }
}

/// `pg_get_indexdef(oid)`, or with a column number above 0 that key column's name.
fn index_definition(catalog: &Catalog, oid: i64, column: i64) -> Option<String> {
    let (table, position) = index_of(catalog, oid)?;
    let index = &table.indexes[position];
    let names: Vec<&str> = index.columns.iter().map(|&c| table.columns[c].name.as_str()).collect();
    if column > 0 {
        return names.get(column as usize - 1).map(|s| s.to_string());
    }
    let unique = if index.unique { "UNIQUE " } else { "" };
    let method = if index.is_ordered() { "btree" } else { "hash" };
    Some(format!("CREATE {unique}INDEX {} ON public.{} USING {method} ({})", index.name, table.name, names.join(", ")))
}

/// `pg_get_constraintdef(oid)`.
fn constraint_definition(catalog: &Catalog, oid: i64) -> Option<String> {
    if let Some((table, k)) = check_of(catalog, oid) {
        return Some(format!("CHECK (({}))", table.checks[k].sql));
    }
    let (table, position) = index_of(catalog, oid)?;
    let index = &table.indexes[position];
    let names: Vec<&str> = index.columns.iter().map(|&c| table.columns[c].name.as_str()).collect();
    index.primary.then(|| format!("PRIMARY KEY ({})", names.join(", ")))
}

/// The name a text gives an object, read as SQL reads a name: without a `public.` schema,
/// unquoted if quoted, else folded to lower case.
fn object_name(text: &str) -> String {
    let bare = text.strip_prefix("public.").unwrap_or(text);
    if bare.starts_with('"') && bare.ends_with('"') && bare.len() > 1 { bare[1..bare.len() - 1].to_string() } else { bare.to_lowercase() }
}

/// The OID of a relation named in text (or given as a number).
fn regclass(catalog: &Catalog, name: &str) -> DfResult<i64> {
    if let Ok(oid) = name.trim().parse::<i64>() {
        return Ok(oid);
    }
    let folded = object_name(name);
    if let Some(table) = catalog.table(&folded) {
        return Ok(table_oid(table));
    }
    if let Some((table, position)) = catalog.index_owner(&folded) {
        return Ok(index_oid(table, position));
    }
    if let Some(view) = catalog.view(&folded) {
        return Ok(view_oid(view));
    }
    if let Some(oid) = catalog_relation_oid(folded.strip_prefix("pg_catalog.").unwrap_or(&folded)) {
        return Ok(oid);
    }
    let missing = freshet_core::Error::new(freshet_core::SqlState::UndefinedTable, format!("relation \"{name}\" does not exist"));
    Err(DataFusionError::External(Box::new(missing)))
}

/// What a `regclass` shows: the name of the relation (table, view, index or catalog
/// relation) with OID `oid`, or the number when none has it, as PostgreSQL prints one.
fn relation_name(catalog: &Catalog, oid: i64) -> String {
    if let Some(table) = table_of(catalog, oid) {
        return table.name.clone();
    }
    if let Some(view) = catalog.views().find(|v| view_oid(v) == oid) {
        return view.name.clone();
    }
    if let Some((table, position)) = index_of(catalog, oid) {
        return table.indexes[position].name.clone();
    }
    catalog_relation_name(oid).map_or_else(|| oid.to_string(), str::to_string)
}

/// The OID of the type a text names, in SQL's spelling (`integer`, `character varying(10)`,
/// `timestamp with time zone`) or the catalog's (`int4`, `name`, `oid`), or of an OID
/// written as a number; 42704 if there is no such type.
fn regtype(name: &str) -> DfResult<i64> {
    let name = name.trim();
    if let Ok(oid) = name.parse::<i64>() {
        return Ok(oid);
    }
    let lower = name.to_lowercase();
    let bare = lower.strip_prefix("pg_catalog.").unwrap_or(&lower);
    // The catalog's names first (`name` is a type of its own, which SQL's spelling would read
    // as text), except `char`, which SQL reads as `character` (PostgreSQL's `"char"` is a
    // one-byte type of the catalog's).
    if let Some((oid, ..)) = TYPES.iter().find(|(_, n, ..)| *n == bare && bare != "char") {
        return Ok(*oid);
    }
    let dialect = sqlparser::dialect::PostgreSqlDialect {};
    let sql_spelling = sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(bare)
        .and_then(|mut p| p.parse_data_type())
        .ok()
        .and_then(|t| freshet_core::sql::bind::sql_type(&t).ok());
    if let Some(ty) = sql_spelling {
        return Ok(ty.oid() as i64);
    }
    let missing = freshet_core::Error::new(freshet_core::SqlState::UndefinedObject, format!("type \"{name}\" does not exist"));
    Err(DataFusionError::External(Box::new(missing)))
}

/// What a `regtype` shows: the type's name (`format_type` without a modifier), or the number
/// when no type has that OID.
fn type_name(oid: i64) -> String {
    let known = TYPES.iter().any(|(o, ..)| *o == oid) || u32::try_from(oid).ok().and_then(DataType::from_oid).is_some();
    if known { format_type(oid, None) } else { oid.to_string() }
}

/// The OID of the routine a text names (`'name'::regproc`, `'name(integer)'::regprocedure`,
/// optionally `public.`-qualified, quoted as SQL reads names), or of an OID written as a number.
fn regproc(catalog: &Catalog, name: &str) -> DfResult<i64> {
    if let Ok(oid) = name.trim().parse::<i64>() {
        return Ok(oid);
    }
    let error = |state, message: String| Err(DataFusionError::External(Box::new(freshet_core::Error::new(state, message))));
    // The name, and the argument types if written (`regprocedure`), as DROP FUNCTION reads them.
    let (routine, signature) = match freshet_core::sql::plpgsql::parser::parse_drop(&format!("DROP FUNCTION {name}")) {
        Ok(d) if d.names.len() == 1 => d.names.into_iter().next().unwrap_or_default(),
        _ => (object_name(name.split_once('(').map_or(name, |(n, _)| n).trim()), None),
    };
    let found = match &signature {
        Some(types) => catalog.routine(&routine, types),
        None => match catalog.routines(&routine) {
            [one] => Some(one),
            [] => None,
            _ => return error(freshet_core::SqlState::AmbiguousFunction, format!("more than one function named \"{routine}\"")),
        },
    };
    match found {
        Some(def) => Ok(procedure_oid(def.id)),
        None => error(freshet_core::SqlState::UndefinedFunction, format!("function \"{name}\" does not exist")),
    }
}

/// `pg_size_pretty(bytes)`: bytes below 10 kB, then kB, MB, GB and TB, each rounded half
/// away from zero once the value is below 20480 of its unit.
fn size_pretty(bytes: i64) -> String {
    let half_rounded = |x: i64| (x + if x < 0 { -1 } else { 1 }) / 2;
    if bytes.unsigned_abs() < 10 * 1024 {
        return format!("{bytes} bytes");
    }
    // Keep one extra bit for rounding.
    let mut size = bytes >> 9;
    for unit in ["kB", "MB", "GB"] {
        if size.unsigned_abs() < 20 * 1024 - 1 {
            return format!("{} {unit}", half_rounded(size));
        }
        size >>= 10;
    }
    format!("{} TB", half_rounded(size))
}

fn int(v: &ScalarValue) -> Option<i64> {
    match v {
        ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s)) => s.trim().parse().ok(),
        v if v.is_null() => None,
        v => v.cast_to(&ArrowType::Int64).ok().and_then(|x| if let ScalarValue::Int64(i) = x { i } else { None }),
    }
}

fn text(v: &ScalarValue) -> Option<String> {
    match v {
        ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => s.clone(),
        v if v.is_null() => None,
        v => Some(v.to_string()),
    }
}

/// A function of `arities` arguments of any type, computed row by row.
fn function(name: &str, arities: &[usize], ret: ArrowType, f: impl Fn(&[ScalarValue]) -> DfResult<ScalarValue> + Send + Sync + 'static) -> ScalarUDF {
    let signatures = arities.iter().map(|&n| if n == 0 { TypeSignature::Nullary } else { TypeSignature::Any(n) }).collect();
    let result_type = ret.clone();
    let implementation = move |args: &[ColumnarValue]| -> DfResult<ColumnarValue> {
        let rows = args.iter().find_map(|a| match a {
            ColumnarValue::Array(x) => Some(x.len()),
            ColumnarValue::Scalar(_) => None,
        });
        let row = |i: usize| {
            args.iter()
                .map(|a| match a {
                    ColumnarValue::Scalar(s) => Ok(s.clone()),
                    ColumnarValue::Array(x) => ScalarValue::try_from_array(x, i),
                })
                .collect::<DfResult<Vec<_>>>()
        };
        match rows {
            None => Ok(ColumnarValue::Scalar(f(&row(0)?)?)),
            Some(0) => Ok(ColumnarValue::Array(datafusion::arrow::array::new_empty_array(&result_type))),
            Some(n) => {
                let values = (0..n).map(|i| f(&row(i)?)).collect::<DfResult<Vec<_>>>()?;
                Ok(ColumnarValue::Array(ScalarValue::iter_to_array(values)?))
            }
        }
    };
    ScalarUDF::from(SimpleScalarUDF::new_with_signature(name, Signature::one_of(signatures, Volatility::Stable), ret, Arc::new(implementation)))
}

/// The fields of `information_schema._pg_expandarray`'s rows: element and position.
fn expanded_fields() -> datafusion::arrow::datatypes::Fields {
    vec![Field::new("x", I8, true), Field::new("n", I8, true)].into()
}

/// `pg_typeof(any)`: the SQL type of its argument, named as PostgreSQL's `regtype` prints it
/// (`integer`, `character varying`, …). The type comes from the argument's field, so a column
/// keeps the type it was declared with (`varchar(n)`, `char(n)`); a bare NULL is `unknown`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct PgTypeof {
    signature: Signature,
}

impl datafusion::logical_expr::ScalarUDFImpl for PgTypeof {
    fn name(&self) -> &str {
        "pg_typeof"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[ArrowType]) -> DfResult<ArrowType> {
        Ok(T)
    }

    fn invoke_with_args(&self, args: datafusion::logical_expr::ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let field = &args.arg_fields[0];
        let name = match field.data_type() {
            ArrowType::Null => "unknown",
            _ => freshet_olap::types::sql_type(field).pg_name(),
        };
        Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(name.to_string()))))
    }
}

fn text_of(s: Option<String>) -> DfResult<ScalarValue> {
    Ok(ScalarValue::Utf8(s))
}

fn functions(engine: &Arc<Engine>) -> Vec<ScalarUDF> {
    let version = format!("PostgreSQL {} on {}-{}, 64-bit", crate::SERVER_VERSION, std::env::consts::ARCH, std::env::consts::OS);
    // A text about the object an OID (the first argument) names, from the current catalog.
    let describe = |name: &str, arities: &[usize], f: fn(&Catalog, i64, &[ScalarValue]) -> Option<String>| {
        let engine = engine.clone();
        function(name, arities, T, move |a| text_of(int(&a[0]).and_then(|oid| f(&engine.catalog(), oid, a))))
    };
    let constant = |name: &str, arities: &[usize], value: ScalarValue| function(name, arities, value.data_type(), move |_| Ok(value.clone()));
    let engine_for_regclass = engine.clone();
    let engine_for_regproc = engine.clone();
    vec![
        function("version", &[0], T, move |_| text_of(Some(version.clone()))),
        function("current_schema", &[0], T, move |_| text_of(Some("public".into()))),
        function("current_database", &[0], T, move |_| text_of(Some(DATABASE.into()))),
        function("current_schemas", &[1], ArrowType::new_list(T, true), |a| {
            let implicit = matches!(a[0], ScalarValue::Boolean(Some(true)));
            let names: Vec<ScalarValue> =
                ["pg_catalog", "public"].iter().filter(|n| implicit || **n == "public").map(|n| ScalarValue::Utf8(Some(n.to_string()))).collect();
            Ok(ScalarValue::List(ScalarValue::new_list_nullable(&names, &T)))
        }),
        function(freshet_olap::rewrite::EXPANDARRAY_FUNCTION, &[1], ArrowType::new_list(ArrowType::Struct(expanded_fields()), true), |a| {
            let elements = match &a[0] {
                ScalarValue::List(list) if !datafusion::arrow::array::Array::is_null(list.as_ref(), 0) => list.value(0),
                _ => return Ok(ScalarValue::List(ScalarValue::new_list_nullable(&[], &ArrowType::Struct(expanded_fields())))),
            };
            let rows = (0..elements.len())
                .map(|k| {
                    let x = int(&ScalarValue::try_from_array(&elements, k)?);
                    let fields = expanded_fields();
                    Ok(ScalarValue::Struct(Arc::new(datafusion::arrow::array::StructArray::try_new(
                        fields,
                        vec![
                            Arc::new(datafusion::arrow::array::Int64Array::from(vec![x])) as _,
                            Arc::new(datafusion::arrow::array::Int64Array::from(vec![k as i64 + 1])) as _,
                        ],
                        None,
                    )?)))
                })
                .collect::<DfResult<Vec<_>>>()?;
            Ok(ScalarValue::List(ScalarValue::new_list_nullable(&rows, &ArrowType::Struct(expanded_fields()))))
        }),
        ScalarUDF::new_from_impl(PgTypeof { signature: Signature::any(1, Volatility::Immutable) }),
        function("pg_get_userbyid", &[1], T, move |a| {
            text_of(int(&a[0]).map(|oid| if oid == ROLE_OID { ROLE.to_string() } else { format!("unknown (OID={oid})") }))
        }),
        function("pg_table_is_visible", &[1], B, |a| Ok(ScalarValue::Boolean(int(&a[0]).map(|_| true)))),
        function("pg_type_is_visible", &[1], B, |a| Ok(ScalarValue::Boolean(int(&a[0]).map(|_| true)))),
        function("pg_relation_is_publishable", &[1], B, |a| Ok(ScalarValue::Boolean(int(&a[0]).map(|_| false)))),
        function("format_type", &[2], T, move |a| text_of(int(&a[0]).map(|oid| format_type(oid, int(&a[1]))))),
        describe("pg_get_indexdef", &[1, 3], |c, oid, a| index_definition(c, oid, a.get(1).and_then(int).unwrap_or(0))),
        describe("pg_get_constraintdef", &[1, 2], |c, oid, _| constraint_definition(c, oid)),
        describe("pg_get_viewdef", &[1, 2], |c, oid, _| view_definition(c, oid)),
        function("pg_get_expr", &[2, 3], T, |a| text_of(text(&a[0]))),
        function("pg_encoding_to_char", &[1], T, |a| text_of(int(&a[0]).map(|e| if e == UTF8_ENCODING as i64 { "UTF8".into() } else { String::new() }))),
        // Comments of tables and columns; no extended statistics or triggers.
        describe("obj_description", &[1, 2], |c, oid, _| table_of(c, oid).and_then(|t| t.comment(None)).map(str::to_string)),
        describe("col_description", &[2], |c, oid, a| {
            let table = table_of(c, oid)?;
            let column = table.columns.get(usize::try_from(a.get(1).and_then(int)?.checked_sub(1)?).ok()?)?;
            table.comment(Some(&column.name)).map(str::to_string)
        }),
        constant("shobj_description", &[2], ScalarValue::Utf8(None)),
        constant("pg_get_statisticsobjdef_columns", &[1], ScalarValue::Utf8(None)),
        constant("pg_get_triggerdef", &[1, 2], ScalarValue::Utf8(None)),
        describe("pg_get_function_result", &[1], |c, oid, _| procedure_of(c, oid).and_then(|p| crate::procedure::result_type(&p.routine))),
        describe("pg_get_function_arguments", &[1], |c, oid, _| procedure_of(c, oid).map(|p| crate::procedure::argument_list(&p.routine))),
        describe("pg_get_function_identity_arguments", &[1], |c, oid, _| procedure_of(c, oid).map(|p| crate::procedure::identity_arguments(&p.routine))),
        describe("pg_get_functiondef", &[1], |c, oid, _| procedure_of(c, oid).map(|p| crate::procedure::definition(&p.routine))),
        // No routine has an SQL-standard body (`BEGIN ATOMIC`): prosrc holds every body.
        function("pg_get_function_sqlbody", &[1], T, |_| text_of(None)),
        constant("pg_is_in_recovery", &[0], ScalarValue::Boolean(Some(false))),
        // One role, a superuser: every privilege is held.
        constant("has_table_privilege", &[2, 3], ScalarValue::Boolean(Some(true))),
        constant("has_schema_privilege", &[2, 3], ScalarValue::Boolean(Some(true))),
        constant("has_database_privilege", &[2, 3], ScalarValue::Boolean(Some(true))),
        constant("has_column_privilege", &[3, 4], ScalarValue::Boolean(Some(true))),
        constant("has_function_privilege", &[2, 3], ScalarValue::Boolean(Some(true))),
        {
            // The sequence a column's default takes its values from (SERIAL, identity,
            // nextval), as `public.name` (quoted where needed); NULL for any other column or
            // an unknown table.
            let engine = engine.clone();
            function("pg_get_serial_sequence", &[2], T, move |a| {
                let catalog = engine.catalog();
                let (Some(table), Some(column)) = (text(&a[0]), text(&a[1])) else { return text_of(None) };
                let table = freshet_core::sql::ddl::sequence_name(&table).ok();
                let def = table.as_deref().and_then(|t| catalog.table(t));
                // The column's name as written: PostgreSQL does not fold it.
                let sequence = def.and_then(|d| d.columns.iter().find(|c| c.name == column)).and_then(|c| c.default.as_ref()?.sequence());
                text_of(sequence.map(freshet_core::sql::names::qualified_sequence))
            })
        },
        function("pg_function_is_visible", &[1], B, |a| Ok(ScalarValue::Boolean(int(&a[0]).map(|_| true)))),
        function("pg_size_pretty", &[1], T, |a| text_of(int(&a[0]).map(size_pretty))),
        // Freshet does not report relation sizes yet: unknown.
        constant("pg_table_size", &[1], ScalarValue::Int64(None)),
        constant("pg_relation_size", &[1, 2], ScalarValue::Int64(None)),
        constant("pg_total_relation_size", &[1], ScalarValue::Int64(None)),
        constant("pg_indexes_size", &[1], ScalarValue::Int64(None)),
        // A relation and its partition ancestors; Freshet's tables have none.
        function("pg_partition_ancestors", &[1], I8, |a| Ok(ScalarValue::Int64(int(&a[0])))),
        function(freshet_olap::rewrite::REGPROC_FUNCTION, &[1], I8, move |a| {
            Ok(ScalarValue::Int64(match text(&a[0]) {
                Some(name) => Some(regproc(&engine_for_regproc.catalog(), &name)?),
                None => None,
            }))
        }),
        function(freshet_olap::rewrite::REGCLASS_FUNCTION, &[1], I8, move |a| {
            Ok(ScalarValue::Int64(match text(&a[0]) {
                Some(name) => Some(regclass(&engine_for_regclass.catalog(), &name)?),
                None => None,
            }))
        }),
        function(freshet_olap::rewrite::REGTYPE_FUNCTION, &[1], I8, |a| {
            Ok(ScalarValue::Int64(match text(&a[0]) {
                Some(name) => Some(regtype(&name)?),
                None => None,
            }))
        }),
        describe(freshet_olap::rewrite::REGCLASS_NAME_FUNCTION, &[1], |catalog, oid, _| Some(relation_name(catalog, oid))),
        function(freshet_olap::rewrite::REGTYPE_NAME_FUNCTION, &[1], T, |a| text_of(int(&a[0]).map(type_name))),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_carry_their_modifiers() {
        assert_eq!(format_type(1700, Some(((6 << 16) | 2) + 4)), "numeric(6,2)");
        assert_eq!(format_type(1043, Some(24)), "character varying(20)");
        assert_eq!(format_type(1043, Some(-1)), "character varying");
        assert_eq!(format_type(1042, Some(5)), "character(1)");
        assert_eq!(format_type(1042, None), "character");
        assert_eq!(format_type(1042, Some(-1)), "bpchar");
        assert_eq!(format_type(23, Some(-1)), "integer");
        assert_eq!(format_type(1114, None), "timestamp without time zone");
        assert_eq!(format_type(99999, None), "???");
    }

    #[test]
    fn sizes_print_as_postgresql_prints_them() {
        assert_eq!(size_pretty(0), "0 bytes");
        assert_eq!(size_pretty(10239), "10239 bytes");
        assert_eq!(size_pretty(10240), "10 kB");
        assert_eq!(size_pretty(1_500_000), "1465 kB");
        assert_eq!(size_pretty(25_000_000), "24 MB");
        assert_eq!(size_pretty(30_000_000_000), "28 GB");
        assert_eq!(size_pretty(-20_000), "-20 kB");
        assert_eq!(size_pretty(i64::MIN), "-8388608 TB");
        assert_eq!(size_pretty(i64::MAX), "8388608 TB");
    }

    #[test]
    fn every_relation_has_rows_as_wide_as_its_columns_at_most() {
        let store = freshet_core::catalog::CatalogStore::new();
        let default = Some(ColumnDefault::Value(freshet_core::types::Value::Int32(7)));
        let column = |name: &str, ty| freshet_core::catalog::ColumnDef { nullable: false, default: default.clone(), ..freshet_core::catalog::ColumnDef::new(name, ty) };
        let index = freshet_core::catalog::IndexDef { name: "t_pkey".into(), columns: vec![0], unique: true, primary: true };
        let table = TableDef { id: 3, name: "t".into(), columns: vec![column("a", DataType::Int32)], indexes: vec![index], partition_key: None, sequences: Vec::new(), checks: Vec::new(), comments: vec![(None, "a table".into())] };
        store.put_table(Arc::new(table));
        let view = ViewDef { id: 4, name: "v".into(), columns: vec![("a".into(), DataType::Int32)], query: "SELECT a FROM t".into(), depends_on: vec!["t".into()] };
        store.put_view(Arc::new(view));
        let catalog = store.current();
        for (name, columns) in RELATIONS {
            let rows = rows(name, &catalog);
            assert_eq!(rows.is_empty(), EMPTY.contains(name) || *name == "pg_proc", "{name}");
            for row in rows {
                assert!(row.len() <= columns.len(), "{name}: a row of {} values for {} columns", row.len(), columns.len());
            }
        }
    }
}
