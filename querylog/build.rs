//! Sets the `ballot_data` cfg when `BALLOT_DATA` names the real query logs, so that the
//! tests on them are reported as ignored, with how to run them, when it does not (rather
//! than passing without checking anything).

fn main() {
    println!("cargo::rerun-if-env-changed=BALLOT_DATA");
    println!("cargo::rustc-check-cfg=cfg(ballot_data)");
    if std::env::var_os("BALLOT_DATA").is_some() {
        println!("cargo::rustc-cfg=ballot_data");
    }
}
