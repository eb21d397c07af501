//! The Parquet reader turns a decoder panic into an error without touching the process's
//! panic hook (a library must not), and `data::parquet_guard::quiet_decoder_panics`, the
//! opt-in of binaries, silences exactly those caught panics. One test in its own binary,
//! because the panic hook is process-wide.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use querylog::{read_log, LogError, ReadOptions};

#[test]
fn decoder_panics_reach_the_hook_until_a_binary_quiets_them() {
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&seen);
    std::panic::set_hook(Box::new(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    }));
    // A file whose decoding panics inside the `parquet` crate (found by fuzzing).
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/logs/corrupt-parquet/vlq-too-long.parquet");
    let read = || read_log(&path, &ReadOptions::default());

    let e = read().unwrap_err();
    assert!(matches!(e, LogError::ParquetCorrupt { .. }), "{e}");
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1,
        "the library left the hook alone"
    );

    data::parquet_guard::quiet_decoder_panics();
    let e = read().unwrap_err();
    assert!(e.to_string().contains("MAX_VLQ_BYTE_LEN"), "{e}");
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1,
        "a caught decoder panic is quiet"
    );

    let other = std::panic::catch_unwind(|| panic!("not a decoder"));
    assert!(other.is_err());
    assert_eq!(
        seen.load(Ordering::SeqCst),
        2,
        "other panics reach the old hook"
    );
    let _ = std::panic::take_hook();
}
