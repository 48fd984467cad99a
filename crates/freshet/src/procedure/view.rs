//! `freshet_procedures`: the stored procedures and functions, with their classification, and
//! the native procedures registered in this process.

use std::collections::HashMap;
use std::sync::Arc;

use freshet_core::engine::Engine;
use freshet_core::sql::plpgsql;
use freshet_olap::datafusion;
use freshet_olap::datafusion::arrow::array::{ArrayRef, StringArray};
use freshet_olap::datafusion::arrow::datatypes::{DataType as ArrowType, Field, Schema, SchemaRef};
use freshet_olap::datafusion::arrow::record_batch::RecordBatch;
use freshet_olap::provider::SystemTable;
use parking_lot::RwLock;

use super::NativeProcedure;

/// The natives of a database, shared between it and its `freshet_procedures` view.
pub(crate) type Natives = Arc<RwLock<HashMap<String, Arc<NativeProcedure>>>>;

#[derive(Debug)]
pub(crate) struct ProceduresView {
    pub engine: Arc<Engine>,
    pub natives: Natives,
}

impl SystemTable for ProceduresView {
    fn schema(&self) -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("name", ArrowType::Utf8, false),
            Field::new("kind", ArrowType::Utf8, false),
            Field::new("arguments", ArrowType::Utf8, false),
            Field::new("returns", ArrowType::Utf8, true),
            Field::new("partitioning", ArrowType::Utf8, true),
        ]))
    }

    fn batch(&self) -> datafusion::error::Result<RecordBatch> {
        let catalog = self.engine.catalog();
        let mut rows: Vec<[Option<String>; 5]> = Vec::new();
        for def in catalog.procedures() {
            let r = &def.routine;
            let arguments = r.params.iter().map(|(n, t)| format!("{n} {}", t.name())).collect::<Vec<_>>().join(", ");
            let partitioning = match plpgsql::classify(r, &catalog) {
                plpgsql::Classification::Constrained { parameter: Some(p) } => format!("constrained on {p}"),
                plpgsql::Classification::Constrained { parameter: None } => "constrained".to_string(),
                plpgsql::Classification::Crossing { reason } => format!("crossing: {reason}"),
            };
            rows.push([Some(r.name.clone()), Some(r.kind().to_string()), Some(arguments), r.returns.map(|t| t.name()), Some(partitioning)]);
        }
        let mut natives: Vec<String> = self.natives.read().keys().filter(|n| catalog.procedure(n).is_none()).cloned().collect();
        natives.sort();
        for n in natives {
            rows.push([Some(n), Some("native".into()), Some(String::new()), None, None]);
        }
        let columns: Vec<ArrayRef> = (0..5).map(|i| Arc::new(StringArray::from(rows.iter().map(|r| r[i].clone()).collect::<Vec<_>>())) as ArrayRef).collect();
        Ok(RecordBatch::try_new(self.schema(), columns)?)
    }
}
