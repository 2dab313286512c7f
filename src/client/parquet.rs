//! Parquet files from Arrow record batches (snappy-compressed), written whole or not at all:
//! into a temporary file beside the target, renamed into place once complete.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use super::error::{Error, Result};

fn io(path: &Path, what: &str, e: impl std::fmt::Display) -> Error {
    Error::Io(format!("cannot {what} `{}`: {e}", path.display()))
}

/// The temporary file a write goes to before it is renamed to `path`.
fn partial(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.partial", std::process::id()));
    path.with_file_name(name)
}

/// Writes `batches` (of `schema`) to the Parquet file `path`; returns the rows written. On any
/// error nothing is left at `path` (an older file there stays as it was).
pub fn write(
    path: &Path,
    schema: SchemaRef,
    batches: impl IntoIterator<Item = Result<RecordBatch>>,
) -> Result<u64> {
    write_checked(path, schema, batches, || Ok(()))
}

/// As [`write`], asking `commit` once every batch is written, before the file is moved into
/// place: an error there (an interrupt that ended the source early) leaves nothing behind.
pub fn write_checked(
    path: &Path,
    schema: SchemaRef,
    batches: impl IntoIterator<Item = Result<RecordBatch>>,
    commit: impl FnOnce() -> Result<()>,
) -> Result<u64> {
    let tmp = partial(path);
    let result = (|| {
        let file = File::create(&tmp).map_err(|e| io(&tmp, "create", e))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build();
        let mut writer = ArrowWriter::try_new(file, schema, Some(props))
            .map_err(|e| io(path, "write Parquet to", e))?;
        let mut rows = 0u64;
        for batch in batches {
            let batch = batch?;
            rows += batch.num_rows() as u64;
            writer
                .write(&batch)
                .map_err(|e| io(path, "write Parquet to", e))?;
        }
        let file = writer
            .into_inner()
            .map_err(|e| io(path, "finish the Parquet file", e))?;
        file.sync_all().map_err(|e| io(&tmp, "flush", e))?;
        commit()?;
        std::fs::rename(&tmp, path).map_err(|e| io(path, "move the finished file to", e))?;
        Ok(rows)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::arrow::Layout;

    #[test]
    fn writes_whole_or_nothing() {
        let dir = std::env::temp_dir().join(format!("surveillance-parquet-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("events.parquet");
        let layout = Layout::events();
        let event = r#"{"id":"e1","startTime":"2026-01-05T09:15:23.123-05:00","details":{"duration_sec":3}}"#;
        let batch = layout.batch([event].into_iter()).expect("batch");
        let rows = write(&path, layout.schema(), [Ok(batch.clone()), Ok(batch)]).expect("write");
        assert_eq!(rows, 2);
        let bytes = std::fs::read(&path).expect("read");
        assert!(bytes.starts_with(b"PAR1") && bytes.ends_with(b"PAR1"));
        // A failing source leaves the finished file as it was, and no partial file.
        let failed = write(&path, layout.schema(), [Err(Error::Data("boom".into()))]);
        assert!(failed.is_err());
        assert_eq!(std::fs::read(&path).expect("still there"), bytes);
        assert!(!partial(&path).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
