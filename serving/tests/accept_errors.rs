//! Out of file descriptors, the accept loop pauses instead of spinning, the connections
//! already open keep being served, and accepting resumes once descriptors are free. The
//! test lowers this test binary's own open-file limit (it is the only test in the binary)
//! and fills the descriptor table with `/dev/null` until `accept` fails with EMFILE.

use std::convert::Infallible;
use std::fs::File;
use std::time::{Duration, Instant};

use hyper::{Request, Response};

use e2e::http::Conn;

fn cpu_time() -> Duration {
    // SAFETY: getrusage fills one struct we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF covers every thread of this process.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) }, 0);
    let t = |tv: libc::timeval| {
        Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64)
    };
    t(u.ru_utime) + t(u.ru_stime)
}

#[test]
fn accept_failures_pause_the_loop_and_open_connections_keep_being_served() {
    let lim = libc::rlimit {
        rlim_cur: 256,
        rlim_max: 256,
    };
    // SAFETY: setrlimit reads one struct we own.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let gate = serving::Gate::new("test", serving::Limits::default());
            let make = |_peer| {
                hyper::service::service_fn(|_req: Request<hyper::body::Incoming>| async {
                    Ok::<_, Infallible>(Response::new("hi".to_owned()))
                })
            };
            serving::serve(gate, listener, make, stop_rx).await;
        });
    });

    let mut a = Conn::open(addr, Duration::from_secs(5));
    a.send("GET", "/", &[], b"");
    assert_eq!(a.read_response().expect("first answer").status, 200);

    // Fill the descriptor table, then free one for the next client's socket: the server's
    // accept of that client fails with EMFILE.
    let mut filler = Vec::new();
    while let Ok(f) = File::open("/dev/null") {
        filler.push(f);
    }
    filler.pop();
    let mut b = Conn::open(addr, Duration::from_secs(5));
    b.send("GET", "/", &[], b"");

    let cpu_before = cpu_time();
    let start = Instant::now();
    let mut served = 0;
    while start.elapsed() < Duration::from_secs(1) {
        a.send("GET", "/", &[], b"");
        assert_eq!(a.read_response().expect("the open connection").status, 200);
        served += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    let cpu = cpu_time() - cpu_before;
    b.set_read_timeout(Some(Duration::from_millis(10)));
    assert!(
        b.read_response().is_err(),
        "accepted with no descriptor free"
    );
    eprintln!("1 s of EMFILE: {served} answers on the open connection, {cpu:?} CPU");
    assert!(
        cpu < Duration::from_millis(300),
        "the accept loop spins: {cpu:?} CPU in 1 s"
    );

    drop(filler);
    b.set_read_timeout(Some(Duration::from_secs(3)));
    let start = Instant::now();
    assert_eq!(
        b.read_response().expect("served once fds are free").status,
        200
    );
    eprintln!(
        "the waiting client was served {:?} after descriptors freed",
        start.elapsed()
    );

    stop_tx.send(true).unwrap();
    drop((a, b));
    server.join().unwrap();
}
