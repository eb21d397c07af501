//! The `tantivy-engine` command: `index` builds a Tantivy index from a ballot replica index
//! ([`crate::build`]); `serve` serves one ([`crate::http`]), after evicting its pages from
//! the page cache unless `--keep-page-cache`, and prints `listening on ADDR` once it
//! accepts connections. SIGTERM or SIGINT stops it, letting searches in flight finish.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

use crate::directory::{Dictionary, PostingsIo};
use crate::search::{Engine, Readahead};

/// A Tantivy index of ballot's documents, and a search server over it.
#[derive(Parser, Debug)]
#[command(name = "tantivy-engine", version)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Build a Tantivy index holding a ballot replica index's documents.
    Index(IndexArgs),
    /// Serve a Tantivy index over HTTP (tantivy-cli's GET /api/?q=).
    Serve(ServeArgs),
}

/// Arguments of `tantivy-engine index`.
#[derive(Args, Debug)]
pub struct IndexArgs {
    /// The ballot replica index (`ballot build-index` output) whose documents to index.
    #[arg(long)]
    pub from: PathBuf,
    /// Output directory (created; must not hold an index already).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Indexing memory in MiB, split over the threads.
    #[arg(long, default_value_t = 1024)]
    pub heap_mib: usize,
    /// Indexing threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
}

/// Arguments of `tantivy-engine serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The Tantivy index directory.
    #[arg(long)]
    pub index: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9200")]
    pub listen: SocketAddr,
    /// Searches in flight at most (threads of the blocking pool).
    #[arg(long, default_value_t = 32)]
    pub threads: usize,
    /// Keep the index's pages that are already in the page cache (default: evict them, so
    /// the server starts cold).
    #[arg(long)]
    pub keep_page_cache: bool,
    /// Read-ahead on a miss: off (MADV_RANDOM, POSIX_FADV_RANDOM) or the kernel's default.
    #[arg(long, value_enum, default_value_t = Readahead::Off)]
    pub readahead: Readahead,
    /// Where the term dictionary lives: ram (read into memory at start, so the page cache
    /// holds postings only, as in ballot's replica) or page-cache (mapped like the postings).
    #[arg(long, value_enum, default_value_t = Dictionary::Ram)]
    pub dictionary: Dictionary,
    /// How postings are read: mmap (page faults on the mapped index) or pread (each list's
    /// bytes copied into the server's memory 16 KiB at a time, as Lucene's NIOFSDirectory
    /// and so Elasticsearch's default store read them).
    #[arg(long, value_enum, default_value_t = PostingsIo::Mmap)]
    pub postings_io: PostingsIo,
}

/// Runs the command line `args`; errors are printed with their causes.
pub fn main_from(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let result = match cli.command {
        Command::Index(a) => index(&a),
        Command::Serve(a) => serve(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn index(a: &IndexArgs) -> Result<()> {
    let heap = a
        .heap_mib
        .checked_mul(1 << 20)
        .context("--heap-mib is too large")?;
    let s = crate::build::build(&a.from, &a.output, heap, a.threads)?;
    println!(
        "indexed {} docs, {} terms, {} postings into {} ({} bytes) in {:.1} s",
        s.docs,
        s.terms,
        s.postings,
        a.output.display(),
        s.index_bytes,
        s.elapsed.as_secs_f64()
    );
    Ok(())
}

fn serve(a: &ServeArgs) -> Result<()> {
    if !a.keep_page_cache {
        let bytes = crate::page_cache::evict(&a.index)?;
        println!(
            "evicted {bytes} bytes of {} from the page cache",
            a.index.display()
        );
    }
    let engine = Arc::new(Engine::open(
        &a.index,
        a.readahead,
        a.dictionary,
        a.postings_io,
    )?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(a.threads.max(1))
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(a.listen)
            .await
            .with_context(|| format!("cannot listen on {}", a.listen))?;
        println!("listening on {}", listener.local_addr()?);
        let stop = async {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut term), Ok(mut int)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) else {
                return std::future::pending().await;
            };
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        };
        axum::serve(listener, crate::http::router(engine))
            .with_graceful_shutdown(stop)
            .await
            .context("serving")
    })
}
