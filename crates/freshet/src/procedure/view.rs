//! `freshet_procedures`: the stored procedures and functions, with their classification, and
//! the native procedures registered in this process; for each, how often it was called since the
//! database opened, and how many of those calls ran as one executor job.

use std::collections::HashMap;
use std::sync::Arc;

use freshet_core::engine::Engine;
use freshet_core::sql::plpgsql;
use freshet_olap::datafusion;
use freshet_olap::datafusion::arrow::array::{ArrayRef, Int64Array, StringArray};
use freshet_olap::datafusion::arrow::datatypes::{DataType as ArrowType, Field, Schema, SchemaRef};
use freshet_olap::datafusion::arrow::record_batch::RecordBatch;
use freshet_olap::provider::SystemTable;
use parking_lot::RwLock;

use super::NativeProcedure;

/// The natives of a database, shared between it and its `freshet_procedures` view.
pub(crate) type Natives = Arc<RwLock<HashMap<String, Arc<NativeProcedure>>>>;

/// Per procedure name (stored or native): outermost calls since the database opened, and how
/// many of them ran as one executor job (those that failed there included).
pub(crate) type CallCounts = Arc<parking_lot::Mutex<hashbrown::HashMap<String, (u64, u64)>>>;

#[derive(Debug)]
pub(crate) struct ProceduresView {
    pub engine: Arc<Engine>,
    pub natives: Natives,
    pub call_counts: CallCounts,
}

impl SystemTable for ProceduresView {
    fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("name", ArrowType::Utf8, false),
            Field::new("kind", ArrowType::Utf8, false),
            Field::new("arguments", ArrowType::Utf8, false),
            Field::new("returns", ArrowType::Utf8, true),
            Field::new("partitioning", ArrowType::Utf8, true),
            Field::new("calls", ArrowType::Int64, false),
            Field::new("calls_in_one_job", ArrowType::Int64, false),
        ]))
    }

    fn batch(&self) -> datafusion::error::Result<RecordBatch> {
        let catalog = self.engine.catalog();
        let mut rows: Vec<[Option<String>; 5]> = Vec::new();
        // What each row's calls are counted by: a routine's name and input types, a native
        // procedure's name.
        let mut keys: Vec<String> = Vec::new();
        let call_counts = self.call_counts.lock().clone();
        let counts_of = |name: &str| call_counts.get(name).copied().unwrap_or((0, 0));
        for def in catalog.procedures() {
            let r = &def.routine;
            let arguments = argument_list(r);
            let partitioning = match plpgsql::classify(r, &catalog) {
                plpgsql::Classification::Constrained { parameter: Some(p) } => format!("constrained on {p}"),
                plpgsql::Classification::Constrained { parameter: None } => "constrained".to_string(),
                plpgsql::Classification::Crossing { reason } => format!("crossing: {reason}"),
            };
            let returns = result_type(r);
            rows.push([Some(r.name.clone()), Some(r.kind().to_string()), Some(arguments), returns, Some(partitioning)]);
            keys.push(r.identity.clone());
        }
        let mut natives: Vec<Arc<NativeProcedure>> = self.natives.read().values().filter(|n| !catalog.has_routine(&n.name)).cloned().collect();
        natives.sort_by(|a, b| a.name.cmp(&b.name));
        for n in natives {
            // Declared parameter types (none shown when undeclared) and the argument that
            // names the partition, counted from 1 as `$n`.
            let arguments = n.params.as_ref().map(|p| p.iter().map(|t| t.pg_name()).collect::<Vec<_>>().join(", ")).unwrap_or_default();
            let partitioning = n.home.map(|h| format!("on argument ${}", h + 1));
            rows.push([Some(n.name.clone()), Some("native".into()), Some(arguments), None, partitioning]);
            keys.push(n.name.clone());
        }
        let counts: Vec<(u64, u64)> = keys.iter().map(|k| counts_of(k)).collect();
        let mut columns: Vec<ArrayRef> = (0..5).map(|i| Arc::new(StringArray::from(rows.iter().map(|r| r[i].clone()).collect::<Vec<_>>())) as ArrayRef).collect();
        columns.push(Arc::new(Int64Array::from_iter_values(counts.iter().map(|c| c.0 as i64))));
        columns.push(Arc::new(Int64Array::from_iter_values(counts.iter().map(|c| c.1 as i64))));
        Ok(RecordBatch::try_new(self.schema(), columns)?)
    }
}

/// A routine's parameters as PostgreSQL lists them: `a integer, b bigint[] DEFAULT NULL`.
pub(crate) fn argument_list(r: &plpgsql::Routine) -> String {
    arguments(r, true)
}

/// [`argument_list`] without defaults, as `pg_get_function_identity_arguments` shows them.
pub(crate) fn identity_arguments(r: &plpgsql::Routine) -> String {
    arguments(r, false)
}

fn arguments(r: &plpgsql::Routine, defaults: bool) -> String {
    let out = |n: &String| r.outs.iter().any(|(o, _)| o == n);
    let last = r.params.len().wrapping_sub(1);
    let inputs = r.params.iter().zip(&r.defaults).zip(&r.out_only).enumerate().map(|(i, (((n, t), default), out_only))| {
        // A procedure's input parameters are marked IN, as PostgreSQL marks them (its DROP
        // PROCEDURE syntax would otherwise be ambiguous).
        let mode = match (out(n), *out_only) {
            _ if r.variadic && i == last => "VARIADIC ",
            (false, _) if r.function => "",
            (false, _) => "IN ",
            (true, true) => "OUT ",
            (true, false) => "INOUT ",
        };
        // A parameter without a name is `$n` to the body and shows as its type alone.
        let named = if n.starts_with('$') { String::new() } else { format!("{n} ") };
        match default.as_ref().filter(|_| defaults) {
            Some(d) => format!("{mode}{named}{} DEFAULT {d}", t.name()),
            None => format!("{mode}{named}{}", t.name()),
        }
    });
    let outputs = r.outs.iter().filter(|(n, _)| !r.params.iter().any(|(p, _)| p == n)).map(|(n, t)| format!("OUT {n} {}", t.pg_name()));
    inputs.chain(outputs).collect::<Vec<_>>().join(", ")
}

/// A function's result type as PostgreSQL shows it (`integer`, `SETOF bigint`,
/// `TABLE(a integer, b text)`); none for a procedure.
pub(crate) fn result_type(r: &plpgsql::Routine) -> Option<String> {
    match &r.set {
        Some(set) if set.single => r.function.then(|| "record".to_string()),
        Some(set) if let Some(table) = &set.relation => Some(format!("SETOF {table}")),
        Some(set) if set.table => {
            let columns: Vec<String> = set.columns.iter().map(|(n, t)| format!("{n} {}", t.pg_name())).collect();
            Some(format!("TABLE({})", columns.join(", ")))
        }
        Some(set) => Some(format!("SETOF {}", set.columns[0].1.pg_name())),
        None if r.function => Some(r.returns.map_or_else(|| "void".to_string(), |t| t.name())),
        None => None,
    }
}

/// The body of a routine (the text between its dollar quotes, or a LANGUAGE sql routine's
/// standard body), as `pg_proc.prosrc` holds it.
pub(crate) fn body(r: &plpgsql::Routine) -> String {
    plpgsql::parser::parse_header(&r.source).map(|h| h.sql.unwrap_or(h.body)).unwrap_or_else(|_| r.source.clone())
}

/// Whether a routine is written in LANGUAGE sql (it runs as the PL/pgSQL body that does the
/// same, `plpgsql::parser::sql_as_plpgsql`).
pub(crate) fn in_sql(r: &plpgsql::Routine) -> bool {
    plpgsql::parser::parse_header(&r.source).is_ok_and(|h| h.sql.is_some())
}

/// `pg_get_functiondef`: the routine as PostgreSQL writes it back (what psql's `\sf` shows).
pub(crate) fn definition(r: &plpgsql::Routine) -> String {
    let kind = if r.function { "function" } else { "procedure" };
    let returns = result_type(r).map(|t| format!(" RETURNS {t}\n")).unwrap_or_default();
    let name = freshet_core::sql::names::quote_ident(&r.name);
    let body = body(r);
    let standard = in_sql(r) && (body.starts_with("RETURN ") || body.starts_with("BEGIN ATOMIC"));
    let (language, code) = match (in_sql(r), standard) {
        (true, true) => ("sql", format!("{body}\n")),
        (true, false) => ("sql", format!("AS ${kind}${body}${kind}$\n")),
        (false, _) => ("plpgsql", format!("AS ${kind}${body}${kind}$\n")),
    };
    format!("CREATE OR REPLACE {} public.{name}({})\n{returns} LANGUAGE {language}\n{code}", kind.to_uppercase(), argument_list(r))
}
