//! The index schema: one text field, [`BODY`], split on whitespace (the documents are ballot
//! terms joined by spaces, already tokenized by `data::tokenizer`), doc ids only, not stored.

use tantivy::schema::{IndexRecordOption, Schema, TextFieldIndexing, TextOptions};

/// The one field.
pub const BODY: &str = "body";

/// Tantivy's built-in whitespace tokenizer.
pub const TOKENIZER: &str = "whitespace";

/// The schema of the indexes [`crate::build`] writes.
pub fn schema() -> Schema {
    let indexing = TextFieldIndexing::default()
        .set_tokenizer(TOKENIZER)
        .set_index_option(IndexRecordOption::Basic)
        .set_fieldnorms(false);
    let mut builder = Schema::builder();
    builder.add_text_field(BODY, TextOptions::default().set_indexing_options(indexing));
    builder.build()
}
