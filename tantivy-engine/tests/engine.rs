//! The Tantivy engine end to end on real files: a ballot replica index, the Tantivy index
//! built from it, its size table, searches, and the HTTP API over loopback.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use tantivy_engine::directory::{Dictionary, IndexFiles, PostingsIo};
use tantivy_engine::search::{Engine, Readahead};

const DOCS: u32 = 2_000;
const TERMS: [(&str, u64); 5] = [
    ("apple", 50),
    ("pear", 700),
    ("fig", 3),
    ("kiwi", 2000),
    ("plum", 120),
];

/// Builds the replica index and its Tantivy twin in `dir`; returns the Tantivy index path.
fn indexes(dir: &Path) -> std::path::PathBuf {
    let replica = dir.join("replica");
    let pairs: Vec<(String, u64)> = TERMS.iter().map(|&(t, df)| (t.to_owned(), df)).collect();
    replica::build_index(&replica, DOCS, pairs).unwrap();
    let out = dir.join("tantivy");
    let s = tantivy_engine::build::build(&replica, &out, 50 << 20, 1).unwrap();
    assert_eq!((s.docs, s.terms), (DOCS, 5));
    assert_eq!(s.postings, TERMS.iter().map(|&(_, df)| df).sum::<u64>());
    out
}

fn union(terms: &[&str]) -> usize {
    let mut docs = BTreeSet::new();
    for &(t, df) in TERMS.iter().filter(|(t, _)| terms.contains(t)) {
        docs.extend(replica::doc_ids(t, df as u32, DOCS));
    }
    docs.len()
}

#[test]
fn the_tantivy_index_holds_the_replica_documents_and_its_sizes() {
    let tmp = tempfile::tempdir().unwrap();
    let index = indexes(tmp.path());

    let sizes = tantivy_engine::sizes::term_sizes(&index, None, 0).unwrap();
    let names: Vec<&str> = sizes.sizes.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(names, ["apple", "fig", "kiwi", "pear", "plum"]);
    let bytes = |t: &str| sizes.sizes.iter().find(|(n, _)| n == t).unwrap().1;
    // Lists below one 128-doc block are varints of the gaps (about a byte a doc here), so
    // they grow with df; pear's 700 docs fill five bitpacked blocks.
    assert!(
        bytes("fig") < bytes("apple")
            && bytes("apple") < bytes("plum")
            && bytes("plum") < bytes("pear"),
        "{:?}",
        sizes.sizes
    );
    assert_eq!((sizes.skipped, sizes.segments), (0, 1));
    let total: u64 = sizes.sizes.iter().map(|(_, b)| b).sum();
    let idx: u64 = std::fs::read_dir(&index)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "idx"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    // The .idx file holds the postings and a small footer, nothing else.
    assert!(
        total <= idx && idx - total <= 256,
        "postings {total} bytes, .idx files {idx} bytes"
    );
    let err = tantivy_engine::sizes::term_sizes(&index, Some("title"), 0).unwrap_err();
    assert!(format!("{err:#}").contains("no field \"title\""), "{err:#}");

    // The dictionary held in memory is every segment's `.term` file, whole.
    let mapped = tantivy::directory::MmapDirectory::open(&index).unwrap();
    let ram = IndexFiles::open(
        &index,
        mapped,
        Dictionary::Ram,
        PostingsIo::Mmap,
        libc::POSIX_FADV_RANDOM,
    )
    .unwrap();
    let term_files: Vec<(std::path::PathBuf, usize)> = std::fs::read_dir(&index)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "term"))
        .map(|p| {
            let len = std::fs::metadata(&p).unwrap().len() as usize;
            (p.file_name().unwrap().into(), len)
        })
        .collect();
    assert_eq!(term_files.len(), 1);
    let files: Vec<(std::path::PathBuf, usize)> = ram
        .files()
        .into_iter()
        .map(|(p, n)| (p.to_path_buf(), n))
        .collect();
    assert_eq!(files, term_files);

    let engine = Engine::open(&index, Readahead::Off, Dictionary::Ram, PostingsIo::Mmap).unwrap();
    // The dictionary mapped, and postings read with pread (with and without read-ahead),
    // find what the default finds.
    let others = [
        (Readahead::Off, Dictionary::PageCache, PostingsIo::Mmap),
        (Readahead::Off, Dictionary::Ram, PostingsIo::Pread),
        (Readahead::Kernel, Dictionary::PageCache, PostingsIo::Pread),
    ]
    .map(|(r, d, p)| Engine::open(&index, r, d, p).unwrap());
    for q in [&["apple"][..], &["apple", "fig"], &["pear", "plum", "kiwi"]] {
        let answer = engine.search(&q.join(" "), 10).unwrap();
        assert_eq!(answer.num_hits, union(q), "{q:?}");
        assert_eq!(answer.hits.len(), answer.num_hits.min(10));
        for other in &others {
            let other = other.search(&q.join(" "), 10).unwrap();
            assert_eq!(
                (other.num_hits, &other.hits),
                (answer.num_hits, &answer.hits)
            );
        }
    }
    // The query goes through ballot's tokenizer, as the balancer's does.
    assert_eq!(
        engine.search("Apple, FIG!", 5).unwrap().num_hits,
        union(&["apple", "fig"])
    );
    assert_eq!(engine.search("durian", 5).unwrap().num_hits, 0);
    assert!(engine.search("apple", 0).is_err());

    let evicted = tantivy_engine::page_cache::evict(&index).unwrap();
    assert_eq!(
        evicted,
        tantivy_engine::build::directory_bytes(&index).unwrap()
    );
}

/// One request (the tests' HTTP client, `e2e::get`): the status and the JSON body.
fn get(addr: std::net::SocketAddr, target: &str) -> (u16, Value) {
    let r = e2e::get(addr, target);
    (r.status, r.json())
}

#[test]
fn the_server_answers_tantivy_cli_requests_and_refuses_bad_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let index = indexes(tmp.path());
    let engine =
        Arc::new(Engine::open(&index, Readahead::Off, Dictionary::Ram, PostingsIo::Mmap).unwrap());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move { axum::serve(listener, tantivy_engine::http::router(engine)).await });

    let (status, body) = get(addr, "/api/?q=apple+fig&nhits=3");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["num_hits"], union(&["apple", "fig"]));
    assert_eq!(body["hits"].as_array().unwrap().len(), 3);
    assert_eq!(body["q"], "apple fig");
    let (status, body) = get(addr, "/api?q=pear&k=2");
    assert_eq!(
        (status, body["num_hits"].as_u64()),
        (200, Some(union(&["pear"]) as u64))
    );
    assert_eq!(get(addr, "/healthz").0, 200);
    for (target, message) in [
        ("/api/", "missing query parameter q"),
        ("/api/?q=+", "missing query parameter q"),
        ("/api/?q=pear&nhits=0", "nhits must be"),
        ("/api/?q=pear&nhits=x", "nhits must be"),
        ("/search?q=pear", "no such endpoint"),
    ] {
        let (status, body) = get(addr, target);
        assert_eq!(
            status,
            if target.starts_with("/api") { 400 } else { 404 },
            "{target}"
        );
        assert!(
            body["error"].as_str().unwrap().contains(message),
            "{target}: {body}"
        );
    }
}
