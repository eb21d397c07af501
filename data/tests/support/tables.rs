//! Writes voting tables with the Parquet writer directly (valid or hostile: duplicate
//! votes, long terms, any encoding), for the loader's tests and the `hostile_tables`
//! example. Not every user calls every function.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use arrow_array::{Float32Array, RecordBatch, StringArray, UInt16Array};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

/// How to write a table.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// Dictionary-encode the columns (the writer's default).
    pub dictionary: bool,
    /// Rows per row group.
    pub row_group_rows: usize,
}

impl Default for Layout {
    fn default() -> Self {
        Layout {
            dictionary: true,
            row_group_rows: 1 << 20,
        }
    }
}

/// Parquet bytes of `rows` rows: `term(i)` votes for replica `i % 4` with weight 1; R = 4.
pub fn table_bytes(rows: usize, term: impl Fn(usize) -> String, layout: Layout) -> Vec<u8> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("term", DataType::Utf8, false),
        Field::new("replica", DataType::UInt16, false),
        Field::new("weight", DataType::Float32, false),
    ]));
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_dictionary_enabled(layout.dictionary)
        .set_max_row_group_row_count(Some(layout.row_group_rows))
        .set_key_value_metadata(Some(vec![KeyValue::new(
            "ballot.replicas".to_owned(),
            "4".to_owned(),
        )]))
        .build();
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, schema.clone(), Some(props)).expect("writer");
    let mut start = 0;
    while start < rows {
        let end = (start + 65_536).min(rows);
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from_iter_values((start..end).map(&term))),
                Arc::new(UInt16Array::from_iter_values(
                    (start..end).map(|i| (i % 4) as u16),
                )),
                Arc::new(Float32Array::from_iter_values((start..end).map(|_| 1.0))),
            ],
        )
        .expect("batch");
        w.write(&batch).expect("write");
        start = end;
    }
    w.close().expect("close");
    out
}

/// Writes [`table_bytes`] to `path`.
pub fn write_table(path: &Path, rows: usize, term: impl Fn(usize) -> String, layout: Layout) {
    std::fs::write(path, table_bytes(rows, term, layout)).expect("write table");
}

/// Parquet bytes of `rows` rows all holding `term` (replica `i % 4`, weight 1; R = 4),
/// dictionary-encoded, written through the column writer so that no batch of long strings
/// is ever built: the hostile table of issue 12 in a few kilobytes.
pub fn repeated_term_table(rows: usize, term: &str) -> Vec<u8> {
    use parquet::data_type::{ByteArray, ByteArrayType, FloatType, Int32Type};
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;

    let schema = parse_message_type(
        "message table { required binary term (UTF8); \
         required int32 replica (INTEGER(16, false)); required float weight; }",
    )
    .expect("schema");
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_key_value_metadata(Some(vec![KeyValue::new(
            "ballot.replicas".to_owned(),
            "4".to_owned(),
        )]))
        .build();
    let mut out = Vec::new();
    let mut w =
        SerializedFileWriter::new(&mut out, Arc::new(schema), Arc::new(props)).expect("writer");
    let mut group = w.next_row_group().expect("row group");
    let value = ByteArray::from(bytes::Bytes::copy_from_slice(term.as_bytes()));
    let chunks = || {
        (0..rows)
            .step_by(65_536)
            .map(move |s| s..(s + 65_536).min(rows))
    };
    let mut col = group.next_column().expect("term").expect("term");
    for range in chunks() {
        let values = vec![value.clone(); range.len()];
        col.typed::<ByteArrayType>()
            .write_batch(&values, None, None)
            .expect("terms");
    }
    col.close().expect("term");
    let mut col = group.next_column().expect("replica").expect("replica");
    for range in chunks() {
        let values: Vec<i32> = range.map(|i| (i % 4) as i32).collect();
        col.typed::<Int32Type>()
            .write_batch(&values, None, None)
            .expect("replicas");
    }
    col.close().expect("replica");
    let mut col = group.next_column().expect("weight").expect("weight");
    for range in chunks() {
        col.typed::<FloatType>()
            .write_batch(&vec![1.0; range.len()], None, None)
            .expect("weights");
    }
    col.close().expect("weight");
    group.close().expect("row group");
    w.close().expect("close");
    out
}
