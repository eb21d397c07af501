//! One tokenization and one routing-state snapshot per request, whatever the config asks
//! for: the data plane serves real HTTP on loopback from this process, on one thread (a
//! current-thread runtime), in front of `e2e::Backend`s, and the per-thread probe
//! (`balancer_server::ctx::probe`) counts what the requests cost. Unsharded with every hook
//! on (the table with a ramp and its cache hint, shadow caches, work feedback, routing
//! headers, the access log), and sharded (two shards of two replicas, the column chosen
//! once for both).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use balancer_server::config::Config;
use balancer_server::{ctx, front, Balancer};
use data::sizes::SizeTable;
use data::table::{TableRow, VotingTable};
use e2e::{get, Backend, Reply};

/// Serves `queries` requests of `target` through the balancer of `config` and returns the
/// tokenizations and routing snapshots they made.
fn count(config: &str, target: &str, queries: u64) -> (u64, u64) {
    let cfg = Config::parse(config, Path::new("one_pass.toml"), |_| None).expect("config");
    let lb = Arc::new(Balancer::build(cfg).expect("balancer"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let gate = serving::Gate::new("client", serving::Limits::default());
        let server = tokio::spawn(front::serve_client(listener, lb, gate, stopped));
        let before = ctx::probe();
        let target = target.to_owned();
        let client = tokio::task::spawn_blocking(move || {
            for _ in 0..queries {
                let r = get(addr, &target);
                assert_eq!(r.status, 200, "{}", r.text());
                assert!(
                    r.headers.contains_key("x-ballot-replica"),
                    "{:?}",
                    r.headers
                );
            }
        });
        client.await.expect("the client ran");
        let after = ctx::probe();
        let _ = stop.send(true);
        let _ = server.await;
        (after.0 - before.0, after.1 - before.1)
    })
}

fn replicas(backends: &[&Backend], shards: &[usize]) -> String {
    backends
        .iter()
        .zip(shards)
        .map(|(b, s)| {
            format!(
                "[[replicas]]\nname = \"{}\"\naddress = \"{}\"\nshard = {s}\n",
                b.name(),
                b.address()
            )
        })
        .collect()
}

#[test]
fn a_request_with_every_hook_tokenizes_once_and_snapshots_once() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t.parquet");
    let rows = vec![
        TableRow::new("the", 0, 1.0),
        TableRow::new("the", 1, 0.2),
        TableRow::new("cat", 1, 1.0),
    ];
    VotingTable::new(2, rows, Default::default())
        .unwrap()
        .write_parquet(&table)
        .unwrap();
    let sizes = dir.path().join("sizes.parquet");
    SizeTable::from_pairs([("the".to_owned(), 5_000), ("cat".to_owned(), 800)])
        .write_parquet(&sizes)
        .unwrap();
    let (b0, b1) = (Backend::start("b0"), Backend::start("b1"));
    let config = format!(
        "listen = \"127.0.0.1:0\"\nrouting_headers = true\naccess_log = true\n\
         backlog_reports_ms = 1000\n\
         [policy]\nname = \"table\"\ntable = \"{}\"\nsizes = \"{}\"\ncache_admission = 0.5\n\
         [shadow]\ncache_bytes = 100000\n{}",
        table.display(),
        sizes.display(),
        replicas(&[&b0, &b1], &[0, 0])
    );
    let (tokenized, snapshots) = count(&config, "/search?q=the+cat+dog", 40);
    assert_eq!((tokenized, snapshots), (40, 40));
}

#[test]
fn a_sharded_request_tokenizes_once_and_snapshots_once_for_every_shard() {
    let answer = |shard: usize| {
        Reply::Json(
            200,
            format!(
                r#"{{"terms":["cat"],"total_hits":1,"doc_ids":[{shard}],"shard":{{"index":{shard},"count":2}}}}"#
            ),
        )
    };
    let backends = [
        Backend::with_reply("s0a", answer(0)),
        Backend::with_reply("s0b", answer(0)),
        Backend::with_reply("s1a", answer(1)),
        Backend::with_reply("s1b", answer(1)),
    ];
    let refs: Vec<&Backend> = backends.iter().collect();
    for route in ["same-column", "per-shard"] {
        let config = format!(
            "listen = \"127.0.0.1:0\"\nrouting_headers = true\n\
             [policy]\nname = \"term-vote\"\n[shards]\nroute = \"{route}\"\n{}",
            replicas(&refs, &[0, 0, 1, 1])
        );
        let (tokenized, snapshots) = count(&config, "/search?q=the+cat", 30);
        assert_eq!((tokenized, snapshots), (30, 30), "{route}");
    }
}
