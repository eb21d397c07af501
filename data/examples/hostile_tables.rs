//! Writes the hostile voting tables of issue 12 and loads one of them, so the loader's peak
//! memory can be measured from outside (`/usr/bin/time -v`).
//!
//! ```text
//! cargo build --release -p data --example hostile_tables
//! target/release/examples/hostile_tables write DIR
//! /usr/bin/time -v target/release/examples/hostile_tables load DIR/long-term-1m.parquet
//! ```
//!
//! `write` makes `long-term-1m.parquet` (one 30 KB term × 1M rows, dictionary-encoded),
//! `long-term-100k.parquet` (30 KB × 100k rows), `huge-terms.parquet` (three 100 MB terms)
//! `plain-long-terms.parquet` (30 KB terms × 1,000 rows without a dictionary) and, for
//! comparison, the valid `valid-1m.parquet` (250k terms × 4 replicas). `load`
//! reads a table with the default limits and prints the outcome.

#[path = "../tests/support/tables.rs"]
mod tables;

use std::path::{Path, PathBuf};

use tables::{repeated_term_table, write_table, Layout};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match (args.get(1).map(String::as_str), args.get(2)) {
        (Some("write"), Some(dir)) => {
            let dir = PathBuf::from(dir);
            std::fs::create_dir_all(&dir).expect("mkdir");
            let long = "x".repeat(30_000);
            for (name, rows) in [
                ("long-term-1m.parquet", 1_000_000),
                ("long-term-100k.parquet", 100_000),
            ] {
                std::fs::write(dir.join(name), repeated_term_table(rows, &long)).expect("write");
            }
            write_table(
                &dir.join("huge-terms.parquet"),
                3,
                |i| char::from(b'a' + i as u8).to_string().repeat(100 << 20),
                Layout::default(),
            );
            write_table(
                &dir.join("plain-long-terms.parquet"),
                1_000,
                |i| format!("{i}{long}"),
                Layout {
                    dictionary: false,
                    ..Layout::default()
                },
            );
            // A valid table for comparison: 250k terms, each voting for all 4 replicas.
            write_table(
                &dir.join("valid-1m.parquet"),
                1_000_000,
                |i| format!("term{}", i / 4),
                Layout::default(),
            );
            for entry in std::fs::read_dir(&dir).expect("list") {
                let entry = entry.expect("entry");
                let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
                println!("{}: {len} bytes", entry.path().display());
            }
        }
        (Some("load"), Some(path)) => {
            match data::table::VotingTable::read_parquet(Path::new(path), None) {
                Ok(t) => println!("accepted: {} rows", t.rows.len()),
                Err(e) => {
                    let msg = e.to_string();
                    let cut = msg.char_indices().nth(300).map_or(msg.len(), |(i, _)| i);
                    println!("rejected: {}", &msg[..cut]);
                }
            }
        }
        _ => {
            eprintln!("usage: hostile_tables write DIR | load FILE");
            std::process::exit(2);
        }
    }
}
