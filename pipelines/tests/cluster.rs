//! The aggregation engines agree (built with the `cluster` feature): the same partitioned
//! log is aggregated by embedded DataFusion and by a Ballista cluster of one scheduler and
//! two executor processes, all real `ballot` processes on loopback. The distinct-query
//! counts are identical, and equal to counting the records directly; the tables trained
//! from either engine's counts are identical row for row. A text log is counted in-process;
//! inputs an engine cannot read get errors that name the file.

#![cfg(feature = "cluster")]

mod common;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use common::{assert_clean_failure, assert_exit, ballot, partitioned_log, stderr, stdout};
use data::table::VotingTable;
use e2e::{start_listening, Running};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use querylog::{read_log, ReadOptions};

const LIMIT: Duration = Duration::from_secs(60);

/// `(query, records)` rows of a counts file.
fn read_counts(path: &Path) -> Vec<(String, i64)> {
    let file = std::fs::File::open(path).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let mut rows = Vec::new();
    for batch in reader {
        let b = batch.unwrap();
        let q = b.column_by_name("query").unwrap().as_string::<i32>();
        let n = b
            .column_by_name("records")
            .unwrap()
            .as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            rows.push((q.value(i).to_owned(), n.value(i)));
        }
    }
    rows
}

/// A port that was free a moment ago (an executor announces its port, so it cannot be 0).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A scheduler and two executors; the scheduler's address.
fn start_cluster(dir: &Path) -> (Vec<Running>, String) {
    let ballot_bin = env!("CARGO_BIN_EXE_ballot");
    let (scheduler, addr, _lines) = start_listening(
        Command::new(ballot_bin).args(["cluster", "scheduler", "--bind", "127.0.0.1:0"]),
        &dir.join("scheduler.log"),
        LIMIT,
        "ballot cluster scheduler",
    );
    let mut procs = vec![scheduler];
    for i in 0..2 {
        let work = dir.join(format!("executor-{i}"));
        let port = free_port().to_string();
        let child = Command::new(ballot_bin)
            .args(["cluster", "executor", "--scheduler", &addr, "--port", &port])
            .args(["--vcores", "1", "--work-dir", work.to_str().unwrap()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join(format!("executor-{i}.log"))).unwrap())
            .spawn()
            .expect("start an executor");
        procs.push(Running::new(child, format!("executor {i}")));
    }
    (procs, addr)
}

#[test]
fn embedded_and_ballista_engines_count_and_train_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let freq = partitioned_log(d, 30_000, 4);
    let lake = d.join("lake");
    let (mut procs, addr) = start_cluster(d);
    let ballista = format!("ballista://{addr}");

    // Counts: both engines, and a direct count of the records.
    let mut counted = Vec::new();
    for (name, engine) in [("embedded", "datafusion"), ("ballista", ballista.as_str())] {
        let out_path = d.join(format!("counts-{name}.parquet"));
        let run = ballot(&[
            "aggregate",
            "--log",
            lake.to_str().unwrap(),
            "--engine",
            engine,
            "-o",
            out_path.to_str().unwrap(),
        ]);
        assert!(
            run.status.success(),
            "aggregate on {engine}: {}",
            stderr(&run)
        );
        assert!(
            stdout(&run).contains(&format!("engine {engine}")),
            "{}",
            stdout(&run)
        );
        counted.push(read_counts(&out_path));
    }
    let log = read_log(&d.join("flat.parquet"), &ReadOptions::default()).unwrap();
    let mut direct: BTreeMap<&str, i64> = BTreeMap::new();
    for r in &log.records {
        *direct.entry(r.query.as_str()).or_default() += 1;
    }
    let direct: Vec<(String, i64)> = direct.into_iter().map(|(q, n)| (q.to_owned(), n)).collect();
    assert!(direct.len() > 1000, "{} distinct queries", direct.len());
    assert_eq!(
        counted[0], direct,
        "embedded DataFusion counts differ from a direct count"
    );
    assert_eq!(
        counted[1], direct,
        "Ballista counts differ from a direct count"
    );

    // Tables trained from each engine's counts (3 days fit, the newest validates).
    let mut tables = Vec::new();
    for (name, engine) in [("embedded", "datafusion"), ("ballista", ballista.as_str())] {
        let table = d.join(format!("table-{name}.parquet"));
        let run = ballot(&[
            "train",
            "--engine",
            engine,
            "--log",
            lake.to_str().unwrap(),
            "--freq",
            freq.to_str().unwrap(),
            "--replicas",
            "4",
            "--iterations",
            "3",
            "--ufactors",
            "30",
            "-o",
            table.to_str().unwrap(),
        ]);
        assert!(run.status.success(), "train on {engine}: {}", stderr(&run));
        let err = stderr(&run);
        assert!(
            err.contains("aggregating 3 fit partitions (3 days)"),
            "{err}"
        );
        tables.push(VotingTable::read_parquet(&table, Some(4)).unwrap());
    }
    assert!(tables[0].rows.len() > 100, "{} rows", tables[0].rows.len());
    assert_eq!(
        tables[0].rows, tables[1].rows,
        "the engines trained different tables"
    );
    let digest = |t: &VotingTable| t.metadata.get("ballot.train.log_digest").cloned();
    assert_eq!(digest(&tables[0]), digest(&tables[1]));

    // The executors served the whole run.
    for p in &mut procs[1..] {
        assert!(p.try_wait().is_none(), "an executor exited early");
    }
    for p in &mut procs {
        p.kill();
    }
}

#[test]
fn engine_inputs_that_cannot_work_are_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    partitioned_log(d, 4_000, 2);
    let lake = d.join("lake");
    let flat = d.join("flat.parquet");
    let table = d.join("t.parquet");
    let t = table.to_str().unwrap();

    let (flat_s, lake_s) = (flat.to_str().unwrap(), lake.to_str().unwrap());
    let train_engine = ["train", "--engine", "datafusion", "--log"];
    assert_clean_failure(
        &[&train_engine[..], &[flat_s, "-o", t]].concat(),
        &["directory of daily Parquet partitions"],
    );
    assert_clean_failure(
        &[
            "aggregate",
            "--log",
            lake_s,
            "--from",
            "2006-03-01T06:00:00",
            "-o",
            t,
        ],
        &["cut through the day of partition date=2006-03-01"],
    );

    // A text log: read by the local readers and counted in-process; Ballista refuses it.
    let text = d.join("log.txt");
    std::fs::write(&text, "weather\nnews\nweather\n").unwrap();
    let counts = d.join("text-counts.parquet");
    let run = ballot(&[
        "aggregate",
        "--log",
        text.to_str().unwrap(),
        "-o",
        counts.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    assert_eq!(
        read_counts(&counts),
        vec![("news".to_owned(), 1), ("weather".to_owned(), 2)]
    );
    let ballista = "ballista://127.0.0.1:9";
    assert_clean_failure(
        &[
            "aggregate",
            "--log",
            text.to_str().unwrap(),
            "--engine",
            ballista,
            "-o",
            t,
        ],
        &["log.txt", "ballot ingest"],
    );
    // The synthetic default is in memory too: Ballista cannot read it.
    assert_clean_failure(
        &["aggregate", "--engine", ballista, "-o", t],
        &["the synthetic default log"],
    );
    // The engine picks the split by day: the split flags are refused, not ignored.
    assert_exit(
        &[
            &train_engine[..],
            &[lake_s, "--split-time", "2006-03-02T00:00:00", "-o", t],
        ]
        .concat(),
        2,
        &["cannot be used with"],
    );
    assert_exit(
        &[
            "aggregate",
            "--log",
            flat_s,
            "--engine",
            "spark://h:1",
            "-o",
            t,
        ],
        2,
        &["unknown engine"],
    );
}
