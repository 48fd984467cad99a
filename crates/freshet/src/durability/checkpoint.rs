//! Checkpoints: a transaction-consistent image of the database, written while transactions go
//! on, in Arrow IPC files that other tools read (pyarrow, DuckDB, Polars).
//!
//! LAYOUT. `checkpoints/<lsn as 16 hex digits>/` holds, for every partition and table,
//! `t<table id>-p<partition>.arrow` (the table's columns plus `freshet_row_id`, the row's slot,
//! so that replay finds the rows later log records name); `catalog.bin` (the table definitions
//! in the redo record encoding); `procedures.bin` (the CREATE statements of the stored
//! procedures, length-prefixed, only when there are some); `views.bin` (the view definitions in
//! the redo record encoding, only when there are some); and `manifest` (the LSN, the newest commit timestamp, the
//! partition count, and every file's length and CRC-32C, itself closed by its own CRC).
//!
//! ATOMICITY. Files are written under `<lsn>.tmp/`, each made durable, then the directory is
//! renamed and the parent synced: a checkpoint either exists whole or not at all. A checkpoint
//! whose manifest or files fail their checksums is skipped at recovery in favour of the
//! previous one, which is why the previous checkpoint and the log since it are kept.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use freshet_core::catalog::{TableDef, ViewDef};
use freshet_core::engine::CheckpointImage;
use freshet_core::storage::{RowId, TableSnapshot};
use freshet_core::types::Value;
use freshet_core::wal::record::{decode_table, encode_table, Reader};
use freshet_core::wal::{Fs, Lsn};
use freshet_core::{Error, Result, SqlState};
use freshet_olap::datafusion::arrow::array::{Array, ArrayRef, UInt64Array};
use freshet_olap::datafusion::arrow::compute::filter_record_batch;
use freshet_olap::datafusion::arrow::datatypes::{DataType as ArrowType, Field, Schema};
use freshet_olap::datafusion::arrow::ipc::reader::FileReader;
use freshet_olap::datafusion::arrow::ipc::writer::FileWriter;
use freshet_olap::datafusion::arrow::record_batch::RecordBatch;
use freshet_olap::scan::segment_array;
use freshet_olap::types::arrow_type;
use freshet_olap::values::value_at;

pub const ROW_ID_COLUMN: &str = "freshet_row_id";

fn io(e: impl std::fmt::Display) -> Error {
    Error::new(SqlState::IoError, format!("checkpoint: {e}"))
}

/// The directory of the checkpoint at `lsn`.
pub fn checkpoint_dir(root: &Path, lsn: Lsn) -> PathBuf {
    root.join(format!("{lsn:016x}"))
}

/// What a written checkpoint holds.
#[derive(Debug, Clone)]
pub struct CheckpointInfo {
    pub lsn: Lsn,
    pub ts: u64,
    pub bytes: u64,
    pub rows: u64,
}

/// Writes `image` as the checkpoint at `lsn` under `root`.
pub fn write(fs: &dyn Fs, root: &Path, image: &CheckpointImage, lsn: Lsn) -> Result<CheckpointInfo> {
    let tmp = root.join(format!("{lsn:016x}.tmp"));
    let _ = fs.remove_dir_all(&tmp);
    fs.create_dir_all(&tmp).map_err(io)?;
    let mut manifest = format!("freshet-checkpoint 1\nlsn {lsn}\nts {}\npartitions {}\n", image.ts, image.partitions.len());
    let mut total = 0u64;
    let mut rows = 0u64;
    let mut catalog = Vec::new();
    let defs: Vec<&Arc<TableDef>> = image.tables.iter().collect();
    for def in &defs {
        encode_table(def, &mut catalog);
    }
    add_file(fs, &tmp, "catalog.bin", &catalog, &mut manifest, &mut total)?;
    if !image.procedures.is_empty() {
        let mut procedures = Vec::new();
        for source in &image.procedures {
            freshet_core::wal::record::put_str(&mut procedures, source);
        }
        add_file(fs, &tmp, "procedures.bin", &procedures, &mut manifest, &mut total)?;
    }
    if !image.views.is_empty() {
        let mut views = Vec::new();
        for view in &image.views {
            freshet_core::wal::record::encode_view(view, &mut views);
        }
        add_file(fs, &tmp, "views.bin", &views, &mut manifest, &mut total)?;
    }
    if !image.sequence_values.is_empty() {
        // The sequences of their own, then every sequence's logged position.
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&(image.sequences.len() as u32).to_le_bytes());
        for s in &image.sequences {
            freshet_core::wal::record::encode_sequence(s, &mut bytes);
        }
        for (id, last, called) in &image.sequence_values {
            bytes.extend_from_slice(&id.to_le_bytes());
            bytes.extend_from_slice(&last.to_le_bytes());
            bytes.push(*called as u8);
        }
        add_file(fs, &tmp, "sequences.bin", &bytes, &mut manifest, &mut total)?;
    }
    for (p, tables) in image.partitions.iter().enumerate() {
        for snapshot in tables {
            let (bytes, n) = table_file(snapshot)?;
            rows += n;
            add_file(fs, &tmp, &format!("t{}-p{p}.arrow", snapshot.def.id), &bytes, &mut manifest, &mut total)?;
        }
    }
    let crc = crc32c::crc32c(manifest.as_bytes());
    manifest.push_str(&format!("crc {crc}\n"));
    fs.write_file(&tmp.join("manifest"), manifest.as_bytes()).map_err(io)?;
    fs.sync_dir(&tmp).map_err(io)?;
    let dir = checkpoint_dir(root, lsn);
    let _ = fs.remove_dir_all(&dir);
    fs.rename(&tmp, &dir).map_err(io)?;
    fs.sync_dir(root).map_err(io)?;
    Ok(CheckpointInfo { lsn, ts: image.ts, bytes: total, rows })
}

fn add_file(fs: &dyn Fs, dir: &Path, name: &str, bytes: &[u8], manifest: &mut String, total: &mut u64) -> Result<()> {
    fs.write_file(&dir.join(name), bytes).map_err(io)?;
    manifest.push_str(&format!("file {name} {} {}\n", bytes.len(), crc32c::crc32c(bytes)));
    *total += bytes.len() as u64;
    Ok(())
}

/// A table partition as an Arrow IPC file: its live rows and their row ids.
fn table_file(snapshot: &TableSnapshot) -> Result<(Vec<u8>, u64)> {
    let def = &snapshot.def;
    let types = def.types();
    let mut fields: Vec<Field> = def.columns.iter().map(|c| Field::new(&c.name, arrow_type(c.ty), true)).collect();
    fields.push(Field::new(ROW_ID_COLUMN, ArrowType::UInt64, false));
    let schema = Arc::new(Schema::new(fields));
    let mut buf = Vec::new();
    let mut rows = 0u64;
    {
        let mut writer = FileWriter::try_new(&mut buf, &schema).map_err(io)?;
        for (ci, chunk) in snapshot.chunks.iter().enumerate() {
            if chunk.live == 0 {
                continue;
            }
            let mut columns: Vec<ArrayRef> =
                chunk.columns.iter().zip(&types).map(|(seg, ty)| segment_array(seg, *ty, chunk.len)).collect();
            columns.push(Arc::new(UInt64Array::from_iter_values((0..chunk.len).map(|s| RowId::new(ci, s).0))));
            let batch = RecordBatch::try_new(schema.clone(), columns).map_err(io)?;
            let batch = match &chunk.deleted {
                Some(deleted) if chunk.live < chunk.len => {
                    let keep: freshet_olap::datafusion::arrow::array::BooleanArray =
                        (0..chunk.len).map(|i| Some(!deleted.get(i))).collect();
                    filter_record_batch(&batch, &keep).map_err(io)?
                }
                _ => batch,
            };
            rows += batch.num_rows() as u64;
            writer.write(&batch).map_err(io)?;
        }
        writer.finish().map_err(io)?;
    }
    Ok((buf, rows))
}

/// A checkpoint found on disk and verified.
pub struct Loaded {
    pub lsn: Lsn,
    pub ts: u64,
    pub partitions: usize,
    pub dir: PathBuf,
    pub tables: Vec<TableDef>,
    /// (file name, partition, table id)
    pub files: Vec<(String, usize, u32)>,
    /// The CREATE statements of stored procedures (`procedures.bin`, absent when none).
    pub procedures: Vec<String>,
    /// The views (`views.bin`, absent when none).
    pub views: Vec<ViewDef>,
    /// The sequences of their own and every sequence's logged position (`sequences.bin`,
    /// absent when there are no sequences).
    pub sequences: Vec<freshet_core::sequence::SequenceDef>,
    pub sequence_values: Vec<(u32, i64, bool)>,
}

/// The checkpoints under `root`, newest first: (lsn, directory).
pub fn list(fs: &dyn Fs, root: &Path) -> Result<Vec<(Lsn, PathBuf)>> {
    let entries = match fs.list(root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(e)),
    };
    let mut out: Vec<(Lsn, PathBuf)> = entries
        .into_iter()
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?;
            if name.len() != 16 {
                return None;
            }
            Some((Lsn::from_str_radix(name, 16).ok()?, p))
        })
        .collect();
    out.sort_by_key(|c| std::cmp::Reverse(c.0));
    Ok(out)
}

/// Reads and verifies the checkpoint in `dir`: the manifest's own checksum and every file's.
pub fn verify(fs: &dyn Fs, dir: &Path) -> Result<Loaded> {
    let bad = |what: String| Error::new(SqlState::Internal, format!("checkpoint {} is damaged: {what}", dir.display()));
    let text = String::from_utf8(fs.read(&dir.join("manifest")).map_err(io)?).map_err(|_| bad("manifest is not text".into()))?;
    let (body, crc_line) = text.trim_end().rsplit_once('\n').ok_or_else(|| bad("manifest is truncated".into()))?;
    let body = format!("{body}\n");
    let expected: u32 = crc_line.strip_prefix("crc ").and_then(|c| c.parse().ok()).ok_or_else(|| bad("manifest has no checksum".into()))?;
    if crc32c::crc32c(body.as_bytes()) != expected {
        return Err(bad("manifest checksum mismatch".into()));
    }
    let mut loaded = Loaded { lsn: 0, ts: 0, partitions: 0, dir: dir.to_path_buf(), tables: Vec::new(), files: Vec::new(), procedures: Vec::new(), views: Vec::new(), sequences: Vec::new(), sequence_values: Vec::new() };
    for line in body.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        match parts.as_slice() {
            ["lsn", v] => loaded.lsn = v.parse().map_err(|_| bad(line.into()))?,
            ["ts", v] => loaded.ts = v.parse().map_err(|_| bad(line.into()))?,
            ["partitions", v] => loaded.partitions = v.parse().map_err(|_| bad(line.into()))?,
            ["file", name, len, crc] => {
                let bytes = fs.read(&dir.join(name)).map_err(io)?;
                if bytes.len().to_string() != *len || crc32c::crc32c(&bytes).to_string() != *crc {
                    return Err(bad(format!("{name} does not match its checksum")));
                }
                if *name == "procedures.bin" {
                    let mut r = Reader { bytes: &bytes, pos: 0 };
                    while r.pos < bytes.len() {
                        loaded.procedures.push(r.string()?);
                    }
                } else if *name == "views.bin" {
                    let mut r = Reader { bytes: &bytes, pos: 0 };
                    while r.pos < bytes.len() {
                        loaded.views.push(freshet_core::wal::record::decode_view(&mut r)?);
                    }
                } else if *name == "sequences.bin" {
                    let mut r = Reader { bytes: &bytes, pos: 0 };
                    for _ in 0..r.u32()? {
                        loaded.sequences.push(freshet_core::wal::record::decode_sequence(&mut r)?);
                    }
                    while r.pos < bytes.len() {
                        loaded.sequence_values.push((r.u32()?, r.u64()? as i64, r.u8()? != 0));
                    }
                } else if *name == "catalog.bin" {
                    let mut r = Reader { bytes: &bytes, pos: 0 };
                    while r.pos < bytes.len() {
                        loaded.tables.push(decode_table(&mut r)?);
                    }
                } else if let Some((t, p)) = name.strip_prefix('t').and_then(|n| n.strip_suffix(".arrow")).and_then(|n| n.split_once("-p")) {
                    let (t, p) = (t.parse().map_err(|_| bad(line.into()))?, p.parse().map_err(|_| bad(line.into()))?);
                    loaded.files.push((name.to_string(), p, t));
                }
            }
            _ => {}
        }
    }
    Ok(loaded)
}

/// Calls `f` with batches of (row id, values) of one table file.
pub fn read_rows(fs: &dyn Fs, path: &Path, def: &TableDef, f: &mut dyn FnMut(Vec<(RowId, Vec<Value>)>) -> Result<()>) -> Result<u64> {
    let bytes = fs.read(path).map_err(io)?;
    let reader = FileReader::try_new(std::io::Cursor::new(bytes), None).map_err(io)?;
    let types = def.types();
    let mut total = 0;
    for batch in reader {
        let batch = batch.map_err(io)?;
        let ids = batch
            .column_by_name(ROW_ID_COLUMN)
            .and_then(|c| c.as_any().downcast_ref::<UInt64Array>().cloned())
            .ok_or_else(|| io("a table file lacks its row ids"))?;
        let mut rows = Vec::with_capacity(batch.num_rows());
        for i in 0..batch.num_rows() {
            let values = types.iter().enumerate().map(|(c, ty)| value_at(batch.column(c), i, *ty)).collect::<Vec<_>>();
            let values = values.into_iter().zip(&types).map(|(v, ty)| v.cast(*ty)).collect::<Result<Vec<_>>>()?;
            rows.push((RowId(ids.value(i)), values));
        }
        total += rows.len() as u64;
        f(rows)?;
    }
    Ok(total)
}
