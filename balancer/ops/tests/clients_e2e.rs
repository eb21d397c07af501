//! The official search clients through the balancer (needs `python3` with `venv`, `node`
//! with `npm`, and the PyPI and npm registries: run with `BALLOT_CLIENTS=1`, which
//! `.ci/run` sets). The configurations are docs/engines.md's own, read from the page: the
//! Elasticsearch one in front of two stand-in engines (`tests/clients/standin.py`) for
//! elasticsearch-py, opensearch-py and the npm `@elastic/elasticsearch`, the Solr one for
//! pysolr and the JSON Request API. Each call is checked, by the balancer's `/metrics`
//! around it and by `x-ballot-reason` where the client shows headers, to be routed by the
//! policy (or, for the calls that are not searches, forwarded blind by the fallback); the
//! test prints the table of call, route (from the access log) and reason.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use e2e::{output_within, wait_until, Balancer, LIMIT};

const BALANCER: &str = env!("CARGO_BIN_EXE_balancer");

/// The folder of the clients' scripts.
fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// The TOML block of docs/engines.md that sets `preset = "<preset>"`.
fn documented(preset: &str) -> String {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/engines.md");
    let text = std::fs::read_to_string(&page).expect("docs/engines.md");
    let blocks: Vec<&str> = text
        .split("```toml\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .collect();
    let wanted = format!("preset = \"{preset}\"");
    blocks
        .into_iter()
        .find(|b| b.contains(&wanted))
        .unwrap_or_else(|| panic!("docs/engines.md has no toml block with {wanted}"))
        .to_owned()
}

/// A stand-in engine named `name` on a free port.
struct Standin {
    child: Child,
    port: u16,
}

impl Standin {
    fn start(name: &str) -> Standin {
        let mut child = Command::new("python3")
            .arg(clients_dir().join("standin.py"))
            .args(["--port", "0", "--name", name])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the stand-in engine");
        let mut line = String::new();
        let out = child.stdout.take().expect("stdout");
        std::io::BufReader::new(out)
            .read_line(&mut line)
            .expect("the stand-in's port");
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("port line {line:?}"));
        Standin { child, port }
    }
}

impl Drop for Standin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `cmd` to its end within ten minutes; panics with its output when it fails.
fn run(cmd: &mut Command, what: &str) -> String {
    let out = output_within(cmd, Duration::from_secs(600), what);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A balancer with the documented `preset`'s configuration over both stand-ins.
fn balancer(preset: &str, engines: &[&Standin], dir: tempfile::TempDir) -> Balancer {
    let mut config = format!(
        "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\nrouting_headers = true\n\
         access_log = true\n[policy]\nname = \"term-vote\"\n{}",
        documented(preset)
    );
    for (i, e) in engines.iter().enumerate() {
        config += &format!(
            "[[replicas]]\nname = \"e{i}\"\naddress = \"127.0.0.1:{}\"\n",
            e.port
        );
    }
    Balancer::start_with(Command::new(BALANCER), dir, &config)
}

/// Every case the script printed (`client`, `call`, `expect`, `reason`, `ok`, `why`).
fn cases(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// The routes (`METHOD /path`) of the balancer's access-log lines, in order.
fn routes(lb: &Balancer) -> Vec<String> {
    lb.log()
        .lines()
        .filter(|l| l.contains(" access:"))
        .filter_map(|l| Some(l.split("route=\"").nth(1)?.split('"').next()?.to_owned()))
        .collect()
}

/// Prints the table of call, route and reason (on stderr: `-- --nocapture` shows it);
/// `routes` are the access log's since the first case.
fn check(name: &str, rows: &[serde_json::Value], routes: &[String], at_least: usize) {
    eprintln!(
        "{name}: {} calls\n| client | call | route | expected | reason | ok |",
        rows.len()
    );
    eprintln!("|---|---|---|---|---|---|");
    for (r, route) in rows.iter().zip(
        routes
            .iter()
            .map(String::as_str)
            .chain(std::iter::repeat("?")),
    ) {
        eprintln!(
            "| {} | `{}` | `{route}` | {} | {} | {} |",
            r["client"].as_str().unwrap_or("?"),
            r["call"].as_str().unwrap_or("?"),
            r["expect"].as_str().unwrap_or("?"),
            r["reason"].as_str().unwrap_or("-"),
            r["ok"]
        );
    }
    assert_eq!(routes.len(), rows.len(), "{name}: one request per call");
    assert!(
        rows.len() >= at_least,
        "{name}: {} cases, want {at_least}",
        rows.len()
    );
    let failed: Vec<_> = rows.iter().filter(|r| r["ok"] != true).collect();
    assert!(failed.is_empty(), "{name}: cases that failed: {failed:#?}");
}

#[test]
#[cfg_attr(
    not(ballot_clients),
    ignore = "needs python3 (venv), node (npm) and the package registries: run with BALLOT_CLIENTS=1 (docs/testing.md)"
)]
fn the_official_clients_calls_are_routed_by_the_policy() {
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    run(
        Command::new("python3").arg("-m").arg("venv").arg(&venv),
        "python3 -m venv",
    );
    let pip = venv.join("bin/pip");
    run(
        Command::new(&pip)
            .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
            .arg(clients_dir().join("requirements.txt")),
        "pip install -r requirements.txt",
    );
    let js = tmp.path().join("js");
    std::fs::create_dir(&js).unwrap();
    for f in ["package.json", "js_calls.mjs"] {
        std::fs::copy(clients_dir().join(f), js.join(f)).unwrap();
    }
    run(
        Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&js),
        "npm install",
    );
    let engines = [Standin::start("s0"), Standin::start("s1")];
    let refs: Vec<&Standin> = engines.iter().collect();
    let python = venv.join("bin/python");
    let script = clients_dir().join("python_calls.py");
    for (preset, engine) in [("elasticsearch", "es"), ("solr", "solr")] {
        let lb = balancer(preset, &refs, tempfile::tempdir().unwrap());
        wait_until(LIMIT, "the stand-ins pass their health checks", || {
            lb.get("/healthz").status == 200
        });
        let urls = [
            "--lb".to_owned(),
            format!("http://{}", lb.addr()),
            "--admin".to_owned(),
            format!("http://{}", lb.admin_addr()),
        ];
        let mut py = Command::new(&python);
        py.arg(&script).args(&urls).args(["--engine", engine]);
        let rows = cases(&run(&mut py, "python_calls.py"));
        wait_until(LIMIT, "an access line per call", || {
            routes(&lb).len() >= rows.len()
        });
        let at_least = if engine == "es" { 20 } else { 6 };
        check(
            &format!("Python clients behind `{preset}`"),
            &rows,
            &routes(&lb),
            at_least,
        );
        if preset == "elasticsearch" {
            let before = routes(&lb).len();
            let mut node = Command::new("node");
            node.arg(js.join("js_calls.mjs")).args(&urls);
            let rows = cases(&run(&mut node, "js_calls.mjs"));
            wait_until(LIMIT, "an access line per call", || {
                routes(&lb).len() >= before + rows.len()
            });
            let after = routes(&lb);
            check(
                "@elastic/elasticsearch behind `elasticsearch`",
                &rows,
                &after[before..],
                4,
            );
        }
    }
}
