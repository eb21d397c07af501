//! `ballot replay` in front of two balancers (issue 31): real `ballot balancer` processes
//! with the same table in front of four `e2e::Backend`s, an open-loop replay spread over
//! both. One balancer is SIGKILLed under load and restarted on the same address with the
//! same config: no query fails at the client (the ones whose connection died, and the ones
//! sent while it was down, went to the other balancer), the restarted balancer serves the
//! same table (the same content hash as the other's) and takes queries again.

mod common;

use std::net::TcpListener;
use std::process::Command;

use common::{ballot, read_json, stderr, stdout};
use e2e::{wait_until, Backend, Balancer, LIMIT};

/// A loopback port free now (bound, then released), for a balancer that must come back on
/// the same address.
fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn config(listen: &str, backends: &[Backend], table: &std::path::Path) -> String {
    let mut c = format!(
        "listen = \"{listen}\"\nadmin_listen = \"127.0.0.1:0\"\nadmin_token = \"t\"\n\
         [health]\ninterval_ms = 100\n\n[policy]\nname = \"table\"\ntable = \"{}\"\n",
        table.display()
    );
    for b in backends {
        c += &format!(
            "\n[[replicas]]\nname = \"{}\"\naddress = \"{}\"\n",
            b.name(),
            b.address()
        );
    }
    c
}

fn start(config: &str) -> Balancer {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ballot"));
    cmd.arg("balancer");
    Balancer::start_with(cmd, tempfile::tempdir().unwrap(), config)
}

fn content_hash(b: &Balancer) -> String {
    let t = b.admin("GET", "/admin/table", b"").json();
    t["content_hash"].as_str().unwrap().to_owned()
}

#[test]
fn a_balancer_killed_under_load_fails_no_query_and_comes_back_with_the_same_table() {
    let dir = tempfile::tempdir().unwrap();
    let backends: Vec<Backend> = (0..4).map(|i| Backend::start(&format!("r{i}"))).collect();
    let received = || backends.iter().map(Backend::received).sum::<u64>();
    let table = e2e::write_votes(dir.path(), 4, &[("weather", 0), ("google", 1), ("news", 2)]);
    let listen_a = format!("127.0.0.1:{}", free_port());
    let config_a = config(&listen_a, &backends, &table);
    let mut a = start(&config_a);
    let b = start(&config("127.0.0.1:0", &backends, &table));
    let json = dir.path().join("replay.json");
    let (ta, tb) = (
        format!("http://{}", a.addr()),
        format!("http://{}", b.addr()),
    );
    let args: Vec<String> = [
        "replay",
        "--synth-queries",
        "20000",
        "--target",
        &ta,
        "--target",
        &tb,
        "--rate",
        "400",
        "--json",
        json.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    // 4,000 test queries at 400 a second: ten seconds of load.
    let replay = std::thread::spawn(move || {
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        ballot(&argv)
    });
    wait_until(LIMIT, "600 queries answered", || received() >= 600);
    a.signal(libc::SIGKILL);
    a.wait_exit(LIMIT);
    let at_kill = received();
    wait_until(LIMIT, "400 more queries through the other", || {
        received() >= at_kill + 400
    });
    let restarted = start(&config_a);
    assert_eq!(
        restarted.addr().to_string(),
        listen_a,
        "back on its address"
    );
    let out = replay.join().unwrap();
    assert!(out.status.success(), "{}\n{}", stderr(&out), stdout(&out));
    let doc = read_json(&json);
    eprintln!(
        "sent {}, ok {}, retried {}, errors {}",
        doc["sent"], doc["ok"], doc["retried"], doc["error_total"]
    );
    assert_eq!(doc["error_total"], 0, "{doc}");
    assert_eq!(doc["ok"], doc["sent"], "{doc}");
    assert!(doc["retried"].as_u64().unwrap() > 0, "{doc}");
    assert_eq!(doc["config"]["targets"].as_array().unwrap().len(), 2);
    // The restarted balancer serves the same table and took queries again.
    assert_eq!(content_hash(&restarted), content_hash(&b));
    let served = restarted.metric("ballot_requests_total").unwrap_or(0.0);
    assert!(
        served > 0.0,
        "the restarted balancer served {served} queries"
    );
}
